package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// followingAgent is a fakeAgent that can follow a task by id (subagent.Agent.Follow).
type followingAgent struct {
	*fakeAgent
	fmu     sync.Mutex
	follows []string
	follow  func(ctx context.Context, taskID string, obs subagent.Observer) (*subagent.Result, error)
}

func (f *followingAgent) Follow(ctx context.Context, taskID, contextID string, obs subagent.Observer) (*subagent.Result, error) {
	f.fmu.Lock()
	f.follows = append(f.follows, taskID)
	f.fmu.Unlock()
	obs.Task(taskID, contextID)
	return f.follow(ctx, taskID, obs)
}

func (f *followingAgent) followed() []string {
	f.fmu.Lock()
	defer f.fmu.Unlock()
	return append([]string(nil), f.follows...)
}

func (f *fakeAgent) sends() []subagent.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]subagent.Request(nil), f.sent...)
}

// TestCheckpointWrittenAndRead: a run's checkpoint after its model turn holds the
// conversation with the turn's call, the input without its messages, the failure state
// and the owner, and decodes into what a takeover starts from.
func TestCheckpointWrittenAndRead(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-cp", "ctx-1")
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent)
	in := input("cp")
	in.Tools = []agui.Tool{{Name: "ui_confirm", Description: "Confirm in the UI."}}
	r, err := e.StartRun(context.Background(), in, "alice")
	require.NoError(t, err)
	<-started
	var to *takenOver
	deadline := time.Now().Add(10 * time.Second)
	for {
		run, err := e.cfg.Store.GetRun(ctx, "cp", "r-cp")
		require.NoError(t, err)
		var work durable.Work
		require.NoError(t, json.Unmarshal(run.Work, &work))
		var why string
		if to, why = (&adoption{e: e, rec: *run}).decodeTakeover(context.Background(), work); why == "" && len(pendingCalls(to.conv)) == 1 && len(work.A2A) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no checkpoint with the turn's call: %s (%s)", run.Work, why)
		time.Sleep(10 * time.Millisecond)
	}
	r.Cancel(ErrStopped)
	collect(t, r)

	assert.Equal(t, "alice", to.cp.Owner)
	assert.Equal(t, durable.CheckpointVersion, to.cp.V)
	var back agui.RunAgentInput
	require.NoError(t, json.Unmarshal(to.cp.Input, &back))
	assert.Equal(t, "cp", back.ThreadID)
	assert.Equal(t, "r-cp", back.RunID)
	assert.Empty(t, back.Messages, "the conversation holds the history")
	require.Len(t, back.Tools, 1)
	assert.Equal(t, "ui_confirm", back.Tools[0].Name)
	require.Len(t, to.conv, 2)
	assert.Equal(t, llm.RoleUser, to.conv[0].Role)
	assert.Equal(t, "hello", to.conv[0].Content)
	call := pendingCalls(to.conv)[0]
	assert.Equal(t, llm.ToolCall{ID: "call_1", Name: "research", Arguments: `{"prompt":"go"}`}, call)
	assert.Equal(t, 1, to.fs.Iterations, "the failure state after the turn")
	assert.Equal(t, "call_1", to.work.A2A[0].ToolCallID)
	assert.Equal(t, "task-cp", to.work.A2A[0].TaskID)
}

