package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
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
	l := durable.NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg, nil)
	l.Own(1, nil, nil)
	l.NoteTask(durable.Task{Agent: "research", TaskID: "task-1", ContextID: "ctx-1", State: "TASK_STATE_WORKING", ToolCallID: "c-start", SubagentRunID: "sa-1"})
	l.NoteTask(durable.Task{Agent: "research", TaskID: "task-1", State: "TASK_STATE_INPUT_REQUIRED"}) // a state change alone
	l.NoteTask(durable.Task{Agent: "research", TaskID: "task-1", State: "TASK_STATE_WORKING", ToolCallID: "c-answer", SubagentRunID: "sa-2"})
	require.NoError(t, l.SaveWork())

	wg.Wait() // the writer ended
	rec, err := st.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	var work durable.Work
	require.NoError(t, json.Unmarshal(rec.Work, &work))
	tools := &toolset{agents: map[string]*Agent{"research": {Name: "research"}}}
	got, task := resumeDecision(tools, llm.ToolCall{ID: "c-answer", Name: "research"}, &work, false)
	assert.Equal(t, resumeFollow.String(), got.String(), "the continuation's task is followed")
	require.NotNil(t, task)
	assert.Equal(t, "task-1", task.TaskID)
	assert.Equal(t, "sa-2", task.SubagentRunID, "under the continuation's attribution")
}
