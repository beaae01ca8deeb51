package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// runLog appends a run's events to the store's event log (DESIGN §9a) and collects the
// messages the run adds to its thread.
//
// Design note: the run never waits for the store. Each event is numbered and encoded as the
// sequencer accepts it (the number is the SSE id the stream sends), and a writer goroutine
// appends whatever is pending in one batch per round trip, so that a slow store costs a
// burst a few round trips rather than one per event. The writer goroutine exists only while
// there is something to write (it is started by the event or work note that finds it idle
// and ends when nothing is pending), so an open run that waits for a sub-agent holds no
// goroutine for its log (issue 18). A reconnecting client reads the store,
// so it may see an event a little after the live stream did, never out of order. A batch
// the store does not take is kept and tried again (storeRetry) until it does, for at most
// maxStoreRetry; pending events are bounded (maxPendingEvents): if the store stalls that
// long, the oldest pending events are dropped from the log (the live stream is unaffected)
// and the loss is logged. Every write carries the run's epoch: one the store refuses as
// fenced (another replica owns the run now) freezes the log and stops the run here
// (onFenced), and is never retried.
type runLog struct {
	st          store.Store
	thread, run string
	log         *slog.Logger
	// epoch is the run's fencing token, set before anything of the run is written.
	epoch int64
	// onFenced is called once when the store refuses a write of the run as fenced.
	onFenced func(error)
	// onStored, when set, is called (outside mu) with the highest seq the store has taken
	// (or that was given up), after each change of it.
	onStored func(seq int64)
	fenced   bool
	// quit, when closed, ends the writer's retries (the engine has stopped).
	quit <-chan struct{}
	// stored is the highest seq the store has taken (or that was given up): flush waits
	// for it.
	stored int64

	mu      sync.Mutex
	seq     int64
	pending []store.Event
	// pendingBytes is the encoded size of pending, bounded by maxPendingBytes.
	pendingBytes int
	ended        bool // the terminal event was added
	dropped      int
	// changed is closed after each append to the store: it wakes followers of this run
	// on this replica (others poll). Made by the first Changed after an append, so that a
	// run nobody follows retains none (issue 18).
	changed chan struct{}
	// settled is the sequence number up to which the log is as complete as it will be:
	// every event up to it was appended to the store, or failed to be, or was dropped.
	settled int64
	msgs    messageBuilder
	// work is the run's downstream work, saved by the writer when workDirty (and at once
	// where a takeover depends on it: saveWork).
	work      runWork
	workDirty bool
	saveMu    sync.Mutex

	// wg counts writer goroutines (the engine's, so that Shutdown waits for them).
	wg *sync.WaitGroup
	// writing: a writer goroutine is running; runDone: the run's goroutine has ended;
	// finished: the log is complete (done is closed or about to be).
	writing, runDone, finished bool
	done                       chan struct{}
	// frozen: the run was handed off to another replica (handoff.go); nothing more of it
	// is recorded, and the writer stops once it has stored what was pending.
	frozen bool
}

// maxPendingEvents bounds the events waiting for the store per run, and maxPendingBytes
// their encoded size: a run relaying megabytes of text faster than the store takes them
// would otherwise hold all of it (issue 12, bounded memory per run).
const (
	maxPendingEvents = 20000
	maxPendingBytes  = 4 << 20
)

// storeWriteTimeout bounds one append to the event log.
const storeWriteTimeout = 10 * time.Second

// maxStoreRetry bounds how long the writer keeps trying a write the store does not take
// (an outage): the run's events are kept meanwhile (bounded by maxPendingEvents) and stored
// when the store is back, so that a reconnect finds no hole.
const maxStoreRetry = 5 * time.Minute

// storeRetry is the first pause before a failed store write is tried again; it doubles
// up to maxStoreRetryPause.
const (
	storeRetry         = 100 * time.Millisecond
	maxStoreRetryPause = 2 * time.Second
)

// newRunLog returns a run's log; wg (nil: a private one) counts its writer goroutines.
func newRunLog(st store.Store, threadID, runID string, log *slog.Logger, wg *sync.WaitGroup) *runLog {
	if wg == nil {
		wg = &sync.WaitGroup{}
	}
	return &runLog{st: st, thread: threadID, run: runID, log: log, wg: wg, done: make(chan struct{})}
}

// wake starts the writer goroutine unless it runs or the log is complete; l.mu is held.
func (l *runLog) wake() {
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

// runEnded says that the run's goroutine has ended: the log is completed once nothing is
// pending, also for a run that could not emit its terminal event.
func (l *runLog) runEnded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runDone = true
	l.wake()
}

