package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/store"
)

// RecordStore is what Records reads and writes: the runs' records, the threads' owners,
// messages and suspensions, and the stop requests for runs of other replicas.
type RecordStore interface {
	StartRunReport(ctx context.Context, rs store.RunStart) (store.Started, error)
	EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error
	EndRunStep(ctx context.Context, threadID, runID string, epoch int64, state string, step *store.Step) error
	EndRunMessages(ctx context.Context, threadID, runID string, epoch int64, state string, step *store.Step, msgs []store.Message) error
	GetRun(ctx context.Context, threadID, runID string) (*store.RunRecord, error)
	RequestStop(ctx context.Context, threadID, runID string) (*store.RunRecord, error)
	GetThread(ctx context.Context, threadID string) (*store.Thread, error)
	ExpiredThread(ctx context.Context, threadID string) (owner string, expired bool, err error)
	ThreadStatus(ctx context.Context, threadID string) (store.ThreadStatus, error)
	LoadMessages(ctx context.Context, threadID string) ([]store.Message, error)
	LoadRecentMessages(ctx context.Context, threadID string, start func(store.Message) bool) ([]store.Message, error)
}

// RecordsConfig configures Records.
type RecordsConfig struct {
	Store RecordStore
	// Journal records the runs' start and end steps, in the same writes as the records.
	Journal *Journal
	// Replica is this replica's id; Lease the lease a run's start gives it.
	Replica string
	Lease   time.Duration
	// MaxThreads is the store's cap on a principal's threads (0: none).
	MaxThreads int
	Logger     *slog.Logger
}

// Records keeps the runs' starts and ends in the store, with what the store decides about
// them (who owns the thread, whether it is busy or expired), the thread's history a run
// starts from, and the stop requests for runs this replica does not hold. The engine
// decides when a run starts and ends; Records writes it, under the run's epoch.
type Records struct {
	store   RecordStore
	journal *Journal
	cfg     RecordsConfig
	log     *slog.Logger
}

// NewRecords returns the records configured by cfg.
func NewRecords(cfg RecordsConfig) *Records {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Records{store: cfg.Store, journal: cfg.Journal, cfg: cfg, log: cfg.Logger}
}

// StopElsewhere stops a run that is not on this replica: the request is recorded on the
// run's row, where its owner finds it (at once through the store's signal, else at its next
// heartbeat).
func (rs *Records) StopElsewhere(ctx context.Context, threadID, runID string) error {
	if _, err := rs.store.RequestStop(ctx, threadID, runID); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("durable: stop a run of another replica: %w", err)
		}
		run, gerr := rs.store.GetRun(ctx, threadID, runID)
		switch {
		case gerr == nil && run.State != store.RunRunning:
			return runs.ErrRunFinished
		case gerr != nil && !errors.Is(gerr, store.ErrNotFound):
			return fmt.Errorf("durable: stop a run of another replica: %w", gerr)
		}
		return runs.ErrRunNotFound
	}
	return nil
}

// prependHistory gives a client that sends only its new messages the thread's stored
// history in front of them (DESIGN §9a). A client that sends the full history (AG-UI's
// default) is recognised by a message id the store already has, and its input is left as
// it is: the store deduplicates by id when the run's messages are saved. Resume runs and
// runs without messages are left alone (their history is the suspension's). It returns
// how many messages it prepended, and whether the thread may have a history in the store
// (false: it had no message, or the run brought none and is no resume).
func (rs *Records) prependHistory(ctx context.Context, in *agui.RunAgentInput) (int, bool) {
	if len(in.Resume) > 0 {
		return 0, true
	}
	if len(in.Messages) == 0 {
		return 0, false
	}
	stored, err := rs.store.LoadRecentMessages(ctx, in.ThreadID, fromLatestCompaction())
	if err != nil {
		rs.log.Warn("store: load thread messages; the run sees only the messages it was sent", "thread_id", in.ThreadID, "err", err)
		return 0, true
	}
	if len(stored) == 0 {
		return 0, false
	}
	known := make(map[string]bool, len(stored))
	for _, m := range stored {
		known[m.ID] = true
	}
	for _, m := range in.Messages {
		if known[m.ID] {
			return 0, true
		}
	}
	hist := make([]agui.Message, 0, len(stored)+len(in.Messages))
	for i, m := range stored {
		// Each row is dropped once decoded: a long thread is held about once, not twice.
		stored[i].Data = nil
		var msg agui.Message
		if err := json.Unmarshal(m.Data, &msg); err != nil {
			continue
		}
		hist = append(hist, msg)
	}
	in.Messages = append(hist, in.Messages...)
	return len(hist), true
}

