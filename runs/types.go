package runs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
)

// Event is one event of a run's stream: its number in the run and its AG-UI JSON.
type Event struct {
	Seq  int64
	Data json.RawMessage
}

// Stream is a live run's event queue as the surface that started the run reads it.
type Stream interface {
	// NextFrom returns the events queued since the last call, the number of the first,
	// and whether the run's stream has ended.
	NextFrom() (first int64, events []agui.Event, ended bool)
	// Wake is closed when there is more to take.
	Wake() <-chan struct{}
	// Released is closed when the run no longer needs its stream (it has ended).
	Released() <-chan struct{}
	// ClientGone reports that the client left (ErrClientGone or ErrClientTooSlow).
	ClientGone(cause error)
	// Backlog returns the stored events with after < Seq <= upto, oldest first, at most
	// limit: what a client that fell behind the live queue missed.
	Backlog(ctx context.Context, after, upto int64, limit int) ([]Event, error)
}

// Started is a run the port started: its ids, its live stream, and its end.
type Started struct {
	ThreadID, RunID string
	Stream          Stream
	// Done is closed once the run has ended and its downstream work has been cancelled.
	Done <-chan struct{}
	// Cancellations reports the run's downstream cancellations and their results.
	Cancellations func() []cancel.Report
}

// StartOptions are the admission limits a surface starts a run under.
type StartOptions struct {
	// MaxActive caps the runs active on this process, counted in the same step as the
	// start (server.max_active_runs); 0: no cap.
	MaxActive int
}

// Thread is a principal's thread as the port shows it.
type Thread struct {
	ID        string
	Title     string
	CreatedAt time.Time
	UpdatedAt time.Time
	LastRunID string
	LastRunAt time.Time
	// Running: a run of the thread holds its lease. OpenInterrupts: how many interrupts
	// its suspension has open.
	Running        bool
	OpenInterrupts int
}

// ThreadCursor is a position in a principal's threads newest first (Runs.ThreadsPage): the
// thread created at CreatedAt with id ID; the page after it starts with the next older one.
type ThreadCursor struct {
	CreatedAt time.Time
	ID        string
}

// ThreadDoc is everything a thread read returns: its messages, open interrupts, active
// run and usage.
type ThreadDoc struct {
	Thread     Thread
	Messages   []json.RawMessage
	Interrupts []agui.Interrupt
	// ActiveRun is the thread's run holding its lease; nil: none.
	ActiveRun *ActiveRun
	Usage     Usage
}

// ActiveRun names a thread's active run and its state.
type ActiveRun struct {
	RunID, State string
}

// Usage is what a thread's model calls used.
type Usage struct {
	InputTokens, OutputTokens int64
	CostUSD                   float64
}

// Step is one step of a thread's journal.
type Step struct {
	Seq         int64
	RunID       string
	At          time.Time
	Kind        string
	Target      string
	Attempt     int
	Outcome     string
	Tag         string
	FailureKind string
	InDoubt     bool
	Replica     string
	Detail      string
}

// RunState is what the store says of a run, as a follower needs it.
type RunState int

const (
	// RunGoingOn: the run is running (here, on another replica, or about to be taken over).
	RunGoingOn RunState = iota
	// RunEnded: the run has ended.
	RunEnded
)

// Task is an A2A task as the port keeps it for the A2A surface: its body is the
// surface's, the rest the port's.
type Task struct {
	TaskID    string
	ContextID string // the thread
	RunID     string // the task's current run
	Principal string // whose task it is
	State     string
	// Version grows with every write; an update is conditional on it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Body      []byte
}

// TaskQuery selects a principal's tasks, newest update first.
type TaskQuery struct {
	ContextID string // empty: every context
	State     string // empty: every state
	// UpdatedAfter, when not zero, keeps tasks updated after it.
	UpdatedAfter time.Time
	// Offset is where the page starts; Limit its size, at most MaxTasksPage.
	Offset, Limit int
}

// Read bounds of the port's pages.
const (
	// MaxEventsRead bounds one page of a run's events.
	MaxEventsRead = 1000
	// MaxStepsRead bounds one page of a thread's journal.
	MaxStepsRead = 5000
	// MaxTasksPage bounds one page of a principal's tasks.
	MaxTasksPage = 100
)

// FollowOptions say how a surface follows a run (Runs.Events).
type FollowOptions struct {
	// Restate: a stream that starts mid-run (after > 0) begins with what a client needs to
	// accept it there: the run's RUN_STARTED, then the start events of what is open at
	// that point, all numbered after (AG-UI's reconnect, DESIGN §9a).
	Restate bool
	// Attach: while the stream lasts it holds a run under server.on_disconnect: detach
	// from being cancelled, as the run's own client would.
	Attach bool
	// Ping: when nothing happened for this long the sequence yields an empty batch (a
	// keep-alive for the surface to send); 0: never.
	Ping time.Duration
	// Uncounted: the surface counts this stream itself (Runs.Follower, as the A2A door
	// counts a task's subscribers): it is not counted again as a follower of the run.
	Uncounted bool
}
