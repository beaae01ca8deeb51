package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// endWrites is a memory store that counts the writes that record a run's end.
type endWrites struct {
	store.Store
	mu     sync.Mutex
	counts map[string]int
}

func (s *endWrites) add(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[kind]++
}

func (s *endWrites) EndRun(ctx context.Context, threadID, runID string, epoch int64, state string) error {
	s.add("EndRun")
	return s.Store.EndRun(ctx, threadID, runID, epoch, state)
}

func (s *endWrites) EndRunStep(ctx context.Context, threadID, runID string, epoch int64, state string, step *store.Step) error {
	s.add("EndRunStep")
	return s.Store.EndRunStep(ctx, threadID, runID, epoch, state, step)
}

func (s *endWrites) EndRunMessages(ctx context.Context, threadID, runID string, epoch int64, state string, step *store.Step, msgs []store.Message) error {
	kind := "EndRunMessages"
	if step != nil {
		kind += " with step"
	}
	s.add(kind)
	return s.Store.EndRunMessages(ctx, threadID, runID, epoch, state, step, msgs)
}

func (s *endWrites) SaveMessages(ctx context.Context, threadID string, msgs []store.Message) error {
	s.add("SaveMessages")
	return s.Store.SaveMessages(ctx, threadID, msgs)
}

func (s *endWrites) RecordStep(ctx context.Context, st *store.Step) error {
	s.add("RecordStep " + st.Kind)
	return s.Store.RecordStep(ctx, st)
}

func (s *endWrites) SaveRunLog(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event, work json.RawMessage) error {
	s.add("SaveRunLog")
	return s.Store.SaveRunLog(ctx, threadID, runID, epoch, evs, work)
}

// TestRunStartEndOneWrite: a run's start is one write of the store with its run_start
// step (StartRun), its end one write with its run_end step and the messages the run added
// to its thread (EndRunMessages: no SaveMessages of their own), both under the run's
// epoch; and the checkpoint of a turn whose calls go out is written with the turn's events
// (SaveRunLog).
func TestRunStartEndOneWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	st := &endWrites{Store: mem, counts: map[string]int{}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, &fakeAgent{send: finalResult(subagent.StateCompleted, "done")}, func(c *Config) { c.Store = st })
	in := input("end-once")
	evs := startAndCollect(t, e, in)
	require.IsType(t, &agui.RunFinished{}, lastEvent(evs), "%v", types(evs))
	run, _ := waitEnded(t, mem, in.ThreadID, in.RunID)
	assert.Equal(t, string(OutcomeCompleted), run.State)

	st.mu.Lock()
	counts := st.counts
	st.mu.Unlock()
	assert.Equal(t, 1, counts["EndRunMessages with step"], "%v", counts)
	assert.Zero(t, counts["EndRunMessages"], "%v", counts)
	assert.Zero(t, counts["EndRunStep"], "%v", counts)
	assert.Zero(t, counts["SaveMessages"], "the run's messages go with its end: %v", counts)
	assert.Zero(t, counts["EndRun"], "%v", counts)
	assert.Zero(t, counts["RecordStep "+store.StepRunEnd], "%v", counts)
	assert.GreaterOrEqual(t, counts["SaveRunLog"], 1, "the turn's checkpoint goes with its events: %v", counts)
	assert.Zero(t, counts["RecordStep "+store.StepRunStart], "the start step goes with the start: %v", counts)

	steps, err := mem.Steps(ctx, in.ThreadID, 0, 0)
	require.NoError(t, err)
	first := steps[0]
	assert.Equal(t, store.StepRunStart, first.Kind)
	assert.Equal(t, store.StepOK, first.Outcome)
	assert.Equal(t, run.Epoch, first.Epoch)
	last := steps[len(steps)-1]
	assert.Equal(t, store.StepRunEnd, last.Kind)
	assert.Equal(t, string(OutcomeCompleted), last.Outcome)
	assert.Equal(t, run.Epoch, last.Epoch)
	assert.Equal(t, in.RunID, last.RunID)

	msgs, err := mem.LoadMessages(ctx, in.ThreadID)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	var answer agui.Message
	require.NoError(t, json.Unmarshal(msgs[len(msgs)-1].Data, &answer))
	assert.Equal(t, agui.RoleAssistant, answer.Role, "the run's answer is stored with its end: %s", msgs[len(msgs)-1].Data)
}
