package durable

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/store"
)

// EventStore is what an EventLog writes: the run's events, its work document and, when the
// run ends, the messages it added to its thread. Every write of a run carries its epoch and
// is refused with store.ErrFenced once another replica owns the run.
type EventStore interface {
	AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event) error
	SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error
	SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event, work json.RawMessage) error
	SaveMessages(ctx context.Context, threadID string, msgs []store.Message) error
}

// EventLog appends a run's events to the store's event log (DESIGN §9a), keeps its work
// document (Work) in the store, and collects the messages the run adds to its thread.
//
// Design note: the run waits for the store only when the engine's logs together hold
// DefaultLogBytes not yet stored, and only while the store takes writes (LogBudget): then
// the store's pace paces the runs. Each event is numbered and encoded as the
// sequencer accepts it (the number is the SSE id the stream sends), and a writer goroutine
// appends whatever is pending in one batch per round trip, so that a slow store costs a
// burst a few round trips rather than one per event. The writer goroutine exists only while
// there is something to write (it is started by the event or work note that finds it idle
// and ends when nothing is pending), so an open run that waits for a sub-agent holds no
// goroutine for its log. A reconnecting client reads the store, so it may see an event a
// little after the live stream did, never out of order. A batch the store does not take is
// kept and tried again (StoreRetry) until it does, for at most MaxStoreRetry; pending events
// are bounded (maxPendingEvents): if the store stalls that long, the oldest pending events
// are dropped from the log (the live stream is unaffected) and the loss is logged. Every
// write carries the run's epoch: one the store refuses as fenced (another replica owns the
// run now) freezes the log and stops the run here (the onFenced of Own), and is never
// retried.
type EventLog struct {
	st          EventStore
	thread, run string
	log         *slog.Logger
	// epoch is the run's fencing token, set (Own) before anything of the run is written.
	epoch int64
	// onFenced is called once when the store refuses a write of the run as fenced.
	onFenced func(error)
	// onStored, when set, is called (outside mu) with the highest seq the store has taken
	// (or that was given up), after each change of it.
	onStored func(seq int64)
	fenced   bool
	// quit, when closed, ends the writer's retries (the engine has stopped).
	quit <-chan struct{}
	// stored is the highest seq the store has taken (or that was given up): Flush waits
	// for it.
	stored int64

	mu      sync.Mutex
	seq     int64
	pending []store.Event
	// pendingBytes is the encoded size of pending, bounded by maxPendingBytes.
	pendingBytes int
	// budget is the engine's bound on the log's bytes in memory, pending or being written
	// (LogBudget; nil: none): Add takes, the writer releases what it stored or dropped.
	budget  *LogBudget
	ended   bool // the terminal event was added
	dropped int
	// changed is closed after each append to the store: it wakes followers of this run
	// on this replica (others poll). Made by the first Changed after an append, so that a
	// run nobody follows retains none.
	changed chan struct{}
	// settled is the sequence number up to which the log is as complete as it will be:
	// every event up to it was appended to the store, or failed to be, or was dropped.
	settled int64
	msgs    messageBuilder
	// work is the run's downstream work, saved by the writer when workDirty (and at once
	// where a takeover depends on it: SaveWork).
	work      Work
	workDirty bool
	saveMu    sync.Mutex

	// wg counts writer goroutines (the engine's, so that its shutdown waits for them).
	wg *sync.WaitGroup
	// writing: a writer goroutine is running; runDone: the run's goroutine has ended;
	// finished: the log is complete (done is closed or about to be).
	writing, runDone, finished bool
	done                       chan struct{}
	// frozen: the run was handed off to another replica, or another one owns it now;
	// nothing more of it is recorded, and the writer stops once it has stored what was
	// pending.
	frozen bool
	// withEnd: the thread's messages are left to the write of the run's end (MessagesWithEnd);
	// forEnd: the log completed and left them there (endMessages takes them); endGone: the
	// run's end was written before the log completed, so the writer stores them itself.
	withEnd, forEnd, endGone bool
}

// maxPendingEvents bounds the events waiting for the store per run, and maxPendingBytes
// their encoded size: a run relaying megabytes of text faster than the store takes them
// would otherwise hold all of it (bounded memory per run).
const (
	maxPendingEvents = 20000
	maxPendingBytes  = 4 << 20
)

