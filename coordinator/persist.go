package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
)

// newReplicaID names this process in the store: new per process, so that a restarted
// process never mistakes a dead predecessor's runs for its own.
func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "replica-" + hex.EncodeToString(b[:])
}

// storedRunState is the store's end state of a run: its typed outcome ("ended" when the
// run has none, which only a run that never reached its end can have).
func storedRunState(reason EndReason) string {
	if reason.Outcome == "" || string(reason.Outcome) == store.RunRunning {
		return "ended"
	}
	return string(reason.Outcome)
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

// persister keeps a run's start and end in the store, with what the store decides about
// them (who owns the thread, whether it is busy), the thread's history a run starts from and
// the stop requests for runs this replica does not hold.
type persister struct {
	e *Engine
}

// LogChanged returns a channel closed when more of the run's events are in the store's
// event log, or nil when the run is not active on this replica (a follower then polls).
func (e *Engine) LogChanged(threadID, runID string) <-chan struct{} {
	e.mu.Lock()
	r := e.active[threadID]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		return nil
	}
	return r.elog.Changed()
}

// DeleteThread deletes a thread of principal with its messages, event logs and suspension,
// and cancels the work parked on its open interrupts. A thread that does not exist or
// belongs to another principal is ErrThreadNotFound (404 for both, so that
// nobody learns which threads exist); a running thread is ErrThreadBusy and is left as it was.
func (e *Engine) DeleteThread(ctx context.Context, threadID, principal string) error {
	th, err := e.cfg.Store.GetThread(ctx, threadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Owner != principal) {
		return ErrThreadNotFound
	}
	if err != nil {
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	e.mu.Lock()
	_, busy := e.active[threadID]
	e.mu.Unlock()
	if busy || th.Running {
		return ErrThreadBusy
	}
	susp, err := e.loadSuspension(ctx, threadID)
	if err != nil {
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	if err := e.cfg.Store.DeleteThread(ctx, threadID); err != nil {
		if errors.Is(err, store.ErrThreadBusy) {
			return ErrThreadBusy
		}
		return fmt.Errorf("coordinator: delete thread: %w", err)
	}
	if susp != nil && len(susp.Interrupts) > 0 {
		e.abandon(ctx, susp.Owner, threadID, susp.Interrupts)
		if m := e.cfg.Metrics; m != nil {
			m.InterruptsOpen(-len(susp.Interrupts))
		}
	}
	e.mu.Lock()
	delete(e.threads, threadID)
	e.mu.Unlock()
	return nil
}

// stopElsewhere stops a run that is not on this replica: the request is recorded on the
// run's row, where its owner finds it (at once through the store's signal, else at its next
// heartbeat).
func (p *persister) stopElsewhere(ctx context.Context, threadID, runID string) error {
	e := p.e
	if _, err := e.cfg.Store.RequestStop(ctx, threadID, runID); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("coordinator: stop: %w", err)
		}
		run, gerr := e.cfg.Store.GetRun(ctx, threadID, runID)
		switch {
		case gerr == nil && run.State != store.RunRunning:
			return ErrRunFinished
		case gerr != nil && !errors.Is(gerr, store.ErrNotFound):
			return fmt.Errorf("coordinator: stop: %w", gerr)
		}
		return ErrRunNotFound
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
func (p *persister) prependHistory(ctx context.Context, in *agui.RunAgentInput) (int, bool) {
	e := p.e
	if len(in.Resume) > 0 {
		return 0, true
	}
	if len(in.Messages) == 0 {
		return 0, false
	}
	stored, err := e.cfg.Store.LoadMessages(ctx, in.ThreadID)
	if err != nil {
		e.log.Warn("store: load thread messages; the run sees only the messages it was sent", "thread_id", in.ThreadID, "err", err)
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

// ownInput is the run's own copy of the caller's input: the thread's stored history is
// prepended to its messages (prependHistory), and the caller's input, which a request
// holds for its whole stream, must not keep that history reachable once the run has
// dropped it.
func ownInput(in *agui.RunAgentInput) *agui.RunAgentInput {
	own := *in
	return &own
}

// restoreHistory gives a run taken over before its first conversation checkpoint the
// messages its first checkpoint left out (checkpoint.Prepended): the thread's stored
// messages (its history, then the input's messages the run's start saved), followed by
// the input's messages without an id.
func (p *persister) restoreHistory(ctx context.Context, in *agui.RunAgentInput) error {
	stored, err := p.e.cfg.Store.LoadMessages(ctx, in.ThreadID)
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

// admitHistory checks the thread's stored state before a run of principal starts (unknown:
// this process does not remember the thread): a suspension of another principal refuses
// it, and so does a thread id that thread_retention swept when the store holds no message
// of it (a new thread, or an expired one, whose id must not silently start over). It then
// prepends the stored history (prependHistory) and returns how many messages it did.
func (p *persister) admitHistory(ctx context.Context, in *agui.RunAgentInput, principal string, unknown bool) (int, error) {
	if unknown {
		if err := p.checkSuspendedOwner(ctx, in, principal); err != nil {
			return 0, err
		}
	}
	prepended, stored := p.prependHistory(ctx, in)
	if !stored {
		if err := p.checkExpired(ctx, in.ThreadID, principal); err != nil {
			return 0, err
		}
	}
	return prepended, nil
}

// checkExpired refuses a run on a thread id that server.thread_retention swept: its owner
// gets ErrThreadExpired, another principal ErrForbidden (the id was someone else's). A
// store error is not a refusal: the start goes on and meets the store again.
func (p *persister) checkExpired(ctx context.Context, threadID, principal string) error {
	owner, expired, err := p.e.cfg.Store.ExpiredThread(ctx, threadID)
	switch {
	case err != nil || !expired:
		return nil
	case owner != principal:
		return ErrForbidden
	}
	return ErrThreadExpired
}

// checkSuspendedOwner refuses principal a thread this process does not know (after a
// restart or an eviction from memory) whose stored suspension is another principal's.
func (p *persister) checkSuspendedOwner(ctx context.Context, in *agui.RunAgentInput, principal string) error {
	e := p.e
	susp, err := e.loadSuspension(ctx, in.ThreadID)
	if err == nil && susp != nil && susp.Owner != principal {
		return ErrForbidden
	}
	return nil
}

// busyError is the refusal of a start on a thread with a run reserved on this replica:
// ErrThreadBusy, or ErrForbidden when the thread is another principal's. th is what this
// process remembers of the thread (its owner is immutable), nil when nothing: the thread's
// first start is then in flight (the owner is remembered once the store confirmed it), and
// the store is asked, so that another principal gets 403 as the contract says whatever the
// timing.
func (p *persister) busyError(ctx context.Context, threadID, principal string, th *thread) error {
	e := p.e
	if th != nil && th.owner == principal {
		return ErrThreadBusy
	}
	if stored, err := e.cfg.Store.GetThread(ctx, threadID); err == nil && stored.Owner != principal {
		return ErrForbidden
	}
	return ErrThreadBusy
}

// recordStart records the run's start before it streams anything: the thread's claim (for
// every thread at its first run, so that no restart or eviction frees it for another
// principal: 403) and the run's record (one active run per thread across replicas: 409),
// both needed before the response, the run's first checkpoint (its input, from which a
// replica taking the run over before its setup is done starts it again), so that no run a
// client has seen starting is without one, the input's messages, so that a client
// reading the thread as soon as it sees RUN_STARTED finds the message it sent, and the
// run_start step of the journal. The store
// writes all of it at once (StartRun; design/store-group-commit.md); what can wait (the
// events, the run's own messages) is the run log's writer's, after RUN_STARTED.
func (p *persister) recordStart(ctx context.Context, r *Run, principal string, prepended int) error {
	e := p.e
	in := r.in
	r.dur.prepended = prepended
	work := r.elog.FirstWork(r.dur.checkpointDoc(nil))
	// The history prepended from the store is there already: only what the client sent is
	// saved (saving the whole history again on every run wrote the square of it).
	msgs := inputMessages(in.Messages[prepended:])
	// The run's lease counts from before the store was asked: the store's clock set its
	// end no earlier than a lease after this.
	sent := time.Now()
	// The run's start step (an audit record) goes in the same write: the store sets its
	// epoch.
	step := e.journal.Entry(durable.RunRef{ThreadID: in.ThreadID, RunID: in.RunID}, store.StepRunStart, "", "", store.StepEnd{Outcome: store.StepOK})
	epoch, err := e.cfg.Store.StartRun(ctx, store.RunStart{ThreadID: in.ThreadID, RunID: in.RunID, Owner: principal,
		Title: threadTitle(in), MaxThreads: e.cfg.maxThreads(), Replica: e.cfg.Replica, Lease: e.cfg.Lease, Work: work, Messages: msgs,
		Step: step})
	if err == nil {
		e.own(r, epoch, sent)
	}
	return startError(err)
}

// endRun records the run's end in the store, under the run's epoch, with its run_end step
// in the journal (one write: EndRunStep). A store that does not take it (an outage) is
// asked again until it does (at most maxStoreRetry): a run left "running" in the store
// would be taken over by another replica and come back to life. The step goes with the
// first attempt only: it is an audit record, and a later attempt after a write whose
// outcome was lost must not record it twice. A fenced refusal means another replica owns
// the run: it records the end, not this one.
func (p *persister) endRun(r *Run) {
	e := p.e
	state := storedRunState(r.endOutcome())
	step := e.journal.Entry(r.dur.journalRef(), store.StepRunEnd, "", "", store.StepEnd{Outcome: state})
	var failing time.Time
	pause := storeRetry
	for {
		// The run's context has ended by now (often its end is a cancel): each attempt gets
		// the store's write timeout.
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		var err error
		if step != nil {
			err = e.cfg.Store.EndRunStep(ctx, r.ThreadID, r.RunID, r.elog.Epoch(), state, step)
			step = nil
		} else {
			err = e.cfg.Store.EndRun(ctx, r.ThreadID, r.RunID, r.elog.Epoch(), state)
		}
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrClosed):
			r.log.Warn("store: end run refused", "err", err)
			return
		}
		if failing.IsZero() {
			failing = time.Now()
		}
		if time.Since(failing) > maxStoreRetry || !r.elog.Sleep(pause) {
			r.log.Error("store: end run failed; the run is left to the takeover, which finds its terminal event", "err", err)
			return
		}
		r.log.Warn("store: end run; trying again", "err", err)
		pause = min(2*pause, maxStoreRetryPause)
	}
}

// startError maps the store's refusals of a run's start to the engine's sentinels.
func startError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrThreadOwned):
		return ErrForbidden
	case errors.Is(err, store.ErrThreadBusy):
		return ErrThreadBusy
	case errors.Is(err, store.ErrTooManyThreads):
		return ErrTooManyThreads
	}
	return fmt.Errorf("coordinator: begin run: %w", err)
}

// maxThreads is the store's cap on a principal's threads (0: none).
func (c *Config) maxThreads() int {
	switch n := c.MaxThreadsPerPrincipal; {
	case n == 0:
		return DefaultMaxThreadsPerPrincipal
	case n < 0:
		return 0
	default:
		return n
	}
}
