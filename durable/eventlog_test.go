package durable

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// The log's writer goroutine exists only while something is pending: it ends when the log
// is idle, comes back for the next event, and completes the log at the terminal event.
func TestEventLogWriterOnDemand(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	epoch, err := st.BeginRun(ctx, "t", "r", "replica", time.Minute)
	require.NoError(t, err)
	var wg sync.WaitGroup
	l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg, nil)
	l.Own(epoch, nil, nil)

	idle := func() {
		wg.Wait() // no writer goroutine left
		l.mu.Lock()
		defer l.mu.Unlock()
		require.False(t, l.writing)
		require.Empty(t, l.pending)
	}
	stored := func() int {
		evs, err := st.Events(ctx, "t", "r", 0, 100)
		require.NoError(t, err)
		return len(evs)
	}

	l.Add(&agui.RunStarted{ThreadID: "t", RunID: "r"})
	idle()
	assert.Equal(t, 1, stored())
	l.NoteTask(Task{Agent: "bench", TaskID: "task-1", ContextID: "ctx-1", State: "working", ToolCallID: "call-1", SubagentRunID: "sub-1"})
	idle()
	rec, err := st.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	assert.Contains(t, string(rec.Work), "task-1", "the work document is written by a writer started for it")

	l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
	l.WaitEnded()
	idle()
	assert.Equal(t, 2, stored())
	l.RunEnded() // after the end: nothing more to do, no goroutine
	idle()
	select {
	case <-l.done:
	default:
		t.Fatal("the log is not complete")
	}
}

// A run that ends without its terminal event still completes its log.
func TestEventLogCompletesWithoutTerminalEvent(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	epoch, err := st.BeginRun(ctx, "t", "r", "replica", time.Minute)
	require.NoError(t, err)
	var wg sync.WaitGroup
	l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), &wg, nil)
	l.Own(epoch, nil, nil)
	l.Add(&agui.RunStarted{ThreadID: "t", RunID: "r"})
	l.RunEnded()
	<-l.done
	wg.Wait()
	evs, err := st.Events(ctx, "t", "r", 0, 100)
	require.NoError(t, err)
	assert.Len(t, evs, 1)
}