// StoreWriteTimeout bounds one write to the store.
const StoreWriteTimeout = 10 * time.Second

// MaxStoreRetry bounds how long a write the store does not take (an outage) is tried
// again: the run's events are kept meanwhile (bounded by maxPendingEvents) and stored when
// the store is back, so that a reconnect finds no hole.
const MaxStoreRetry = 5 * time.Minute

// StoreRetry is the first pause before a failed store write is tried again; it doubles up
// to MaxStoreRetryPause.
const (
	StoreRetry         = 100 * time.Millisecond
	MaxStoreRetryPause = 2 * time.Second
)

// NewEventLog returns a run's log; wg (nil: a private one) counts its writer goroutines,
// and onStored (nil: none) is told the highest seq the store has taken after each change
// of it. Nothing is written before Own.
func NewEventLog(st EventStore, threadID, runID string, log *slog.Logger, wg *sync.WaitGroup, onStored func(seq int64)) *EventLog {
	if wg == nil {
		wg = &sync.WaitGroup{}
	}
	return &EventLog{st: st, thread: threadID, run: runID, log: log, wg: wg, onStored: onStored, done: make(chan struct{})}
}

// SetBudget makes the log count its bytes in memory against b, shared with the engine's
// other runs (nil: none). It is called before the run emits anything.
func (l *EventLog) SetBudget(b *LogBudget) { l.budget = b }

// Own sets the epoch under which this replica owns the run (every write carries it), the
// channel whose closing ends the writer's retries, and onFenced, called once when the
// store refuses a write of the run as fenced. It is called before the run emits anything.
func (l *EventLog) Own(epoch int64, quit <-chan struct{}, onFenced func(error)) {
	l.epoch, l.quit, l.onFenced = epoch, quit, onFenced
}

// Epoch is the epoch under which this replica owns the run.
func (l *EventLog) Epoch() int64 { return l.epoch }

// Done is closed once the log is complete.
func (l *EventLog) Done() <-chan struct{} { return l.done }

// Restore sets the log's state as a replica that takes the run over finds it: the run's
// work document and the events already stored (events, numbered up to lastSeq). Numbering
// goes on densely after lastSeq, and the stored events' messages count towards what the
// run adds to its thread. It is called before the run emits anything here.
func (l *EventLog) Restore(work Work, events []agui.Event, lastSeq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.work = work
	for _, ev := range events {
		l.msgs.add(ev)
	}
	l.seq = lastSeq
}

// Seq is the number of the last event added.
func (l *EventLog) Seq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// wake starts the writer goroutine unless it runs or the log is complete; l.mu is held.
func (l *EventLog) wake() {
	if l.writing || l.finished {
		return
	}
	l.writing = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.drain()
	}()
}

// RunEnded says that the run's goroutine has ended: the log is completed once nothing is
// pending, also for a run that could not emit its terminal event.
func (l *EventLog) RunEnded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runDone = true
	l.wake()
}

// Add numbers and records ev; it is called by the sequencer's sink, in emission order.
func (l *EventLog) Add(ev agui.Event) {
	data, err := agui.MarshalEvent(ev)
	if err != nil {
		// The stream itself will fail on the same event; the log keeps its place.
		data = []byte(`{"type":"CUSTOM","name":"baton.unencodable"}`)
	}
	l.budget.take(len(data), l.quit)
	l.mu.Lock()
	if l.frozen || l.finished {
		// Nothing more of the run is recorded (handed off, or its log is complete).
		l.mu.Unlock()
		l.budget.release(len(data))
		return
	}
	l.seq++
	dropped := 0
	for len(l.pending) > 0 && (len(l.pending) >= maxPendingEvents || l.pendingBytes+len(data) > maxPendingBytes) {
		l.pendingBytes -= len(l.pending[0].Data)
		dropped += len(l.pending[0].Data)
		l.pending[0] = store.Event{}
		l.pending = l.pending[1:]
		l.dropped++
	}
	l.pending = append(l.pending, store.Event{Seq: l.seq, Data: data})
	l.pendingBytes += len(data)
	l.msgs.add(ev)
	switch ev.EventType() {
	case agui.EventRunFinished, agui.EventRunError:
		l.ended = true
	}
	l.wake()
	l.mu.Unlock()
	l.budget.release(dropped)
}