// RestoreHistory gives a run taken over before its first conversation checkpoint the
// messages its first checkpoint left out (checkpoint.Prepended): the thread's stored
// messages (its history, then the input's messages the run's start saved), followed by
// the input's messages without an id.
func (rs *Records) RestoreHistory(ctx context.Context, in *agui.RunAgentInput) error {
	stored, err := rs.store.LoadRecentMessages(ctx, in.ThreadID, fromLatestCompaction())
	if err != nil {
		return err
	}
	own := make(map[string]bool, len(in.Messages))
	for _, m := range in.Messages {
		own[m.ID] = true
	}
	hist := make([]agui.Message, 0, len(stored)+len(in.Messages))
	for _, m := range stored {
		var msg agui.Message
		if own[m.ID] || json.Unmarshal(m.Data, &msg) != nil {
			continue
		}
		hist = append(hist, msg)
	}
	in.Messages = append(hist, in.Messages...)
	return nil
}

// fromLatestCompaction is where the history a run reads of its thread starts
// (store.LoadRecentMessages): at the earliest message the thread's latest compaction kept
// (history.Record.From; design/history.md), the messages before it being replaced by its
// summary. The whole thread when that compaction names none (a record of older code) or
// the thread has none.
func fromLatestCompaction() func(store.Message) bool {
	from, found := "", false
	return func(m store.Message) bool {
		if !found {
			// The head only: a message's content (megabytes, perhaps) is not decoded.
			var head struct {
				Role         string `json:"role"`
				ActivityType string `json:"activityType"`
			}
			if json.Unmarshal(m.Data, &head) == nil && head.Role == agui.RoleActivity && head.ActivityType == history.Activity {
				found = true
				var rec struct {
					Content history.Record `json:"content"`
				}
				if json.Unmarshal(m.Data, &rec) == nil {
					from = rec.Content.From
				}
			}
		}
		return found && from != "" && m.ID == from
	}
}

// ThreadHistory is the thread's whole history: every stored message, decoded (those that
// cannot be are left out). For a run whose history read from the latest compaction on
// (Admit) turned out not to be the thread that compaction was made from: every
// compaction is then replayed.
func (rs *Records) ThreadHistory(ctx context.Context, threadID string) ([]agui.Message, error) {
	stored, err := rs.store.LoadMessages(ctx, threadID)
	if err != nil {
		return nil, err
	}
	return decodeStored(stored, nil), nil
}