// add numbers and records ev; it is called by the sequencer's sink, in emission order.
func (l *runLog) add(ev agui.Event) {
	data, err := agui.MarshalEvent(ev)
	l.mu.Lock()
	if l.frozen {
		l.mu.Unlock()
		return
	}
	l.seq++
	if err != nil {
		// The stream itself will fail on the same event; the log keeps its place.
		data = []byte(`{"type":"CUSTOM","name":"baton.unencodable"}`)
	}
	for len(l.pending) > 0 && (len(l.pending) >= maxPendingEvents || l.pendingBytes+len(data) > maxPendingBytes) {
		l.pendingBytes -= len(l.pending[0].Data)
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
}

// waitEnded waits until the writer has stored everything, when the terminal event has been
// added (otherwise the writer waits for the run to end, and so must not be waited for).
func (l *runLog) waitEnded() {
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		<-l.done
	}
}

// Changed returns a channel closed after the next append to the store.
func (l *runLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// drain is the writer: it appends pending events and the work document until nothing is
// pending (the input's messages are stored with the run's start: recordStart). It completes the log (thread messages,
// done closed) once the terminal event is stored, or once the run has ended and nothing is
// pending (a run that could not emit its terminal event).
func (l *runLog) drain() {
	var failing time.Time // when the store began refusing this writer's writes
	pause := storeRetry
	for {
		l.mu.Lock()
		batch, dropped := l.pending, l.dropped
		l.pending, l.dropped, l.pendingBytes = nil, 0, 0
		l.mu.Unlock()
		if dropped > 0 {
			l.log.Error("event log fell behind; events dropped from the log", "dropped", dropped)
		}
		// The work document first: it is what a replica that claims this run after a
		// crash needs in order to cancel the run's remote tasks.
		werr := l.saveWork()
		var aerr error
		if len(batch) > 0 {
			aerr = l.append(batch)
		}
		if failed := (werr != nil || aerr != nil) && !l.isFenced(); failed {
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) > maxStoreRetry || !l.sleep(pause) {
				l.giveUp()
			}
			pause = min(2*pause, maxStoreRetryPause)
			continue
		}
		failing, pause = time.Time{}, storeRetry
		if len(batch) > 0 {
			continue
		}
		l.mu.Lock()
		switch {
		case len(l.pending) > 0 || l.workDirty:
			l.mu.Unlock()
			continue
		case l.frozen:
			// Handed off: what was pending is stored; the new owner writes the rest.
			l.finished, l.writing = true, false
			l.signal()
			l.mu.Unlock()
			close(l.done)
			return
		case l.ended || l.runDone:
			l.finished, l.writing = true, false
			// A run whose terminal event is stored is never continued from its
			// checkpoint (a takeover finds the end in the log): the checkpoint, which holds
			// the whole conversation again, goes, so that a thread's storage grows with
			// its messages (kept once, in the thread) and not with their square.
			strip := l.ended && l.work.Checkpoint != nil
			if strip {
				l.work.Checkpoint, l.work.Results = nil, nil
				l.workDirty = true
			}
			l.signal()
			l.mu.Unlock()
			if strip {
				l.saveWork()
			}
			l.saveMessages()
			close(l.done)
			return
		default:
			l.writing = false
			l.mu.Unlock()
			return
		}
	}
}

