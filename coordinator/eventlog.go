package coordinator

import (
	"context"
	"encoding/json"
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
// so it may see an event a little after the live stream did, never out of order. Pending
// events are bounded (maxPendingEvents): if the store stalls that long, the oldest pending
// events are dropped from the log (the live stream is unaffected) and the loss is logged.
type runLog struct {
	st          store.Store
	thread, run string
	log         *slog.Logger

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
		l.saveWork()
		if len(batch) > 0 {
			l.append(batch)
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
			l.mu.Unlock()
			close(l.done)
			return
		case l.ended || l.runDone:
			l.finished, l.writing = true, false
			l.mu.Unlock()
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

func (l *runLog) append(batch []store.Event) {
	for i := 0; i < len(batch); i += store.MaxEventsRead {
		part := batch[i:min(i+store.MaxEventsRead, len(batch))]
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		err := l.st.AppendEvents(ctx, l.thread, l.run, part)
		cancel()
		if err != nil {
			l.log.Error("event log: append failed; a reconnect will miss these events", "from", part[0].Seq, "to", part[len(part)-1].Seq, "err", err)
		}
	}
	l.mu.Lock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.mu.Unlock()
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