// WaitEnded waits until the writer has stored everything, when the terminal event has been
// added (otherwise the writer waits for the run to end, and so must not be waited for).
func (l *EventLog) WaitEnded() {
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		<-l.done
	}
}

// Changed returns a channel closed after the next append to the store.
func (l *EventLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// drain is the writer: it stores what is pending (storePending) until nothing is (the
// input's messages are stored with the run's start). It completes the log (thread
// messages, done closed) once the terminal event is stored, or once the run has ended and
// nothing is pending (a run that could not emit its terminal event).
func (l *EventLog) drain() {
	var failing time.Time // when the store began refusing this writer's writes
	pause := StoreRetry
	for {
		wrote, err := l.storePending()
		if err != nil && !l.isFenced() {
			if failing.IsZero() {
				failing = time.Now()
				l.budget.storeFailing(true)
			}
			if time.Since(failing) > MaxStoreRetry || !l.Sleep(pause) {
				l.giveUp()
			}
			pause = min(2*pause, MaxStoreRetryPause)
			continue
		}
		if !failing.IsZero() {
			l.budget.storeFailing(false)
		}
		failing, pause = time.Time{}, StoreRetry
		if wrote {
			continue
		}
		if l.retireWriter() {
			return
		}
	}
}

// retireWriter ends the writer when nothing is pending, completing the log when the run is over
// or frozen; false: more came in meanwhile, the writer goes on. It waits for a write of
// the log the run's goroutine may have in flight (SaveWork): a write that fails puts its
// events back, and the log must not be called complete before.
func (l *EventLog) retireWriter() bool {
	l.saveMu.Lock()
	l.mu.Lock()
	switch {
	case len(l.pending) > 0 || l.workDirty:
		l.mu.Unlock()
		l.saveMu.Unlock()
		return false
	case l.frozen:
		// Handed off: what was pending is stored; the new owner writes the rest.
		l.finished, l.writing = true, false
		l.signal()
		l.mu.Unlock()
		l.saveMu.Unlock()
		close(l.done)
		return true
	case l.ended && l.work.Checkpoint != nil:
		// The terminal event is stored: the checkpoint goes (see strip), written as the
		// next write.
		l.strip()
		l.mu.Unlock()
		l.saveMu.Unlock()
		return false
	case l.ended || l.runDone:
		l.finished, l.writing = true, false
		l.signal()
		save := !l.withEnd || l.endGone
		l.forEnd = !save
		l.mu.Unlock()
		l.saveMu.Unlock()
		if save {
			l.saveMessages()
		}
		close(l.done)
		return true
	default:
		l.writing = false
		l.mu.Unlock()
		l.saveMu.Unlock()
		return true
	}
}

// strip drops the checkpoint of a run whose terminal event was added; l.mu is held. A run
// whose terminal event is stored is never continued from its checkpoint (a takeover finds
// the end in the log): the checkpoint, which holds the whole conversation again, goes, so
// that a thread's storage grows with its messages (kept once, in the thread) and not with
// their square. The document without it is written with the terminal event (or after it).
func (l *EventLog) strip() {
	l.work.Checkpoint, l.work.Results = nil, nil
	l.workDirty = true
}

// maxJointWork bounds the work document written in one write with the events
// (SaveRunLog): a larger one (it holds the checkpoint, the whole conversation) is written
// after them, so that it does not hold up what the client sees (the live stream shows an
// event once it is stored).
const maxJointWork = 64 << 10

// storePending writes what is pending: the events and, when it changed, the work document,
// in one write of the store where it can (SaveRunLog: the document with the events' last
// part, when it is small), since each write is a transaction (a round trip on PostgreSQL).
// Writes are serialised (saveMu), so that events are stored in order and an older
// document never lands after a newer one. wrote: events were taken (the writer looks for
// more before it settles). What the store did not take is pending again; a fenced refusal
// stops the run here (fenceOff) and returns store.ErrFenced.
func (l *EventLog) storePending() (wrote bool, err error) {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock()
	batch, dropped := l.pending, l.dropped
	l.pending, l.dropped, l.pendingBytes = nil, 0, 0
	var doc json.RawMessage
	if !l.fenced {
		if l.ended && !l.frozen && l.work.Checkpoint != nil {
			// The terminal event is in this batch or stored: the checkpoint goes with it.
			l.strip()
		}
		if l.workDirty {
			l.workDirty = false
			doc, _ = json.Marshal(&l.work) // a document that cannot be encoded is not written
		}
	}
	l.mu.Unlock()
	if dropped > 0 {
		l.log.Error("event log fell behind; events dropped from the log", "dropped", dropped)
	}
	if len(batch) == 0 && doc == nil {
		return false, nil
	}
	return len(batch) > 0, l.write(batch, doc)
}

// write stores batch and doc (nil: no document); saveMu is held. What the store did not
// take goes back: the events in front of the pending ones, the document as dirty (the
// latest one is written again).
func (l *EventLog) write(batch []store.Event, doc json.RawMessage) error {
	var err error
	stored := 0
	joint := doc != nil && len(doc) <= maxJointWork
	for stored < len(batch) {
		part := batch[stored:min(stored+store.MaxEventsRead, len(batch))]
		// The writer stores on behalf of the whole run, not of one caller: a cancelled run's
		// last events must still reach the store, so only the write's own timeout bounds it.
		ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
		if joint && stored+len(part) == len(batch) {
			err = l.st.SaveRunLog(ctx, l.thread, l.run, l.epoch, part, doc)
			if err == nil {
				doc = nil
			}
		} else {
			err = l.st.AppendEvents(ctx, l.thread, l.run, l.epoch, part)
		}
		cancel()
		if err != nil {
			break
		}
		stored += len(part)
	}
	if err == nil && doc != nil {
		// The work document is saved by the writer and at the run's end, when the run's
		// context may have ended: only the write's own timeout bounds it.
		ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
		err = l.st.SaveRunWork(ctx, l.thread, l.run, l.epoch, doc)
		cancel()
		if err == nil {
			doc = nil
		}
	}
	// What was stored leaves memory; so does what a fenced store refused (never tried
	// again). The rest goes back to pending, still held.
	freed := 0
	for i, ev := range batch {
		if i < stored || errors.Is(err, store.ErrFenced) {
			freed += len(ev.Data)
		}
	}
	defer l.budget.release(freed)
	l.mu.Lock()
	if stored > 0 {
		l.settled = max(l.settled, batch[stored-1].Seq)
		l.signal()
		l.stored = max(l.stored, batch[stored-1].Seq)
		defer l.tellStored(l.stored)
	}
	if err != nil && !errors.Is(err, store.ErrFenced) {
		if rest := batch[stored:]; len(rest) > 0 {
			l.log.Warn("event log: the store did not take events; trying again", "from", rest[0].Seq, "to", rest[len(rest)-1].Seq, "err", err)
			for _, ev := range rest {
				l.pendingBytes += len(ev.Data)
			}
			l.pending = append(rest[:len(rest):len(rest)], l.pending...)
		}
		if doc != nil {
			l.log.Warn("store: save run work; trying again", "err", err)
			l.workDirty = true
		}
		// Written again by the writer (the run's goroutine may have written this).
		l.wake()
	}
	l.mu.Unlock()
	if errors.Is(err, store.ErrFenced) {
		l.fenceOff(err)
	}
	return err
}

// fenceOff stops recording the run after the store refused one of its writes as fenced:
// another replica owns it now and writes the rest. The run is stopped here (onFenced),
// without cancelling anything downstream.
func (l *EventLog) fenceOff(err error) {
	l.mu.Lock()
	first := !l.fenced
	l.fenced = true
	l.frozen = true
	defer l.budget.release(l.pendingBytes)
	clear(l.pending)
	l.pending, l.pendingBytes, l.workDirty = nil, 0, false
	// Nothing more is stored from here: a client reading the backlog must not wait for it.
	l.settled = max(l.settled, l.seq)
	l.signal()
	l.mu.Unlock()
	if first {
		l.log.Warn("the store refused a write of the run: another replica owns it now; stopping it here", "err", err)
		if l.onFenced != nil {
			l.onFenced(err)
		}
	}
}

func (l *EventLog) isFenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// Sleep pauses for d before a store write is tried again; false when the quit channel of
// Own closes meanwhile (the engine stops).
func (l *EventLog) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.quit:
		return false
	}
}

