package coordinator

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// threadReads is a store that counts the reads of a thread's stored state a run's start,
// setup and delegation make.
type threadReads struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (s *threadReads) count(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[name]++
}

func (s *threadReads) reads() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.n
	s.n = map[string]int{}
	return out
}

func (s *threadReads) ThreadStatus(ctx context.Context, threadID string) (store.ThreadStatus, error) {
	s.count("ThreadStatus")
	return s.Store.ThreadStatus(ctx, threadID)
}

func (s *threadReads) LoadSuspension(ctx context.Context, threadID string) (*store.Suspension, error) {
	s.count("LoadSuspension")
	return s.Store.LoadSuspension(ctx, threadID)
}

func (s *threadReads) LoadRecentMessages(ctx context.Context, threadID string, start func(store.Message) bool) ([]store.Message, error) {
	s.count("LoadRecentMessages")
	return s.Store.LoadRecentMessages(ctx, threadID, start)
}

func (s *threadReads) ExpiredThread(ctx context.Context, threadID string) (string, bool, error) {
	s.count("ExpiredThread")
	return s.Store.ExpiredThread(ctx, threadID)
}

func (s *threadReads) ThreadRuns(ctx context.Context, threadID string, limit int) ([]store.RunRecord, error) {
	s.count("ThreadRuns")
	return s.Store.ThreadRuns(ctx, threadID, limit)
}

// TestReadsPerRun: a delegating run whose start creates its thread reads the thread's
// stored state once (ThreadStatus: nothing to refuse, no record so no history); its setup
// reads no suspension and its delegation no earlier tasks. The thread's next run on a
// replica that does not know it (a new engine on the same store) reads all of them.
func TestReadsPerRun(t *testing.T) {
	t.Parallel()
	mem, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	st := &threadReads{Store: mem, n: map[string]int{}}
	run := func(runID string) {
		agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "found")}
		e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"find it"}`)}, agent, func(c *Config) {
			c.Store = st
		})
		in := input("t-reads")
		in.RunID = runID
		r, err := e.StartRun(context.Background(), in, "alice")
		require.NoError(t, err)
		evs := collect(t, r)
		require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
		require.Len(t, agent.sent, 1, "the run delegated")
	}
	run("r1")
	assert.Equal(t, map[string]int{"ThreadStatus": 1}, st.reads(), "a new thread's run")
	run("r2")
	assert.Equal(t, map[string]int{"ThreadStatus": 1, "LoadRecentMessages": 1, "LoadSuspension": 1, "ThreadRuns": 1},
		st.reads(), "a stored thread this replica does not know")
}