// TestCheckpointRefusals: what decodeTakeover refuses, so that the run is ended instead.
func TestCheckpointRefusals(t *testing.T) {
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{}`)}, &fakeAgent{})
	in := mustJSON(input("x"))
	good := func() durable.Work {
		return durable.Work{Checkpoint: mustJSON(durable.Checkpoint{V: durable.CheckpointVersion, Input: in, Conv: mustJSON([]llm.Message{{Role: llm.RoleUser, Content: "hi"}})})}
	}
	_, why := (&adoption{e: e}).decodeTakeover(context.Background(), good())
	require.Empty(t, why)
	for name, w := range map[string]durable.Work{
		"none":     {},
		"garbage":  {Checkpoint: json.RawMessage(`{"v":1,"input":`)},
		"version":  {Checkpoint: mustJSON(durable.Checkpoint{V: 99, Input: in})},
		"no input": {Checkpoint: mustJSON(durable.Checkpoint{V: durable.CheckpointVersion})},
		"bad conv": {Checkpoint: mustJSON(durable.Checkpoint{V: durable.CheckpointVersion, Input: in, Conv: json.RawMessage(`{"x":1}`)})},
		"agent gone": func() durable.Work {
			w := good()
			w.A2A = []durable.Task{{Agent: "gone", TaskID: "t", State: "working"}}
			return w
		}(),
		"time passed": func() durable.Work {
			w := good()
			cp := durable.Checkpoint{V: durable.CheckpointVersion, Input: in, Conv: mustJSON([]llm.Message{}), State: mustJSON(failure.State{Active: time.Hour})}
			w.Checkpoint = mustJSON(cp)
			return w
		}(),
	} {
		_, why := (&adoption{e: e}).decodeTakeover(context.Background(), w)
		assert.NotEmpty(t, why, name)
	}
}

// TestResumeDecision: what a run taken over does with each kind of call of its last turn.
func TestResumeDecision(t *testing.T) {
	tools := &toolset{
		agents:   map[string]*Agent{"research": {Name: "research"}},
		mcp:      map[string]mcpclient.Tool{"fs__read": {Name: "fs__read", Idempotent: true}, "fs__write": {Name: "fs__write"}},
		frontend: map[string]agui.Tool{"ui_confirm": {Name: "ui_confirm"}},
	}
	work := &durable.Work{
		A2A:     []durable.Task{{Agent: "research", TaskID: "task-1", ToolCallID: "c-followed", State: "TASK_STATE_WORKING"}},
		Results: map[string]failure.ToolResult{"c-done": {Text: "[OK]\nfine", Tag: "OK"}},
	}
	for _, tc := range []struct {
		name, id, tool string
		approval       bool
		want           resumeAction
	}{
		{"result recorded", "c-done", "fs__write", false, resumeResult},
		{"a2a task known: followed, not sent again", "c-followed", "research", false, resumeFollow},
		{"a2a task never named", "c-unnamed", "research", false, resumeInDoubt},
		{"idempotent or read-only MCP: re-issued", "c-read", "fs__read", false, resumeReissue},
		{"other MCP: may have run", "c-write", "fs__write", false, resumeInDoubt},
		{"needs approval: only asked", "c-approve", "fs__write", true, resumeReissue},
		{"frontend", "c-ui", "ui_confirm", false, resumeReissue},
		{"ask_user", "c-ask", askUserTool, false, resumeReissue},
		{"unknown tool", "c-unknown", "nope", false, resumeReissue},
	} {
		got, task := resumeDecision(tools, llm.ToolCall{ID: tc.id, Name: tc.tool}, work, tc.approval)
		assert.Equal(t, tc.want.String(), got.String(), tc.name)
		if tc.want == resumeFollow {
			require.NotNil(t, task, tc.name)
			assert.Equal(t, "task-1", task.TaskID)
		}
	}
	assert.True(t, strings.HasPrefix(inDoubtText("fs__write"), "[ERROR]\n"))
	assert.Contains(t, inDoubtText("fs__write"), "may or may not have run")
}

// deadRun records in st a run of a replica that died mid-turn: its checkpoint (conv ends
// with the assistant's calls), its work and the events it had logged.
func deadRun(t *testing.T, st store.Store, thread string, conv []llm.Message, work durable.Work, evs ...agui.Event) {
	t.Helper()
	ctx := context.Background()
	in := input(thread)
	in.Messages = nil
	work.Checkpoint = mustJSON(durable.Checkpoint{V: durable.CheckpointVersion, Owner: "alice", Input: mustJSON(in), Conv: mustJSON(conv), State: mustJSON(failure.State{Iterations: 1})})
	_, err := st.ClaimThread(ctx, thread, "alice", "")
	require.NoError(t, err)
	require.NoError(t, begun(st.BeginRun(ctx, thread, in.RunID, "replica-dead", -time.Second)))
	require.NoError(t, st.SaveRunWork(ctx, thread, in.RunID, 1, mustJSON(&work)))
	all := append([]agui.Event{&agui.RunStarted{ThreadID: thread, RunID: in.RunID}}, evs...)
	stored := make([]store.Event, len(all))
	for i, ev := range all {
		data, err := agui.MarshalEvent(ev)
		require.NoError(t, err)
		stored[i] = store.Event{Seq: int64(i + 1), Data: data}
	}
	require.NoError(t, st.AppendEvents(ctx, thread, in.RunID, 1, stored))
}

// waitEnded waits until the run's record says it ended, and returns its event log.
func waitEnded(t *testing.T, st store.Store, thread, runID string) (*store.RunRecord, []store.Event) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		run, err := st.GetRun(ctx, thread, runID)
		require.NoError(t, err)
		if run.State != store.RunRunning {
			evs, err := st.Events(ctx, thread, runID, 0, store.MaxEventsRead)
			require.NoError(t, err)
			return run, evs
		}
		require.True(t, time.Now().Before(deadline), "the run taken over never ended")
		time.Sleep(10 * time.Millisecond)
	}
}

// checkStream replays a stored log through a sequencer: every start and end is in order,
// the numbering is dense (also where the run was taken over), and it ends with its
// terminal event.
func checkStream(t *testing.T, evs []store.Event) []string {
	t.Helper()
	seq := agui.NewSequencer(func(agui.Event) error { return nil }, agui.SequencerOptions{})
	var typs []string
	for i, ev := range evs {
		if i > 0 {
			assert.Equal(t, evs[i-1].Seq+1, ev.Seq, "the numbering is dense")
		}
		var head struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &head))
		typs = append(typs, head.Type)
		if head.Type == string(agui.EventRunFinished) {
			require.True(t, seq.Open().Empty(), "everything closed before RUN_FINISHED: %+v", seq.Open())
			continue
		}
		if ae := storedEvent(ev.Data); ae != nil {
			require.NoError(t, seq.Restore(ae), "event %d (%s) out of order", ev.Seq, head.Type)
		}
	}
	return typs
}

func deadDelegationConv() []llm.Message {
	return []llm.Message{{Role: llm.RoleUser, Content: "hello"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "research", Arguments: `{"prompt":"go"}`}}}}
}

func deadDelegationEvents() []agui.Event {
	return []agui.Event{
		&agui.ToolCallStart{ToolCallID: "call_1", ToolCallName: "research"},
		&agui.ToolCallArgs{ToolCallID: "call_1", Delta: `{"prompt":"go"}`},
		&agui.ToolCallEnd{ToolCallID: "call_1"},
		&agui.SubagentStarted{SubagentRunID: "sa-old", Name: "research", ParentToolCallID: "call_1"},
		&agui.TextMessageStart{MessageID: "sa-msg-old", Role: "assistant", SubagentRunID: "sa-old"},
		&agui.TextMessageContent{MessageID: "sa-msg-old", Delta: "step 1 ", SubagentRunID: "sa-old"},
	}
}

// TestTakeOverFollowsTask: a replica takes over a run whose replica died while a sub-agent
// worked: the task is followed by id (never sent again), the sub-agent's attribution goes
// on, the model gets the task's result, and the run's log continues to RUN_FINISHED.
func TestTakeOverFollowsTask(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	deadRun(t, st, "tk", deadDelegationConv(), durable.Work{A2A: []durable.Task{{Agent: "research", TaskID: "task-9", ContextID: "ctx-1",
		State: string(subagent.StateWorking), ToolCallID: "call_1", SubagentRunID: "sa-old"}}}, deadDelegationEvents()...)

	agent := &followingAgent{fakeAgent: &fakeAgent{}, follow: func(_ context.Context, taskID string, obs subagent.Observer) (*subagent.Result, error) {
		obs.Text("step 2")
		return &subagent.Result{State: subagent.StateCompleted, TaskID: taskID, ContextID: "ctx-1", Text: "the findings"}, nil
	}}
	var mu sync.Mutex
	var lastReq []llm.Message
	model := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		mu.Lock()
		lastReq = req.Messages
		mu.Unlock()
		return callThenReport("research", "{}")(req)
	}}
	cfg := Config{Model: model, Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}},
		Store: st, Heartbeat: 20 * time.Millisecond, Lease: time.Second}
	e := newStartedEngine(t, cfg)

	run, evs := waitEnded(t, st, "tk", "r-tk")
	assert.Equal(t, string(OutcomeCompleted), run.State)
	assert.Equal(t, e.cfg.Replica, run.Replica, "owned by the replica that took it over")
	assert.Equal(t, []string{"task-9"}, agent.followed(), "the task was followed by id")
	assert.Empty(t, agent.sends(), "nothing was sent to the agent again")
	typs := checkStream(t, evs)
	assert.Equal(t, "RUN_FINISHED", typs[len(typs)-1])
	tail := typs[7:]
	assert.Equal(t, "TEXT_MESSAGE_END", tail[0], "the cut sub-agent text is closed first")
	assert.NotContains(t, tail, "SUBAGENT_STARTED", "the sub-agent's attribution goes on")
	assert.Contains(t, tail, "SUBAGENT_FINISHED")
	assert.Contains(t, tail, "TOOL_CALL_RESULT")
	// The thread's messages hold the dead replica's part of the run too.
	msgs, err := st.LoadMessages(context.Background(), "tk")
	require.NoError(t, err)
	var joined strings.Builder
	for _, m := range msgs {
		joined.Write(m.Data)
	}
	assert.Contains(t, joined.String(), `"toolCalls":[{"id":"call_1"`, "the call made before the takeover")
	assert.Contains(t, joined.String(), `"toolCallId":"call_1"`, "its result, settled after it")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, lastReq)
	last := lastReq[len(lastReq)-1]
	assert.Equal(t, llm.RoleTool, last.Role)
	assert.Equal(t, "call_1", last.ToolCallID)
	assert.Contains(t, last.Content, "the findings")
}

// TestTakeOverCannotContinue: a run whose checkpoint names a sub-agent this replica does
// not have is ended with RUN_ERROR{RUN_LOST}, and its tasks are cancelled.
func TestTakeOverCannotContinue(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	deadRun(t, st, "gone", deadDelegationConv(), durable.Work{A2A: []durable.Task{
		{Agent: "research", TaskID: "task-a", State: string(subagent.StateWorking), ToolCallID: "call_1"},
		{Agent: "elsewhere", TaskID: "task-b", State: string(subagent.StateWorking), ToolCallID: "call_2"},
	}}, deadDelegationEvents()...)
	agent := &fakeAgent{}
	cfg := Config{Model: &fakeModel{turn: callThenReport("research", "{}")}, Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}},
		Store: st, Heartbeat: 20 * time.Millisecond, Lease: time.Second}
	newStartedEngine(t, cfg)

	run, evs := waitEnded(t, st, "gone", "r-gone")
	assert.Equal(t, string(OutcomeError), run.State)
	assert.Equal(t, []string{"task-a"}, agent.cancelled(), "every task this replica can reach is cancelled")
	var last map[string]any
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &last))
	assert.Equal(t, "RUN_ERROR", last["type"])
	assert.Equal(t, "RUN_LOST", last["code"])
	assert.Contains(t, last["message"], "could not be continued")
}

// TestTakeOverMCPCalls: of the MCP calls in flight when the replica died, the idempotent one
// is sent again and the other is reported to the model as may-have-run; a call whose result
// was recorded is not sent again.
func TestTakeOverMCPCalls(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	conv := []llm.Message{{Role: llm.RoleUser, Content: "hello"}, {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
		{ID: "c-read", Name: "fs__read", Arguments: `{}`},
		{ID: "c-write", Name: "fs__write", Arguments: `{}`},
		{ID: "c-done", Name: "fs__write", Arguments: `{"n":2}`},
	}}}
	deadRun(t, st, "mcp", conv, durable.Work{
		MCP:     []durable.Call{{ToolCallID: "c-read", Tool: "fs__read", Idempotent: true, State: "started"}, {ToolCallID: "c-write", Tool: "fs__write", State: "started"}},
		Results: map[string]failure.ToolResult{"c-done": {Text: "[OK]\nwritten 2", Tag: "OK"}},
	})
	rig := &takeoverRig{content: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents"}}},
		tools: []mcpclient.Tool{{Name: "fs__read", Server: "fs", ToolName: "read", Idempotent: true, InputSchema: map[string]any{"type": "object"}}, writeTool}}
	rig.takeOver(t, st, "mcp", "r-mcp")
	assert.Equal(t, []string{"fs__read"}, rig.sent(), "only the idempotent call is sent again")
	results := rig.toolMessages()
	require.Len(t, results["c-read"], 1)
	require.Len(t, results["c-write"], 1)
	assert.Contains(t, results["c-read"][0], "contents")
	assert.True(t, strings.HasPrefix(results["c-write"][0], "[ERROR]"), results["c-write"])
	assert.Contains(t, results["c-write"][0], "may or may not have run")
	assert.Equal(t, []string{"[OK]\nwritten 2"}, results["c-done"])
}

// TestHandoffAtShutdown: a replica that shuts down with handoff hands its run over without
// cancelling the sub-agent's task; another replica sharing the store takes it over at once
// (long before the lease would lapse) and finishes it by following the task.
func TestHandoffAtShutdown(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	started := make(chan struct{})
	agentA := &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-h", "ctx-1")
		obs.Text("working")
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	a := newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, Store: st, Handoff: true,
		Agents: []Agent{{Name: "research", Client: agentA, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Hour})
	r, err := a.StartRun(context.Background(), input("h"), "alice")
	require.NoError(t, err)
	<-started
	// The task id and the checkpoint reach the store.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := st.GetRun(context.Background(), "h", "r-h")
		require.NoError(t, err)
		var w durable.Work
		require.NoError(t, json.Unmarshal(rec.Work, &w))
		if len(w.A2A) == 1 && len(pendingCallsOf(t, w)) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "work never stored")
		time.Sleep(10 * time.Millisecond)
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, a.Stop(expired))
	assert.Empty(t, agentA.cancelled(), "a run handed off cancels nothing downstream")
	<-r.Done()

	agentB := &followingAgent{fakeAgent: &fakeAgent{}, follow: func(_ context.Context, taskID string, _ subagent.Observer) (*subagent.Result, error) {
		return &subagent.Result{State: subagent.StateCompleted, TaskID: taskID, ContextID: "ctx-1", Text: "handed-off findings"}, nil
	}}
	newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, Store: st,
		Agents: []Agent{{Name: "research", Client: agentB, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Hour})
	rec, evs := waitEnded(t, st, "h", "r-h")
	assert.Equal(t, string(OutcomeCompleted), rec.State, "taken over although the lease (1 h) had not lapsed")
	assert.Equal(t, []string{"task-h"}, agentB.followed())
	assert.Empty(t, agentB.sends())
	typs := checkStream(t, evs)
	assert.Equal(t, 1, strings.Count(strings.Join(typs, ","), "RUN_STARTED"))
	assert.Equal(t, "RUN_FINISHED", typs[len(typs)-1])
}

func pendingCallsOf(t *testing.T, w durable.Work) []llm.ToolCall {
	t.Helper()
	if len(w.Checkpoint) == 0 {
		return nil
	}
	var cp durable.Checkpoint
	require.NoError(t, json.Unmarshal(w.Checkpoint, &cp))
	var conv []llm.Message
	if len(cp.Conv) > 0 {
		require.NoError(t, json.Unmarshal(cp.Conv, &conv))
	}
	return pendingCalls(conv)
}

// TestStalledReplicaDropsRunTakenOver: a replica whose run was taken over by another (it
// was stalled past the lease) notices at its next heartbeat and stops its copy without
// cancelling the task the new owner follows, and without writing the run's end.
func TestStalledReplicaDropsRunTakenOver(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	started := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-s", "ctx-1")
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, Store: st,
		Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Hour})
	r, err := e.StartRun(context.Background(), input("s"), "alice")
	require.NoError(t, err)
	<-started
	stolen, err := st.TakeOverRuns(ctx, "replica-other", time.Hour, 10, true)
	require.NoError(t, err)
	require.Len(t, stolen, 1)
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled replica kept running a run that another replica owns")
	}
	assert.Empty(t, agent.cancelled(), "the new owner's task is not cancelled")
	rec, err := st.GetRun(ctx, "s", "r-s")
	require.NoError(t, err)
	assert.Equal(t, store.RunRunning, rec.State, "the old owner does not end the run")
	assert.Equal(t, "replica-other", rec.Replica)
}

// flakyEventsStore fails the first reads of event logs, as a store that is briefly down.
type flakyEventsStore struct {
	store.Store
	fails atomic.Int32
}

func (s *flakyEventsStore) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]store.Event, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("store briefly down")
	}
	return s.Store.Events(ctx, threadID, runID, after, limit)
}

// TestTakeOverRetriedAfterStoreFailure: a run taken over whose log could not be read is
// this replica's (its heartbeat renews the lease, so nobody else takes it): it is tried
// again at the next heartbeat and finishes.
func TestTakeOverRetriedAfterStoreFailure(t *testing.T) {
	mem, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	deadRun(t, mem, "flaky", deadDelegationConv(), durable.Work{A2A: []durable.Task{{Agent: "research", TaskID: "task-f", ContextID: "ctx-1",
		State: string(subagent.StateWorking), ToolCallID: "call_1", SubagentRunID: "sa-old"}}}, deadDelegationEvents()...)
	st := &flakyEventsStore{Store: mem}
	st.fails.Store(2)
	agent := &followingAgent{fakeAgent: &fakeAgent{}, follow: func(_ context.Context, taskID string, _ subagent.Observer) (*subagent.Result, error) {
		return &subagent.Result{State: subagent.StateCompleted, TaskID: taskID, Text: "found"}, nil
	}}
	newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", "{}")}, Store: st,
		Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Second})
	run, evs := waitEnded(t, mem, "flaky", "r-flaky")
	assert.Equal(t, string(OutcomeCompleted), run.State)
	assert.Equal(t, []string{"task-f"}, agent.followed())
	checkStream(t, evs)
}

// TestTakenOverResumeNeverResendsAnswer: a replica hands off a resume whose answer already
// went to the agent (the agent has not moved the task on yet: it still reads
// input-required). The replica that takes the run over follows the task by id and never
// sends the answer again; the sub-agent's attribution restarts under a new id (the stored
// one was used and closed), and the run completes with the task's outcome.
func TestTakenOverResumeNeverResendsAnswer(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	answered := make(chan struct{})
	agentA := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		if req.TaskID == "" {
			obs.Task("task-q", "ctx-q")
			return &subagent.Result{State: subagent.StateInputRequired, TaskID: "task-q", ContextID: "ctx-q", Text: "Which dates?"}, nil
		}
		obs.Task(req.TaskID, req.ContextID)
		close(answered)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	model := &fakeModel{turn: callThenReport("research", `{"prompt":"trip"}`)}
	a := newStartedEngine(t, Config{Model: model, Store: st, Handoff: true,
		Agents: []Agent{{Name: "research", Client: agentA, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Hour})
	in := interruptsOf(t, startAndCollect(t, a, input("q")))[0]
	r, err := a.StartRun(context.Background(), resumeInput("q", "r-q2", resolved(in.ID, `{"text":"June"}`)), "")
	require.NoError(t, err)
	<-answered // the task was recorded in the run's work before the answer was sent
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, a.Stop(expired))
	<-r.Done()
	assert.Empty(t, agentA.cancelled(), "a run handed off cancels nothing downstream")

	agentB := &followingAgent{
		fakeAgent: &fakeAgent{tasks: map[string]*subagent.Result{"task-q": {State: subagent.StateInputRequired, TaskID: "task-q", ContextID: "ctx-q"}}},
		follow: func(_ context.Context, taskID string, obs subagent.Observer) (*subagent.Result, error) {
			obs.Text("booking")
			return &subagent.Result{State: subagent.StateCompleted, TaskID: taskID, ContextID: "ctx-q", Text: "booked for June"}, nil
		}}
	newStartedEngine(t, Config{Model: model, Store: st,
		Agents: []Agent{{Name: "research", Client: agentB, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Hour})
	rec, evs := waitEnded(t, st, "q", "r-q2")
	assert.Equal(t, string(OutcomeCompleted), rec.State)
	assert.Empty(t, agentB.sends(), "the answer is never sent again")
	assert.Equal(t, []string{"task-q"}, agentB.followed(), "the task is followed by id")
	typs := checkStream(t, evs)
	assert.Equal(t, "RUN_FINISHED", typs[len(typs)-1])
	var subIDs []string
	var result string
	for _, ev := range evs {
		switch e := storedEvent(ev.Data).(type) {
		case *agui.SubagentStarted:
			subIDs = append(subIDs, e.SubagentRunID)
		case *agui.ToolCallResult:
			result = e.Content
		}
	}
	require.Len(t, subIDs, 2, "the sub-agent before the hand-off and after it: %v", typs)
	assert.Equal(t, in.SubagentRunID, subIDs[0])
	assert.NotEqual(t, subIDs[0], subIDs[1], "a closed sub-agent id is not started again")
	assert.Contains(t, typs, "SUBAGENT_FINISHED")
	assert.True(t, strings.HasPrefix(result, "[COMPLETED]\nbooked for June"), "the task's outcome: %q", result)
}

// The end states durable.TerminalState gives a run whose log had ended are the outcomes the
// engine records for a run that ends here.
func TestTerminalStatesAreOutcomes(t *testing.T) {
	t.Parallel()
	assert.Equal(t, string(OutcomeCompleted), durable.EndCompleted)
	assert.Equal(t, string(OutcomeInterrupt), durable.EndInterrupt)
	assert.Equal(t, string(OutcomeCancelled), durable.EndCancelled)
	assert.Equal(t, string(OutcomeError), durable.EndError)
}