// giveUp drops what the store would not take for MaxStoreRetry (or when the engine
// stops): the loss is logged, and the log completes without it.
func (l *EventLog) giveUp() {
	l.mu.Lock()
	n := len(l.pending)
	defer l.budget.release(l.pendingBytes)
	clear(l.pending)
	l.pending, l.pendingBytes, l.workDirty = nil, 0, false
	// The dropped events will never be stored: a client reading the backlog goes on past them.
	l.settled = max(l.settled, l.seq)
	l.signal()
	l.stored = l.seq // lost, not to be waited for
	seq := l.stored
	l.mu.Unlock()
	l.tellStored(seq)
	l.log.Error("event log: the store did not take the run's events in time; a reconnect will miss them", "events", n)
}

// tellStored passes the highest stored seq on (onStored).
func (l *EventLog) tellStored(seq int64) {
	if l.onStored != nil {
		l.onStored(seq)
	}
}

// signal wakes whoever waits on Changed; l.mu is held.
func (l *EventLog) signal() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// State returns the settled sequence number (every event up to it was stored, or will never
// be), whether nothing more will be stored (the log is complete, or was handed off and what
// it had is stored), and a channel closed after the next append or the end of the log.
func (l *EventLog) State() (settled int64, over bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.settled, l.finished, l.changed
}

