package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// TestRunRecordedInStore: a run's record, event log, thread messages and downstream work
// reach the store by the time its stream ends.
func TestRunRecordedInStore(t *testing.T) {
	ctx := context.Background()
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "agent says hi")}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent)
	r, err := e.StartRun(context.Background(), input("t"), "alice")
	require.NoError(t, err)
	evs := collect(t, r)
	st := e.cfg.Store

	th, err := st.GetThread(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, "alice", th.Owner)
	assert.Equal(t, "hello", th.Title)
	assert.Equal(t, "r-t", th.LastRunID)

	run, err := st.GetRun(ctx, "t", "r-t")
	require.NoError(t, err)
	assert.Equal(t, "completed", run.State)
	var work durable.Work
	require.NoError(t, json.Unmarshal(run.Work, &work))
	require.Len(t, work.A2A, 1)
	assert.Equal(t, "research", work.A2A[0].Agent)
	assert.Equal(t, "task-1", work.A2A[0].TaskID)
	assert.Equal(t, string(subagent.StateCompleted), work.A2A[0].State)

	logged, err := st.Events(ctx, "t", "r-t", 0, 0)
	require.NoError(t, err)
	require.Len(t, logged, len(evs), "every event is in the log")
	for i, ev := range logged {
		assert.Equal(t, int64(i+1), ev.Seq)
		assert.Contains(t, string(ev.Data), `"type":"`+string(evs[i].EventType())+`"`)
	}

	msgs, err := st.LoadMessages(ctx, "t")
	require.NoError(t, err)
	var roles []string
	for _, m := range msgs {
		var v struct {
			Role string `json:"role"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &v))
		roles = append(roles, v.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "tool", "assistant"}, roles, "the question, the delegation call, its result and the answer")

	// The thread is free for its next run, and is alice's on a restart too.
	e2 := newStartedEngine(t, Config{Model: &fakeModel{turn: func(*llm.Request) []llm.Delta { return nil }}, Store: st})
	in := input("t")
	in.RunID = "r2"
	_, err = e2.StartRun(context.Background(), in, "mallory")
	require.ErrorIs(t, err, ErrForbidden)
	_, err = st.ActiveRun(ctx, "t")
	require.ErrorIs(t, err, store.ErrNotFound, "the refused start recorded no run")
}

// TestReapLapsedRun: a run whose replica stopped heartbeating, without a checkpoint to
// continue from, is taken over by another and ended: its running A2A task is cancelled (a
// finished one is not), its event log ends with RUN_LOST, and its thread is free again.
func TestReapLapsedRun(t *testing.T) {
	ctx := context.Background()
	agent := &fakeAgent{}
	e := newEngine(t, &fakeModel{turn: func(*llm.Request) []llm.Delta { return nil }}, agent)
	st := e.cfg.Store
	_, err := st.ClaimThread(ctx, "t", "alice", "")
	require.NoError(t, err)
	require.NoError(t, begun(st.BeginRun(ctx, "t", "r1", "dead-replica", -time.Second)))
	require.NoError(t, st.SaveRunWork(ctx, "t", "r1", 1, json.RawMessage(
		`{"a2a":[{"agent":"research","taskId":"task-live","state":"working"},{"agent":"research","taskId":"task-done","state":"completed"}],"mcp":[]}`)))
	require.NoError(t, st.AppendEvents(ctx, "t", "r1", 1, []store.Event{
		{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"r1"}`)},
		{Seq: 2, Data: json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)},
	}))

	assert.Equal(t, 1, e.jobs.Takeover().Look(ctx, false))
	assert.Equal(t, []string{"task-live"}, agent.cancelled())
	run, err := st.GetRun(ctx, "t", "r1")
	require.NoError(t, err)
	assert.Equal(t, string(OutcomeError), run.State, "without a checkpoint the run cannot continue")
	evs, err := st.Events(ctx, "t", "r1", 2, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, int64(3), evs[0].Seq, "numbered on densely from the log")
	assert.Contains(t, string(evs[0].Data), `"type":"RUN_ERROR"`)
	assert.Contains(t, string(evs[0].Data), `"code":"RUN_LOST"`)
	assert.Contains(t, string(evs[0].Data), `no checkpoint`)

	assert.Zero(t, e.jobs.Takeover().Look(ctx, false))
	assert.Len(t, agent.cancelled(), 1, "a claimed run is cleaned up once")
	require.NoError(t, begun(st.BeginRun(ctx, "t", "r2", "me", time.Minute)), "the thread is free")
}

