package durable

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// stopper records what a run's fencing asked of the run loop.
type stopper struct {
	mu     sync.Mutex
	moved  []string
	lapsed int
}

func (s *stopper) Moved(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moved = append(s.moved, why)
}

func (s *stopper) LeaseLapsed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapsed++
}

// ownedRun is a run that replica-a began in a memory store, with its event log.
func ownedRun(t *testing.T) (store.Store, *EventLog, int64) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
	require.NoError(t, err)
	return st, NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), nil, nil), epoch
}

// TestRunFence: Own puts the epoch on the run's log and returns its ownership; a lease
// lost fails MayAct with ErrMoved and stops the run once per refusal; without a heartbeat
// nothing is held back.
func TestRunFence(t *testing.T) {
	t.Parallel()
	_, l, epoch := ownedRun(t)
	stop := &stopper{}
	f := NewRunFence(l, "replica-a", time.Minute, 10*time.Second, stop)
	require.NoError(t, f.MayAct(context.Background()), "not owned yet: nothing to wait for")
	own := f.Own(epoch, time.Now(), nil)
	assert.Equal(t, RunRef{ThreadID: "t", RunID: "r", Epoch: epoch}, own.Ref())
	assert.Equal(t, epoch, l.Epoch())
	assert.True(t, own.Leased())
	require.NoError(t, f.MayAct(context.Background()), "a fresh lease holds")

	f.Lose()
	require.ErrorIs(t, f.MayAct(context.Background()), ErrMoved)
	assert.Equal(t, []string{"its lease was lost"}, stop.moved)

	unleased := NewRunFence(l, "replica-a", time.Minute, 0, stop)
	assert.False(t, unleased.Own(epoch, time.Now(), nil).Leased(), "no heartbeat, no lease")
	require.NoError(t, unleased.MayAct(context.Background()))
}

// TestRunSuspension: saves carry the run's epoch and are refused (stopping the run) once
// another replica took it over; Update changes the held suspension's record and saves it;
// Settle removes the suspension, and is refused when fenced.
func TestRunSuspension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, l, epoch := ownedRun(t)
	l.Own(epoch, nil, func(error) {})
	stop := &stopper{}
	rs := NewRunSuspension(st, l, stop)
	s := &store.Suspension{ThreadID: "t", RunID: "r", History: json.RawMessage(`[]`),
		Interrupts: []store.Interrupt{{ID: "i1", ToolCallID: "c1", Kind: "approval", Handle: json.RawMessage(`{"n":0}`)}}}
	require.NoError(t, rs.Save(ctx, s, "saving"))
	assert.Equal(t, epoch, s.Epoch)

	require.ErrorIs(t, rs.Update(ctx, "r", "i1", nil, "update"), ErrNoSuspension, "nothing held")
	rs.Hold(s)
	require.ErrorIs(t, rs.Update(ctx, "r", "nope", func(h json.RawMessage) (json.RawMessage, error) { return h, nil }, "update"), ErrNoSuspension)
	refuse := errors.New("not an approval")
	require.ErrorIs(t, rs.Update(ctx, "r", "i1", func(json.RawMessage) (json.RawMessage, error) { return nil, refuse }, "update"), refuse)
	require.NoError(t, rs.Update(ctx, "r", "i1", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"n":1}`), nil }, "update"))
	got, err := st.LoadSuspension(ctx, "t")
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":1}`, string(got.Interrupts[0].Handle))
	assert.Equal(t, "r", s.WriterRunID, "written by the run that answers it (not stored: it fences the save)")
	rs.Hold(nil)
	assert.Empty(t, stop.moved)

	_, err = st.TakeOverRuns(ctx, "replica-b", time.Minute, 10, true)
	require.NoError(t, err)
	require.ErrorIs(t, rs.Save(ctx, s, "the store refused its suspension"), store.ErrFenced)
	require.ErrorIs(t, rs.Settle(ctx, "r", []string{"i1"}), store.ErrFenced)
	assert.Equal(t, []string{"the store refused its suspension", "the store refused to settle its resume"}, stop.moved)
	_, err = st.LoadSuspension(ctx, "t")
	require.NoError(t, err, "a fenced settle keeps the suspension")
}

// TestCheckpoint: before setup only the client's own messages after the prepended history
// are kept, once Conv holds the history none are; a checkpoint of another version or
// without input is refused.
func TestCheckpoint(t *testing.T) {
	t.Parallel()
	in := agui.RunAgentInput{ThreadID: "t", RunID: "r", Messages: []agui.Message{
		{ID: "h1", Role: "user", Content: json.RawMessage(`"stored"`)}, {ID: "m1", Role: "user", Content: json.RawMessage(`"kept by the thread"`)}, {Role: "user", Content: json.RawMessage(`"own"`)}}}
	doc, err := Checkpoint{Owner: "alice", Depth: 2}.Encode(in, 1)
	require.NoError(t, err)
	cp, err := DecodeCheckpoint(doc)
	require.NoError(t, err)
	assert.Equal(t, CheckpointVersion, cp.V)
	assert.True(t, cp.Prepended)
	assert.Equal(t, 2, cp.Depth)
	var back agui.RunAgentInput
	require.NoError(t, json.Unmarshal(cp.Input, &back))
	require.Len(t, back.Messages, 1)
	assert.JSONEq(t, `"own"`, string(back.Messages[0].Content))
	assert.Equal(t, "alice", CheckpointOwner(Work{Checkpoint: doc}))

	doc, err = Checkpoint{Conv: json.RawMessage(`[]`)}.Encode(in, 1)
	require.NoError(t, err)
	cp, err = DecodeCheckpoint(doc)
	require.NoError(t, err)
	assert.False(t, cp.Prepended)
	require.NoError(t, json.Unmarshal(cp.Input, &back))
	assert.Empty(t, back.Messages)

	for name, doc := range map[string]string{"not json": `{`, "version": `{"v":99,"input":{}}`, "no input": `{"v":1}`, "null input": `{"v":1,"input":null}`} {
		_, err := DecodeCheckpoint(json.RawMessage(doc))
		assert.ErrorIs(t, err, ErrCheckpoint, name)
	}
	assert.Empty(t, CheckpointOwner(Work{}))
}
