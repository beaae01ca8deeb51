package durable

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// countedWrites is a store that records each write of a run's log (the call, its number of
// events, whether it held a work document and a checkpoint) and can fail the next ones.
type countedWrites struct {
	store.Store
	mu     sync.Mutex
	writes []string
	fail   int // the next writes that fail (not fenced)
	// gate, when set, holds every write until it is closed; entered is told (when it has
	// room) that a write is held.
	gate    chan struct{}
	entered chan struct{}
}

var errDown = errors.New("store down")

func (c *countedWrites) note(kind string, evs int, work json.RawMessage) error {
	if c.gate != nil {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := kind
	if evs > 0 {
		w += " events"
	}
	if work != nil {
		w += " work"
		if strings.Contains(string(work), `"checkpoint"`) {
			w += "+checkpoint"
		}
	}
	c.writes = append(c.writes, w)
	if c.fail > 0 {
		c.fail--
		return errDown
	}
	return nil
}

func (c *countedWrites) AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event) error {
	if err := c.note("AppendEvents", len(evs), nil); err != nil {
		return err
	}
	return c.Store.AppendEvents(ctx, threadID, runID, epoch, evs)
}

func (c *countedWrites) SaveRunWork(ctx context.Context, threadID, runID string, epoch int64, work json.RawMessage) error {
	if err := c.note("SaveRunWork", 0, work); err != nil {
		return err
	}
	return c.Store.SaveRunWork(ctx, threadID, runID, epoch, work)
}

func (c *countedWrites) SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event, work json.RawMessage) error {
	if err := c.note("SaveRunLog", len(evs), work); err != nil {
		return err
	}
	return c.Store.SaveRunLog(ctx, threadID, runID, epoch, evs, work)
}

func (c *countedWrites) taken() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// heldLog returns a run's log over a counted memory store whose writer goroutine is held
// off (as if one were running), so that what the test adds stays pending until it lets the
// writer go (release) or writes from the run's side (SaveWork).
func heldLog(t *testing.T) (*EventLog, *countedWrites, store.Store, func()) {
	t.Helper()
	ctx := context.Background()
	mem, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	epoch, err := mem.BeginRun(ctx, "t", "r", "replica", time.Minute)
	require.NoError(t, err)
	st := &countedWrites{Store: mem}
	var wg sync.WaitGroup
	l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg, nil)
	l.Own(epoch, nil, nil)
	l.mu.Lock()
	l.writing = true
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		l.writing = false
		l.wake()
		l.mu.Unlock()
	}
	t.Cleanup(wg.Wait)
	return l, st, mem, release
}

// TestEventLogTurnInOneWrite: the checkpoint a turn stores before its calls go out
// (SaveWorkNow) is written with the turn's pending events, in one write of the store; the
// log is then complete up to them (Flush has nothing to wait for).
func TestEventLogTurnInOneWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, st, mem, release := heldLog(t)
	defer release()
	l.Add(&agui.ToolCallStart{ToolCallID: "c1", ToolCallName: "bench"})
	l.Add(&agui.ToolCallArgs{ToolCallID: "c1", Delta: "{}"})
	l.Add(&agui.ToolCallEnd{ToolCallID: "c1"})
	l.NoteCheckpoint(json.RawMessage(`{"v":1,"conv":[]}`))
	require.NoError(t, l.SaveWorkNow(ctx, func(context.Context) error { return nil }))
	assert.Equal(t, []string{"SaveRunLog events work+checkpoint"}, st.taken())
	require.NoError(t, l.Flush(ctx))
	evs, err := mem.Events(ctx, "t", "r", 0, 10)
	require.NoError(t, err)
	assert.Len(t, evs, 3)
	rec, err := mem.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	assert.Contains(t, string(rec.Work), `"conv":[]`)

	// A work note alone (an A2A task named) with the event emitted before it: one write.
	l.Add(&agui.Custom{Name: "subagent"})
	l.NoteTask(Task{Agent: "bench", TaskID: "task-1", State: "working", ToolCallID: "c1"})
	require.NoError(t, l.SaveWork())
	assert.Equal(t, []string{"SaveRunLog events work+checkpoint"}, st.taken())
	require.NoError(t, l.SaveWork(), "nothing changed: nothing written")
	assert.Empty(t, st.taken())
}

