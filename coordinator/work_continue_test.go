package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// A task continued by a later call (the answer to input-required) is followed for that
// call after a takeover: the continuation is not reported in doubt while its task runs on.
func TestContinuedTaskFollowedForItsCall(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, begun(st.BeginRun(ctx, "t", "r", "replica", time.Minute)))
	var wg sync.WaitGroup
	l := newRunLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg)
	l.epoch = 1
	l.noteTask("research", "task-1", "ctx-1", "TASK_STATE_WORKING", "c-start", "sa-1")
	l.noteTask("research", "task-1", "", "TASK_STATE_INPUT_REQUIRED", "", "") // a state change alone
	l.noteTask("research", "task-1", "", "TASK_STATE_WORKING", "c-answer", "sa-2")

	wg.Wait() // the writer stored the work document and ended
	l.mu.Lock()
	work := l.work
	l.mu.Unlock()
	require.Len(t, work.A2A, 1, "one task")
	assert.Equal(t, "ctx-1", work.A2A[0].ContextID, "the context is kept")
	tools := &toolset{agents: map[string]*Agent{"research": {Name: "research"}}}
	got, task := resumeDecision(tools, llm.ToolCall{ID: "c-answer", Name: "research"}, &work, false)
	assert.Equal(t, resumeFollow.String(), got.String(), "the continuation's task is followed")
	require.NotNil(t, task)
	assert.Equal(t, "task-1", task.TaskID)
	assert.Equal(t, "sa-2", task.SubagentRunID, "under the continuation's attribution")
}