// MessagesWithEnd leaves the messages the run adds to its thread to the write of the run's
// end (Records.End stores them with it: one write fewer per run), where the log would
// store them in a write of their own once complete. The owner that calls it records the
// run's end once the log is complete (WaitEnded); a run whose end is recorded before (it
// could not emit its terminal event) has its messages stored by the writer, as without
// it. It is called before the run emits anything.
func (l *EventLog) MessagesWithEnd() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.withEnd = true
}

// endMessages returns the messages the run's end is to store (MessagesWithEnd): those of
// a log that completed and left them there, once; none otherwise, and then the writer
// stores them itself when the log completes (or, frozen, leaves them to the run's new
// owner).
func (l *EventLog) endMessages() []store.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.forEnd {
		l.endGone = true
		return nil
	}
	l.forEnd = false
	return withIDs(l.msgs.build())
}

func (l *EventLog) saveMessages() {
	l.mu.Lock()
	msgs := l.msgs.build()
	l.mu.Unlock()
	if len(msgs) == 0 {
		return
	}
	// Called as the log ends, after the run's context has ended: the messages must still
	// be stored.
	ctx, cancel := context.WithTimeout(context.Background(), StoreWriteTimeout)
	defer cancel()
	if err := l.st.SaveMessages(ctx, l.thread, msgs); err != nil {
		l.log.Error("thread messages: save failed", "err", err)
	}
}