// StoredMessages are the thread's messages with the given ids (a run's checkpoint names
// them), read from the latest compaction on, else (one of them is older) from the whole
// thread. An id the thread no longer has is absent from the map.
func (rs *Records) StoredMessages(ctx context.Context, threadID string, ids []string) (map[string]agui.Message, error) {
	stored, err := rs.store.LoadRecentMessages(ctx, threadID, fromLatestCompaction())
	if err != nil {
		return nil, err
	}
	pick := func(stored []store.Message) map[string]agui.Message {
		out := make(map[string]agui.Message, len(ids))
		want := make(map[string]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		for _, m := range decodeStored(stored, func(id string) bool { return !want[id] }) {
			out[m.ID] = m
		}
		return out
	}
	got := pick(stored)
	if len(got) == len(ids) {
		return got, nil
	}
	if stored, err = rs.store.LoadMessages(ctx, threadID); err != nil {
		return nil, err
	}
	return pick(stored), nil
}

// decodeStored decodes stored messages, leaving out those that cannot be and those skip
// reports (nil: none); each row is dropped once decoded.
func decodeStored(stored []store.Message, skip func(id string) bool) []agui.Message {
	out := make([]agui.Message, 0, len(stored))
	for i, m := range stored {
		stored[i].Data = nil
		var msg agui.Message
		if (skip != nil && skip(m.ID)) || json.Unmarshal(m.Data, &msg) != nil {
			continue
		}
		out = append(out, msg)
	}
	return out
}

// Admit checks the thread's stored state before a run of principal starts (unknown:
// this process does not remember the thread): a suspension of another principal refuses
// it, and so does a thread id that thread_retention swept when the store holds no message
// of it (a new thread, or an expired one, whose id must not silently start over). It then
// prepends the stored history (prependHistory) and returns how many messages it did. A
// thread this process does not know is read once (Threads.ThreadStatus: whether it has
// messages, its suspension's owner, its tombstone), and its history only when it has
// messages.
func (rs *Records) Admit(ctx context.Context, in *agui.RunAgentInput, principal string, unknown bool) (int, error) {
	if !unknown {
		prepended, stored := rs.prependHistory(ctx, in)
		if !stored {
			if err := rs.checkExpired(ctx, in.ThreadID, principal); err != nil {
				return 0, err
			}
		}
		return prepended, nil
	}
	st, err := rs.store.ThreadStatus(ctx, in.ThreadID)
	if err != nil {
		// A store error is not a refusal: the start goes on and meets the store again.
		st = store.ThreadStatus{HasMessages: true}
	}
	if st.Suspended && st.SuspensionOwner != principal {
		return 0, runs.ErrForbidden
	}
	if !st.HasMessages && len(in.Resume) == 0 {
		// No history to prepend (prependHistory would find none).
		return 0, expiredRefusal(st, principal)
	}
	prepended, stored := rs.prependHistory(ctx, in)
	if !stored {
		return 0, expiredRefusal(st, principal)
	}
	return prepended, nil
}

// checkExpired refuses a run on a thread id that server.thread_retention swept (expiredRefusal).
// A store error is not a refusal: the start goes on and meets the store again.
func (rs *Records) checkExpired(ctx context.Context, threadID, principal string) error {
	owner, expired, err := rs.store.ExpiredThread(ctx, threadID)
	if err != nil {
		return nil
	}
	return expiredRefusal(store.ThreadStatus{Expired: expired, ExpiredOwner: owner}, principal)
}

// expiredRefusal refuses a run on a thread id that server.thread_retention swept: its owner
// gets runs.ErrThreadExpired, another principal runs.ErrForbidden (the id was someone
// else's).
func expiredRefusal(st store.ThreadStatus, principal string) error {
	switch {
	case !st.Expired:
		return nil
	case st.ExpiredOwner != principal:
		return runs.ErrForbidden
	}
	return runs.ErrThreadExpired
}

// Busy is the refusal of a start on a thread with a run reserved on this replica, when
// this replica does not remember the thread as principal's: the store is asked, so that
// another principal gets runs.ErrForbidden as the contract says whatever the timing (the
// thread's first start may be in flight); otherwise runs.ErrThreadBusy.
func (rs *Records) Busy(ctx context.Context, threadID, principal string) error {
	if stored, err := rs.store.GetThread(ctx, threadID); err == nil && stored.Owner != principal {
		return runs.ErrForbidden
	}
	return runs.ErrThreadBusy
}

// Start records a run's start before it streams anything: the thread's claim (for every
// thread at its first run, so that no restart or eviction frees it for another principal:
// runs.ErrForbidden) and the run's record (one active run per thread across replicas:
// runs.ErrThreadBusy), both needed before the response, the run's first work document
// (work: its checkpoint holds the input, from which a replica taking the run over before
// its setup is done starts it again), so that no run a client has seen starting is without
// one, the input's messages after the prepended history, so that a client reading the
// thread as soon as it sees RUN_STARTED finds the message it sent, and the run_start step
// of the journal. The store writes all of it at once (StartRun;
// design/store-group-commit.md); what can wait (the events, the run's own messages) is the
// run log's writer's, after RUN_STARTED. It returns the epoch under which this replica owns
// the run (with whether the start created the thread: store.Started) and when the claim was
// sent (the lease counts from there).
func (rs *Records) Start(ctx context.Context, in *agui.RunAgentInput, principal string, prepended int, work json.RawMessage) (started store.Started, sent time.Time, err error) {
	// The history prepended from the store is there already: only what the client sent is
	// saved (saving the whole history again on every run wrote the square of it).
	msgs := inputMessages(in.Messages[prepended:])
	// The run's lease counts from before the store was asked: the store's clock set its
	// end no earlier than a lease after this.
	sent = time.Now()
	// The run's start step (an audit record) goes in the same write: the store sets its
	// epoch.
	step := rs.journal.Entry(RunRef{ThreadID: in.ThreadID, RunID: in.RunID}, store.StepRunStart, "", "", store.StepEnd{Outcome: store.StepOK})
	started, err = rs.store.StartRunReport(ctx, store.RunStart{ThreadID: in.ThreadID, RunID: in.RunID, Owner: principal,
		Title: threadTitle(in), MaxThreads: rs.cfg.MaxThreads, Replica: rs.cfg.Replica, Lease: rs.cfg.Lease, Work: work, Messages: msgs,
		Step: step})
	return started, sent, startError(err)
}

// End records the end of run (its log l, its journal reference ref) in the store as
// state, under the run's epoch, with its run_end step in the journal and, when the log
// left them to the end (EventLog.MessagesWithEnd), the messages the run added to its
// thread: one write (EndRunMessages; EndRunStep when there are none). A store that does
// not take it (an outage) is asked again until it does (at most MaxStoreRetry): a run left
// "running" in the store would be taken over by another replica and come back to life.
// The step goes with the first attempt only: it is an audit record, and a later attempt
// after a write whose outcome was lost must not record it twice. The messages go with
// every attempt (a message saved twice is stored once, by its id). A fenced refusal means
// another replica owns the run: it records the end (and the messages, from the log it
// restores), not this one.
func (rs *Records) End(l *EventLog, ref RunRef, state string, log *slog.Logger) {
	step := rs.journal.Entry(ref, store.StepRunEnd, "", "", store.StepEnd{Outcome: state})
	msgs := l.endMessages()
	var failing time.Time
	pause := StoreRetry
	for {
		// The run's context has ended by now (often its end is a cancel): each attempt gets
		// the store's write timeout.
		ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
		var err error
		switch {
		case len(msgs) > 0:
			err = rs.store.EndRunMessages(ctx, ref.ThreadID, ref.RunID, l.Epoch(), state, step, msgs)
		case step != nil:
			err = rs.store.EndRunStep(ctx, ref.ThreadID, ref.RunID, l.Epoch(), state, step)
		default:
			err = rs.store.EndRun(ctx, ref.ThreadID, ref.RunID, l.Epoch(), state)
		}
		step = nil
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrClosed):
			log.Warn("store: end run refused", "err", err)
			return
		}
		if failing.IsZero() {
			failing = time.Now()
		}
		if time.Since(failing) > MaxStoreRetry || !l.Sleep(pause) {
			log.Error("store: end run failed; the run is left to the takeover, which finds its terminal event", "err", err)
			return
		}
		log.Warn("store: end run; trying again", "err", err)
		pause = min(2*pause, MaxStoreRetryPause)
	}
}

