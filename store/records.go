package store

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"time"
)

// Thread is a conversation and the principal it belongs to. Ownership is recorded for every
// thread at its first run, so that a restart or a thread evicted from a replica's memory
// never frees it for another principal.
type Thread struct {
	ID    string `json:"threadId"`
	Owner string `json:"-"`
	// Title is set when the thread is created (the start of its first user message).
	Title     string    `json:"title,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	LastRunID string    `json:"lastRunId,omitempty"`
	LastRunAt time.Time `json:"lastRunAt"`
	// Running and OpenInterrupts are filled by ListThreads and GetThread: whether a run of
	// the thread holds its lease, and how many interrupts its suspension has open.
	Running        bool `json:"running"`
	OpenInterrupts int  `json:"openInterrupts"`
}

// Threads records who owns which thread.
type Threads interface {
	// ClaimThread returns the thread, creating it for owner (with title) when it does not
	// exist; it fails with ErrThreadOwned when another principal owns it. Safe when two
	// replicas claim the same new thread at once: one creates it, the other sees it.
	ClaimThread(ctx context.Context, threadID, owner, title string) (*Thread, error)
	// GetThread returns a thread, or an error wrapping ErrNotFound.
	GetThread(ctx context.Context, threadID string) (*Thread, error)
	// ListThreads returns owner's threads, most recently updated first, at most limit.
	ListThreads(ctx context.Context, owner string, limit int) ([]Thread, error)
	// ThreadsPage returns owner's threads whose id starts with prefix, newest first by
	// creation (equal times: greater id first), after before (nil: from the newest), at
	// most limit (and MaxThreadsPage). prefix is an id family, the id up to and including
	// its first '-' ("mcp-"); anything else wraps ErrBadFamily. On the SQL stores a page is
	// one index range, whatever the number of threads owner holds.
	ThreadsPage(ctx context.Context, owner, prefix string, before *ThreadCursor, limit int) ([]Thread, error)
	// DeleteThread removes a thread with its messages, event logs, finished runs,
	// suspension and resolved ids. It fails with ErrThreadBusy while a run holds the thread
	// (stop it first); deleting an absent thread is no error.
	DeleteThread(ctx context.Context, threadID string) error
	// ClaimThreadCapped is ClaimThread that refuses to create a thread for an owner who
	// has max threads already (ErrTooManyThreads, nothing recorded); max <= 0 is no cap.
	// Exact when replicas create threads of one owner at once: the count and the insert
	// are serialised per owner.
	ClaimThreadCapped(ctx context.Context, threadID, owner, title string, max int) (*Thread, error)
	// SweepThreads deletes at most limit threads untouched since cutoff (server.
	// thread_retention), as DeleteThread does, and returns how many. Kept whatever their
	// age: a thread with a running run, a run ended since cutoff, a lost run whose
	// leftovers are not cleaned up yet, or a suspension (its parked work is cancelled by
	// the expiry sweep or an explicit delete, never dropped). Of replicas sweeping at once
	// only one does (the others return 0).
	SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	// ExpiredThread reports whether SweepThreads deleted the thread (a tombstone is kept
	// per swept thread id: its owner and when; DeleteThread keeps none), and whose it was.
	ExpiredThread(ctx context.Context, threadID string) (owner string, expired bool, err error)
	// ThreadStatus reads in one go what a run's start asks of a thread its replica does
	// not know: whether it has messages, whose its suspension is, and ExpiredThread's
	// answer. An absent thread is no error (the zero ThreadStatus).
	ThreadStatus(ctx context.Context, threadID string) (ThreadStatus, error)
}

// ThreadStatus is what Threads.ThreadStatus reads of a thread.
type ThreadStatus struct {
	// HasMessages: the store holds messages of the thread.
	HasMessages bool
	// Suspended: the thread has a stored suspension, of SuspensionOwner.
	Suspended       bool
	SuspensionOwner string
	// Expired and ExpiredOwner are ExpiredThread's: SweepThreads deleted the thread, which
	// was ExpiredOwner's.
	Expired      bool
	ExpiredOwner string
}

// ErrTooManyThreads is returned by ClaimThreadCapped and StartRun when the owner has the
// most threads allowed already.
var ErrTooManyThreads = errors.New("store: too many threads for this principal")

// Run states kept in the runs table. A run is RunRunning until EndRun records how it ended.
const (
	RunRunning = "running"
	// RunLost marks a run whose replica stopped heartbeating before it ended.
	RunLost = "lost"
)

// RunRecord is one run as the store knows it.
type RunRecord struct {
	ThreadID string
	RunID    string
	// Replica is the id of the process that owns (streams and executes) the run.
	Replica    string
	State      string
	StartedAt  time.Time
	UpdatedAt  time.Time
	LeaseUntil time.Time
	// Epoch is the run's fencing token: 1 when it begins, one more at every takeover.
	// Every write that belongs to the run carries the epoch its writer owns it under, and
	// the store refuses it (ErrFenced) once the epoch has moved on.
	Epoch int64
	// StopRequested: another replica asked the owner to stop the run.
	StopRequested bool
	// Work is the run's downstream work (A2A task ids with agent and state, MCP calls with
	// their idempotency) as one JSON document owned by the engine.
	Work json.RawMessage
}

// Runs holds the active run of every thread, across replicas.
type Runs interface {
	// BeginRun records run runID of threadID as running on replica with a lease of the given
	// length. It fails with ErrThreadBusy when another run of the thread is running and its
	// lease holds; a running run whose lease lapsed is marked RunLost first. Beginning a run
	// id again (some clients reuse run ids) replaces the old record and drops its events;
	// the new record's epoch is then one more than the old one's, so that a writer of the
	// old run is fenced. It returns the run's epoch.
	BeginRun(ctx context.Context, threadID, runID, replica string, lease time.Duration) (epoch int64, err error)
	// EndRun records how a run ended (any state but RunRunning) and releases its thread. It
	// fails with ErrFenced when the run's epoch is not epoch, and with ErrNotFound without
	// the run.
	EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error
	// EndRunStep is EndRun with step, the run's last journal step, recorded as the run's
	// under epoch (as RecordStep does; its ThreadID, RunID, Epoch, Seq and At are set) in
	// the same write: both or neither. A run's end is one write where it was two.
	EndRunStep(ctx context.Context, threadID, runID string, epoch int64, state string, step *Step) error
	// EndRunMessages is EndRunStep (EndRun when step is nil) with msgs, the messages the
	// run added to its thread, saved as SaveMessages saves them, in the same write under
	// the same guard: both or neither, and a stale epoch (ErrFenced) stores no message. A
	// run's end is one write where it was two. Messages SaveMessages refuses (no id, not
	// JSON) are refused before anything is written.
	EndRunMessages(ctx context.Context, threadID, runID string, epoch int64, state string, step *Step, msgs []Message) error
	// HeartbeatRuns extends the lease of every running run owned by replica and returns
	// them (with their epoch): a run of this replica that is not among them was taken over
	// or ended elsewhere.
	HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]RunRef, error)
	// GetRun returns one run, or an error wrapping ErrNotFound.
	GetRun(ctx context.Context, threadID, runID string) (*RunRecord, error)
	// ActiveRun returns the thread's running run whose lease holds, or ErrNotFound.
	ActiveRun(ctx context.Context, threadID string) (*RunRecord, error)
	// ThreadRuns returns the thread's most recent runs (by start, newest first), at most
	// limit: what a thread's earlier runs started downstream (their Work) outlives the
	// process, so a task the thread started before a restart is still the thread's.
	ThreadRuns(ctx context.Context, threadID string, limit int) ([]RunRecord, error)
	// SaveRunWork replaces the downstream-work document of a run (ErrNotFound without one,
	// ErrFenced when the run's epoch is not epoch).
	SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error
	// RequestStop records a stop request on a running run, for the replica that owns it
	// (StopRequests), and returns that run. It fails with ErrNotFound when the run is not
	// running.
	RequestStop(ctx context.Context, threadID, runID string) (*RunRecord, error)
	// StopRequests returns replica's running runs with a stop request.
	StopRequests(ctx context.Context, replica string) ([]RunRecord, error)
	// ClaimLapsedRuns hands replica, for cleanup, at most limit runs that BeginRun marked
	// RunLost to free their thread (a new run started on the thread after the old run's
	// lease lapsed), each once: their leftovers (remote tasks) are cancelled by the
	// claimer, under the returned epoch (moved on by one). Lapsed runs that are still running are TakeOverRuns', not this.
	ClaimLapsedRuns(ctx context.Context, replica string, limit int) ([]RunRecord, error)
	// TakeOverRuns makes replica the owner of at most limit running runs of other
	// replicas whose lease has lapsed (their replica died or handed them off), renews
	// their lease, moves their epoch on by one (fencing the old owner's writes) and returns
	// them: they stay running, and replica continues them from
	// their checkpoint (Work). Two replicas taking over at once never get the same run, and
	// a replica never takes its own runs (a late heartbeat is not a death). With anyLease
	// the lease is not looked at: a single process that starts (SQLite, one replica by
	// definition) takes over every run a previous process left running.
	TakeOverRuns(ctx context.Context, replica string, lease time.Duration, limit int, anyLease bool) ([]RunRecord, error)
	// TakeOverReleasedRuns is TakeOverRuns for only the runs whose replica released them
	// (ReleaseRuns), not those whose lease lapsed: a replica whose contact with the store
	// broke may not claim lapsed leases yet (their owners may be alive), but a released run
	// has no owner left.
	TakeOverReleasedRuns(ctx context.Context, replica string, lease time.Duration, limit int) ([]RunRecord, error)
	// ReleaseRuns ends the lease of every running run of replica now, without ending the
	// runs, so that another replica takes them over at once (a graceful hand-off; the lease
	// is marked released, which TakeOverReleasedRuns tells apart from a lapsed one); it
	// returns how many. On PostgreSQL the other replicas are woken by a notification.
	ReleaseRuns(ctx context.Context, replica string) (int, error)
	// HoldRunForFollower records that a client follows the running run through some replica, for ttl
	// from now (database clock): a replica that is not the run's owner cannot tell the owner
	// any other way, and the owner's reconnect grace (server.on_disconnect: detach) must not
	// cancel a run that a client follows elsewhere. The follower renews it while it streams.
	// It fails with ErrNotFound when the run is not running.
	HoldRunForFollower(ctx context.Context, threadID, runID string, ttl time.Duration) error
	// RunHeldFor returns how much longer the last HoldRunForFollower of the run holds (database
	// clock); zero or less when nobody has renewed it in time, or when the run is unknown.
	RunHeldFor(ctx context.Context, threadID, runID string) (time.Duration, error)
	// SweepRuns deletes the runs that ended before cutoff (server.event_retention) with their
	// event logs, and returns how many runs. Running runs, and lost runs whose leftovers no
	// replica has cleaned up yet, are kept whatever their age.
	SweepRuns(ctx context.Context, cutoff time.Time) (int64, error)
}

// RunStart is what a run's start records before its first event: the thread's claim
// (ClaimThread), the run's record (BeginRun) and its first work document (SaveRunWork).
type RunStart struct {
	ThreadID, RunID string
	// Owner and Title are ClaimThread's owner and title.
	Owner, Title string
	// MaxThreads is ClaimThreadCapped's max: a new thread beyond it fails the start with
	// ErrTooManyThreads. 0: no cap.
	MaxThreads int
	// Replica and Lease are BeginRun's.
	Replica string
	Lease   time.Duration
	// Work is the run's first work document (its checkpoint); nil leaves the default.
	Work json.RawMessage
	// Messages are the messages the run's input brings to the thread, saved as
	// SaveMessages saves them: in the store before the run's first event is sent, so that a
	// client reading the thread on RUN_STARTED finds its own message.
	Messages []Message
	// Step, when set, is the run's first journal step (run_start), recorded as the run's
	// under its new epoch in the same write (its ThreadID, RunID, Epoch, Seq and At are
	// set, as RecordStep does): a run's start is one write where it was two.
	Step *Step
}

// RunStarter records a run's start in one write: ClaimThread, BeginRun, SaveRunWork and
// SaveMessages together, all or nothing (one transaction on SQL, one lock in memory). On a
// store with one writer (SQLite) separate calls would be separate turns in the writer's
// queue before the run may stream.
type RunStarter interface {
	// StartRun claims rs.ThreadID for rs.Owner and begins the run as BeginRun does, with
	// rs.Work as its work document, and returns the run's epoch. It fails with
	// ErrThreadOwned (the thread is another owner's), ErrThreadBusy (another run holds the
	// thread) or ErrTooManyThreads (rs.MaxThreads), and then records nothing.
	StartRun(ctx context.Context, rs RunStart) (epoch int64, err error)
	// StartRunReport is StartRun that also reports what the start found (Started).
	StartRunReport(ctx context.Context, rs RunStart) (Started, error)
}

// Started is what a run's start reports (RunStarter.StartRunReport).
type Started struct {
	// Epoch is the run's epoch, as StartRun returns it.
	Epoch int64
	// NewThread is true when the start's claim created the thread's record and the store
	// held nothing else of it (no message, suspension or run: rows written without a claim,
	// or by a store older than the threads' records, make it false), so the run need not read
	// them. False when the thread was claimed before.
	NewThread bool
}

// Signaler wakes replicas when a stop is requested (PostgreSQL's LISTEN/NOTIFY). A signal
// is only a hint to look at StopRequests now: the request itself is a row, and replicas also
// poll, since a notification can be lost.
type Signaler interface {
	// StopSignals receives after a stop request was recorded (on any replica), and after
	// the listening connection was re-established. A store that cannot signal (memory, and
	// SQLite, which one process owns) returns nil, which never receives.
	StopSignals() <-chan struct{}
}

// Event is one entry of a run's event log: the AG-UI event as JSON, numbered from 1 in its
// run (the SSE id).
type Event struct {
	Seq  int64
	Data json.RawMessage
}

// MaxEventsRead bounds one Events call, so that a replay of a long run is read in pages.
const MaxEventsRead = 1000

// RunRef names one run under one epoch: what a heartbeat renewed.
type RunRef struct {
	ThreadID, RunID string
	Epoch           int64
}

// EventLog is the per-run event log read by reconnecting clients (DESIGN §9a).
type EventLog interface {
	// AppendEvents appends events to a run's log; each Seq must be new in the run. It
	// fails with ErrFenced, storing none of them, unless the run exists with epoch epoch.
	AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []Event) error
	// SaveRunLog appends evs (none is allowed) to a run's log and, when work is not nil,
	// replaces its work document, in one write: both or neither. Like AppendEvents and
	// SaveRunWork it fails with ErrFenced, storing nothing, unless the run exists with
	// epoch epoch. A run's log writer makes one write where it made two.
	SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []Event, work json.RawMessage) error
	// Events returns the run's events with Seq > after, in order, at most limit (capped at
	// MaxEventsRead).
	Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]Event, error)
	// SweepEvents deletes the events appended before cutoff (server.event_retention) and
	// returns how many.
	SweepEvents(ctx context.Context, cutoff time.Time) (int64, error)
}

// Message is one AG-UI message of a thread, kept as JSON and identified by its id.
type Message struct {
	ID   string
	Data json.RawMessage
}

// MaxMessagesPerThread bounds the messages kept per thread; older ones are dropped first.
const MaxMessagesPerThread = 10000

// Messages is the history of each thread (GET /agui/threads/{id}).
type Messages interface {
	// SaveMessages stores msgs in a thread: a message whose id is known replaces the stored
	// one in place, a new one is appended after the others.
	SaveMessages(ctx context.Context, threadID string, msgs []Message) error
	// LoadMessages returns a thread's messages in order.
	LoadMessages(ctx context.Context, threadID string) ([]Message, error)
	// LoadRecentMessages returns the end of a thread's history: its messages are read
	// from the newest back, each passed to start, until start reports true for one; that
	// message and every later one are returned in order (the whole thread when start
	// never does). start sees each message once, newest first; it must not keep its Data
	// nor call the store. A long thread whose start is near its end is then never read
	// whole (design/history.md: a run's start reads from the last compaction on).
	LoadRecentMessages(ctx context.Context, threadID string, start func(Message) bool) ([]Message, error)
}

// redactDSN hides a password in a DSN that is quoted in an error.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