// append stores batch. What the store did not take goes back in front of the pending
// events, to be tried again; a fenced refusal stops the run (fenceOff) and drops it.
func (l *runLog) append(batch []store.Event) error {
	var err error
	stored := 0
	for stored < len(batch) {
		part := batch[stored:min(stored+store.MaxEventsRead, len(batch))]
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		err = l.st.AppendEvents(ctx, l.thread, l.run, l.epoch, part)
		cancel()
		if err != nil {
			break
		}
		stored += len(part)
	}
	l.mu.Lock()
	if stored > 0 {
		l.settled = max(l.settled, batch[stored-1].Seq)
		l.signal()
		l.stored = max(l.stored, batch[stored-1].Seq)
		defer l.tellStored(l.stored)
	}
	if err != nil && !errors.Is(err, store.ErrFenced) {
		rest := batch[stored:]
		l.log.Warn("event log: the store did not take events; trying again", "from", rest[0].Seq, "to", rest[len(rest)-1].Seq, "err", err)
		for _, ev := range rest {
			l.pendingBytes += len(ev.Data)
		}
		l.pending = append(rest[:len(rest):len(rest)], l.pending...)
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
func (l *runLog) fenceOff(err error) {
	l.mu.Lock()
	first := !l.fenced
	l.fenced = true
	l.frozen = true
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

func (l *runLog) isFenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// sleep pauses the writer for d; false when the engine stops meanwhile.
func (l *runLog) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.quit:
		return false
	}
}

// giveUp drops what the store would not take for maxStoreRetry (or when the engine
// stops): the loss is logged, and the log completes without it.
func (l *runLog) giveUp() {
	l.mu.Lock()
	n := len(l.pending)
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
func (l *runLog) tellStored(seq int64) {
	if l.onStored != nil {
		l.onStored(seq)
	}
}

// signal wakes whoever waits on Changed; l.mu is held.
func (l *runLog) signal() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// state returns the settled sequence number, whether nothing more will be stored (the log
// is complete, or was handed off and what it had is stored), and a channel closed after the
// next append or the end of the log.
func (l *runLog) state() (settled int64, over bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.settled, l.finished, l.changed
}

func (l *runLog) saveMessages() {
	l.mu.Lock()
	msgs := l.msgs.build()
	l.mu.Unlock()
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	if err := l.st.SaveMessages(ctx, l.thread, msgs); err != nil {
		l.log.Error("thread messages: save failed", "err", err)
	}
}

// messageBuilder turns a run's events into the AG-UI messages they add to the thread: the
// assistant's text and tool calls, and the tool results. Sub-agent output (attributed with
// subagentRunId) is progress, not conversation, and is left out. Messages and calls are
// kept in slices searched from the newest (events almost always continue the latest): an
// open run retains these, and maps would cost more than the few entries (issue 18).
type messageBuilder struct {
	msgs  []builtMessage // in order
	owner []callOwner    // tool call id -> message id
}

type builtMessage struct {
	*agui.Message
	text *strings.Builder // the text so far
}

type callOwner struct{ call, msg string }

// maxMessageBytes bounds the text collected per message.
const maxMessageBytes = 1 << 20

func (b *messageBuilder) find(id string) *builtMessage {
	for i := len(b.msgs) - 1; i >= 0; i-- {
		if b.msgs[i].ID == id {
			return &b.msgs[i]
		}
	}
	return nil
}

func (b *messageBuilder) msg(id, role string) *agui.Message {
	if m := b.find(id); m != nil {
		return m.Message
	}
	m := &agui.Message{ID: id, Role: role}
	b.msgs = append(b.msgs, builtMessage{Message: m})
	return m
}

func (b *messageBuilder) ownerOf(callID string) string {
	for i := len(b.owner) - 1; i >= 0; i-- {
		if b.owner[i].call == callID {
			return b.owner[i].msg
		}
	}
	return ""
}

func (b *messageBuilder) add(ev agui.Event) {
	switch v := ev.(type) {
	case *agui.TextMessageStart:
		if v.SubagentRunID == "" {
			role := v.Role
			if role == "" {
				role = agui.RoleAssistant
			}
			b.msg(v.MessageID, role)
		}
	case *agui.TextMessageContent:
		if m := b.find(v.MessageID); m != nil && v.SubagentRunID == "" {
			if m.text == nil {
				m.text = &strings.Builder{}
			}
			if m.text.Len()+len(v.Delta) <= maxMessageBytes {
				m.text.WriteString(v.Delta)
			}
		}
	case *agui.ToolCallStart:
		if v.SubagentRunID != "" {
			return
		}
		parent := v.ParentMessageID
		if parent == "" {
			parent = v.ToolCallID
		}
		m := b.msg(parent, agui.RoleAssistant)
		m.ToolCalls = append(m.ToolCalls, agui.ToolCall{ID: v.ToolCallID, Type: "function", Function: agui.FunctionCall{Name: v.ToolCallName}})
		b.owner = append(b.owner, callOwner{call: v.ToolCallID, msg: parent})
	case *agui.ToolCallArgs:
		if v.SubagentRunID != "" {
			return
		}
		parent := b.ownerOf(v.ToolCallID)
		if m := b.find(parent); m != nil && parent != "" {
			for i := range m.ToolCalls {
				if m.ToolCalls[i].ID == v.ToolCallID && len(m.ToolCalls[i].Function.Arguments)+len(v.Delta) <= maxMessageBytes {
					m.ToolCalls[i].Function.Arguments += v.Delta
				}
			}
		}
	case *agui.ToolCallResult:
		if v.SubagentRunID == "" {
			m := b.msg(v.MessageID, agui.RoleTool)
			m.ToolCallID = v.ToolCallID
			m.Content, _ = json.Marshal(v.Content)
		}
	}
}

func (b *messageBuilder) build() []store.Message {
	out := make([]store.Message, 0, len(b.msgs))
	for _, bm := range b.msgs {
		m, id := bm.Message, bm.ID
		if bm.text != nil {
			m.Content, _ = json.Marshal(bm.text.String())
		}
		if m.Content == nil && len(m.ToolCalls) == 0 && m.Role != agui.RoleTool {
			m.Content = json.RawMessage(`""`)
		}
		data, err := json.Marshal(m)
		if err != nil {
			continue
		}
		out = append(out, store.Message{ID: id, Data: data})
	}
	return out
}

// flush waits until every event added so far is in the store (or was given up), or ctx
// ends. A run calls it before it sends a turn's calls: a replica that takes the run over
// from that turn's checkpoint then finds the log complete up to it, with no hole where the
// events this replica streamed but had not stored were.
func (l *runLog) flush(ctx context.Context) error {
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