// TestStoredHistoryPrepended: a client that sends only its new message gets the thread's
// stored history in front of it; one that sends the full history is left as it is.
func TestStoredHistoryPrepended(t *testing.T) {
	var seen [][]llm.Message
	var mu sync.Mutex
	m := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		mu.Lock()
		seen = append(seen, req.Messages)
		mu.Unlock()
		return []llm.Delta{{Text: "ok"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	e := newEngine(t, m, &fakeAgent{})
	userMsg := func(id, text string) agui.Message {
		c, _ := json.Marshal(text)
		return agui.Message{ID: id, Role: "user", Content: c}
	}
	run := func(runID string, msgs ...agui.Message) {
		r, err := e.StartRun(context.Background(), &agui.RunAgentInput{ThreadID: "h", RunID: runID, ProtocolVersion: "1.0", Messages: msgs}, "")
		require.NoError(t, err)
		collect(t, r)
	}
	users := func(msgs []llm.Message) []string {
		var out []string
		for _, m := range msgs {
			if m.Role == llm.RoleUser {
				out = append(out, m.Content)
			}
		}
		return out
	}
	run("r1", userMsg("u1", "first"))
	run("r2", userMsg("u2", "second")) // only the new message
	all, err := e.cfg.Store.LoadMessages(context.Background(), "h")
	require.NoError(t, err)
	full := []agui.Message{}
	for _, sm := range all {
		var msg agui.Message
		require.NoError(t, json.Unmarshal(sm.Data, &msg))
		full = append(full, msg)
	}
	run("r3", append(full, userMsg("u3", "third"))...) // the full history, as AG-UI clients send it

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	assert.Equal(t, []string{"first"}, users(seen[0]))
	assert.Equal(t, []string{"first", "second"}, users(seen[1]), "the stored history is prepended")
	assert.Equal(t, []string{"first", "second", "third"}, users(seen[2]), "a full history is not doubled")
	assert.Len(t, full, 4, "u1, its answer, u2, its answer")
}

// TestWorkRecordedWhileRunning: a delegation's task id is in the store as soon as the agent
// names it, while the task still runs (a replica that claims the run later cancels it).
func TestWorkRecordedWhileRunning(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-live", "ctx-1")
		obs.Text("working on it")
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent)
	r, err := e.StartRun(context.Background(), input("w"), "")
	require.NoError(t, err)
	<-started
	deadline := time.Now().Add(10 * time.Second)
	for {
		run, err := e.cfg.Store.GetRun(ctx, "w", "r-w")
		require.NoError(t, err)
		var work durable.Work
		require.NoError(t, json.Unmarshal(run.Work, &work))
		if len(work.A2A) == 1 {
			got := work.A2A[0]
			assert.NotEmpty(t, got.ToolCallID, "tied to its call, for a takeover")
			assert.NotEmpty(t, got.SubagentRunID, "tied to its attribution, for a takeover")
			got.ToolCallID, got.SubagentRunID = "", ""
			assert.Equal(t, durable.Task{Agent: "research", TaskID: "task-live", ContextID: "ctx-1", State: "working"}, got)
			break
		}
		require.True(t, time.Now().Before(deadline), "the task never reached the store: %s", run.Work)
		time.Sleep(10 * time.Millisecond)
	}
	r.Cancel(ErrStopped)
	collect(t, r)
}

// begun drops BeginRun's epoch where a test needs only its error.
func begun(_ int64, err error) error { return err }