// startError maps the store's refusals of a run's start to the port's sentinels.
func startError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrThreadOwned):
		return runs.ErrForbidden
	case errors.Is(err, store.ErrThreadBusy):
		return runs.ErrThreadBusy
	case errors.Is(err, store.ErrTooManyThreads):
		return runs.ErrTooManyThreads
	}
	return fmt.Errorf("durable: begin run: %w", err)
}

// maxTitleRunes bounds a thread's title (the start of its first user message).
const maxTitleRunes = 80

// threadTitle is the title a new thread gets: the start of the first user message's text.
func threadTitle(in *agui.RunAgentInput) string {
	for _, m := range in.Messages {
		if m.Role != agui.RoleUser {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			var parts []agui.ContentPart
			if json.Unmarshal(m.Content, &parts) != nil {
				continue
			}
			for _, p := range parts {
				if p.Type == "text" {
					text = p.Text
					break
				}
			}
		}
		// A title needs the text's start: a message of megabytes is not split into words
		// or runes whole (at every run of its thread).
		if cut := 64 * maxTitleRunes; len(text) > cut {
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut]
		}
		text = strings.Join(strings.Fields(text), " ")
		if utf8.RuneCountInString(text) > maxTitleRunes {
			text = string([]rune(text)[:maxTitleRunes-1]) + "…"
		}
		if text != "" {
			return text
		}
	}
	return ""
}

// inputMessages are the messages a run's input brings to its thread, for the store.
func inputMessages(msgs []agui.Message) []store.Message {
	out := make([]store.Message, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if m.ID == "" {
			continue
		}
		data, err := json.Marshal(m)
		if err != nil {
			continue
		}
		out = append(out, store.Message{ID: m.ID, Data: data})
	}
	return out
}