// TestEventLogEndInOneWrite: the terminal event and the work document without its
// checkpoint (a finished run is never continued from it) are one write; the thread's
// messages follow.
func TestEventLogEndInOneWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, st, mem, release := heldLog(t)
	l.NoteCheckpoint(json.RawMessage(`{"v":1,"conv":[]}`))
	l.Add(&agui.TextMessageStart{MessageID: "m", Role: agui.RoleAssistant})
	l.Add(&agui.TextMessageContent{MessageID: "m", Delta: "done"})
	l.Add(&agui.TextMessageEnd{MessageID: "m"})
	l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
	release()
	l.WaitEnded()
	assert.Equal(t, []string{"SaveRunLog events work"}, st.taken())
	rec, err := mem.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	assert.NotContains(t, string(rec.Work), "checkpoint")
	evs, err := mem.Events(ctx, "t", "r", 0, 10)
	require.NoError(t, err)
	assert.Len(t, evs, 4)
	msgs, err := mem.LoadMessages(ctx, "t")
	require.NoError(t, err)
	assert.Len(t, msgs, 1, "the run's messages are saved as the log completes")
}

// TestEventLogLargeWorkApart: a work document larger than maxJointWork is written after the
// events, not with them, so that it does not hold up what the client sees.
func TestEventLogLargeWorkApart(t *testing.T) {
	t.Parallel()
	l, st, _, release := heldLog(t)
	defer release()
	l.Add(&agui.Custom{Name: "x"})
	l.NoteCheckpoint(json.RawMessage(`{"v":1,"conv":"` + strings.Repeat("a", maxJointWork) + `"}`))
	require.NoError(t, l.SaveWork())
	assert.Equal(t, []string{"AppendEvents events", "SaveRunWork work+checkpoint"}, st.taken())
}

// TestEventLogJointWriteRetried: a joint write the store does not take leaves both the
// events and the document to write; the next write stores them, once and in order.
func TestEventLogJointWriteRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, st, mem, release := heldLog(t)
	defer release()
	l.Add(&agui.Custom{Name: "one"})
	l.NoteCheckpoint(json.RawMessage(`{"v":1}`))
	st.mu.Lock()
	st.fail = 1
	st.mu.Unlock()
	require.ErrorIs(t, l.SaveWork(), errDown)
	l.Add(&agui.Custom{Name: "two"})
	require.NoError(t, l.SaveWork())
	assert.Equal(t, []string{"SaveRunLog events work+checkpoint", "SaveRunLog events work+checkpoint"}, st.taken())
	evs, err := mem.Events(ctx, "t", "r", 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, []int64{1, 2}, []int64{evs[0].Seq, evs[1].Seq})
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, int64(2), l.stored)
}

// TestEventLogNoteTaskNow: the task a delegation learns is stored at once on the caller's
// goroutine, without waking the log's writer (the caller would only wait for it to give
// the write back); a write the store does not take is left to the writer, which stores it.
func TestEventLogNoteTaskNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	epoch, err := mem.BeginRun(ctx, "t", "r", "replica", time.Minute)
	require.NoError(t, err)
	st := &countedWrites{Store: mem, gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg, nil)
	l.Own(epoch, nil, nil)
	writing := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.writing
	}
	work := func() string {
		rec, err := mem.GetRun(ctx, "t", "r")
		require.NoError(t, err)
		return string(rec.Work)
	}

	done := make(chan error, 1)
	go func() {
		done <- l.NoteTaskNow(Task{Agent: "bench", TaskID: "task-1", State: "working", ToolCallID: "c1"})
	}()
	<-st.entered
	assert.False(t, writing(), "the caller writes; no writer goroutine is woken for it")
	close(st.gate)
	require.NoError(t, <-done)
	assert.Equal(t, []string{"SaveRunWork work"}, st.taken())
	assert.Contains(t, work(), "task-1", "stored when NoteTaskNow returns")

	// The store refuses the write: the caller learns it, and the writer stores it later.
	st.mu.Lock()
	st.fail = 1
	st.mu.Unlock()
	require.ErrorIs(t, l.NoteTaskNow(Task{Agent: "bench", TaskID: "task-2", State: "working", ToolCallID: "c2"}), errDown)
	wg.Wait() // the writer, woken by the failed write, retries until the store takes it
	assert.Equal(t, []string{"SaveRunWork work", "SaveRunWork work"}, st.taken())
	assert.Contains(t, work(), "task-2")
	assert.False(t, writing())
}