// Flush waits until every event added so far is in the store (or was given up), or ctx
// ends. A run calls it before it sends a turn's calls: a replica that takes the run over
// from that turn's checkpoint then finds the log complete up to it, with no hole where the
// events this replica streamed but had not stored were.
func (l *EventLog) Flush(ctx context.Context) error {
	l.mu.Lock()
	target := l.seq
	l.mu.Unlock()
	for {
		l.mu.Lock()
		if l.stored >= target || l.frozen {
			l.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.wake()
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Freeze stops recording the run: later events and work are ignored, and the writer
// stores what is pending and stops.
func (l *EventLog) Freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frozen = true
	l.wake()
}

// NoteTask records an A2A task of the run and its latest state; the writer stores it.
func (l *EventLog) NoteTask(t Task) { l.noteTask(t, true) }

// NoteTaskNow records an A2A task of the run (NoteTask) and stores the work document at
// once, on the caller's goroutine, with the events pending (SaveWork). No writer goroutine
// is woken for it: the caller would only wait for that writer to give the write back. A
// write the store does not take is tried again by the writer (write wakes it), and its
// error is returned.
func (l *EventLog) NoteTaskNow(t Task) error {
	l.noteTask(t, false)
	return l.SaveWork()
}

// noteTask records t in the work document, waking the writer when wake is set.
func (l *EventLog) noteTask(t Task, wake bool) {
	if t.TaskID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	for i := range l.work.A2A {
		if w := &l.work.A2A[i]; w.TaskID == t.TaskID {
			w.State = t.State
			if t.ContextID != "" {
				w.ContextID = t.ContextID
			}
			// A continuation (the model's answer to input-required, the user's on resume)
			// is a new call on the same task: a replica that takes the run over follows
			// the task for that call, not for the one that started it (whose result is in).
			if t.ToolCallID != "" {
				w.ToolCallID = t.ToolCallID
				if t.SubagentRunID != "" {
					w.SubagentRunID = t.SubagentRunID
				}
			}
			l.workDirty = true
			if wake {
				l.wake()
			}
			return
		}
	}
	if len(l.work.A2A) < MaxWorkItems {
		l.work.A2A = append(l.work.A2A, t)
		l.workDirty = true
		if wake {
			l.wake()
		}
	}
}

// NoteCall records an MCP call of the run and its state (CallStarted, CallDone).
func (l *EventLog) NoteCall(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	for i := range l.work.MCP {
		if w := &l.work.MCP[i]; w.ToolCallID == c.ToolCallID {
			w.State = c.State
			l.workDirty = true
			l.wake()
			return
		}
	}
	if len(l.work.MCP) < MaxWorkItems {
		l.work.MCP = append(l.work.MCP, c)
		l.workDirty = true
		l.wake()
	}
}

// NoteCheckpoint records a checkpoint of the run (where a replica taking it over continues
// from), replacing the previous one and the results of its calls.
func (l *EventLog) NoteCheckpoint(doc json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	l.work.Checkpoint, l.work.Results = doc, nil
	l.workDirty = true
	l.wake()
}

// NoteResult records the result of one of the current turn's tool calls.
func (l *EventLog) NoteResult(toolCallID string, res failure.ToolResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return
	}
	if l.work.Results == nil {
		l.work.Results = map[string]failure.ToolResult{}
	}
	if len(l.work.Results) < MaxWorkItems {
		l.work.Results[toolCallID] = res
		l.workDirty = true
	}
	l.wake()
}

// FirstWork sets the run's first checkpoint and returns the work document to store with
// the run's start (nil when there is none to store). The document is not marked dirty:
// the start stores it, and the writer must not write it before the run exists.
func (l *EventLog) FirstWork(checkpoint json.RawMessage) json.RawMessage {
	if checkpoint == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.work.Checkpoint, l.work.Results = checkpoint, nil
	doc, err := json.Marshal(&l.work)
	if err != nil {
		return nil
	}
	return doc
}

// SaveWork writes the work document when it changed since the last write, with the events
// pending (one write where it can: storePending), so that the document never gets ahead of
// the log it describes. A write the store did not take leaves what it held to write again
// (the writer retries it); one the store refused as fenced stops the run here (fenceOff)
// and returns store.ErrFenced.
func (l *EventLog) SaveWork() error {
	l.mu.Lock()
	skip := !l.workDirty || l.fenced
	l.mu.Unlock()
	if skip {
		return nil
	}
	_, err := l.storePending()
	return err
}

// SaveWorkNow stores the work document before the run goes on (the checkpoint of a turn
// whose calls are about to be sent), with the events still pending (SaveWork: usually the
// turn's own, in the same write): a store that does not take it is asked again, once
// mayAct allows (the run's lease: Owner.MayAct), until it does. It fails only when the run
// stops: the store refused it as fenced (the run moved: the onFenced of Own stops it, and
// this waits for ctx to end), mayAct failed, or ctx ended.
func (l *EventLog) SaveWorkNow(ctx context.Context, mayAct func(context.Context) error) error {
	pause := StoreRetry
	for {
		err := l.SaveWork()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, store.ErrFenced):
			<-ctx.Done()
			return ctx.Err()
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, MaxStoreRetryPause)
		if err := mayAct(ctx); err != nil {
			return err
		}
	}
}
