package coordinator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/subagent"
)

// contextEcho completes every new task in the context it was sent on ("ask" prompts wait
// for input instead), naming tasks in order.
func contextEcho() func(context.Context, subagent.Request, subagent.Observer) (*subagent.Result, error) {
	n := 0
	return func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		n++
		id := req.TaskID
		if id == "" {
			id = "task-" + string(rune('0'+n))
		}
		state := subagent.StateCompleted
		if req.TaskID == "" && strings.HasPrefix(req.Prompt, "ask") {
			state = subagent.StateInputRequired
		}
		obs.Task(id, req.ContextID)
		return &subagent.Result{State: state, TaskID: id, ContextID: req.ContextID, Text: "done"}, nil
	}
}

// TestDepthRefusal: a run sends its depth with every call (1 for a user's run); a call that
// would start a run beyond MaxDepth is not sent and the model gets [REFUSED:max_depth];
// a run started beyond MaxDepth is refused with ErrTooDeep.
func TestDepthRefusal(t *testing.T) {
	agent := &fakeAgent{send: contextEcho()}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent, func(c *Config) { c.MaxDepth = 3 })

	res := toolResults(startAndCollect(t, e, input("user")))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]"), res[0])
	in := input("depth2")
	in.Depth = 2
	res = toolResults(startAndCollect(t, e, in))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]"), res[0])
	require.Len(t, agent.sent, 2)
	assert.Equal(t, 1, agent.sent[0].Depth, "a user's run is depth 1")
	assert.Equal(t, 2, agent.sent[1].Depth)

	in = input("depth3")
	in.Depth = 3
	res = toolResults(startAndCollect(t, e, in))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[REFUSED:max_depth]\n"), res[0])
	assert.Contains(t, res[0], "server.max_depth")
	assert.Len(t, agent.sent, 2, "nothing sent")

	in = input("depth4")
	in.Depth = 4
	_, err := e.StartRun(context.Background(), in, "")
	require.ErrorIs(t, err, ErrTooDeep)
}

// TestThreadContextReused: the calls of one thread to an agent share one A2A context
// (one conversation at the agent), across runs; another thread has its own; a call while
// the thread's task of that agent waits for input gets a context of its own.
func TestThreadContextReused(t *testing.T) {
	agent := &fakeAgent{send: contextEcho()}
	prompt := "go"
	m := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		return callThenReport("research", `{"prompt":"`+prompt+`"}`)(req)
	}}
	e := newEngine(t, m, agent, func(c *Config) { c.Agents[0].InputRequired = "model" })
	run := func(thread, runID string) {
		in := input(thread)
		in.RunID = runID
		startAndCollect(t, e, in)
	}
	run("a", "a1")
	run("a", "a2")
	run("a", "a3")
	run("b", "b1")
	require.Len(t, agent.sent, 4)
	shared := agent.sent[0].ContextID
	require.NotEmpty(t, shared)
	assert.Equal(t, shared, agent.sent[1].ContextID, "one context per (thread, agent)")
	assert.Equal(t, shared, agent.sent[2].ContextID)
	assert.NotEqual(t, shared, agent.sent[3].ContextID, "another thread, another context")

	prompt = "ask"
	run("a", "a4") // its task waits for input in the shared context
	prompt = "go"
	run("a", "a5")
	require.Len(t, agent.sent, 6)
	assert.Equal(t, shared, agent.sent[4].ContextID)
	assert.NotEqual(t, shared, agent.sent[5].ContextID, "the shared context's task waits for input: a context of its own")
}

// TestDepthKeptOnResume: a run's depth is saved with its suspension, so a resume (which
// its door starts without a depth) goes on at it.
func TestDepthKeptOnResume(t *testing.T) {
	agent := &fakeAgent{send: askingAgent("task-d")}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"plan"}`)}, agent)
	in := input("deep")
	in.Depth = 3
	ins := interruptsOf(t, startAndCollect(t, e, in))
	require.Len(t, ins, 1)
	startAndCollect(t, e, resumeInput("deep", "r2", resolved(ins[0].ID, `{"text":"May"}`)))
	require.Len(t, agent.sent, 2)
	assert.Equal(t, 3, agent.sent[1].Depth, "the answer goes on at the run's depth")
}

// TestDepthInCheckpoint: the checkpoint a replica takes a run over from holds its depth.
func TestDepthInCheckpoint(t *testing.T) {
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"x"}`)}, &fakeAgent{send: contextEcho()})
	in := input("cp")
	in.Depth = 2
	r := newRun(e, in)
	var cp durable.Checkpoint
	require.NoError(t, json.Unmarshal(r.dur.checkpointDoc(nil), &cp))
	assert.Equal(t, 2, cp.Depth)
	var back agui.RunAgentInput
	require.NoError(t, json.Unmarshal(cp.Input, &back))
	assert.Zero(t, back.Depth, "not in the input's JSON: only the checkpoint carries it")
}

// TestDepthKeptOnTakeover: a run taken over from its checkpoint goes on at its depth: at
// the limit, its call is refused instead of sent.
func TestDepthKeptOnTakeover(t *testing.T) {
	agent := &fakeAgent{send: contextEcho()}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent, func(c *Config) { c.MaxDepth = 3 })
	st := e.cfg.Store
	ctx := context.Background()
	deadRun(t, st, "deep-to", []llm.Message{{Role: llm.RoleUser, Content: "hello"}}, durable.Work{})
	in := input("deep-to")
	in.Messages = nil
	work := durable.Work{Checkpoint: mustJSON(durable.Checkpoint{V: durable.CheckpointVersion, Owner: "alice", Input: mustJSON(in),
		Conv: mustJSON([]llm.Message{{Role: llm.RoleUser, Content: "hello"}}), State: mustJSON(failure.State{Iterations: 1}), Depth: 3})}
	require.NoError(t, st.SaveRunWork(ctx, "deep-to", in.RunID, 1, mustJSON(&work)))

	require.Equal(t, 1, e.jobs.Takeover().Look(ctx, false))
	run, evs := waitEnded(t, st, "deep-to", in.RunID)
	assert.Equal(t, string(OutcomeCompleted), run.State)
	refused := false
	for _, ev := range evs {
		refused = refused || strings.Contains(string(ev.Data), `[REFUSED:max_depth]`)
	}
	assert.True(t, refused, "the call of the run taken over at depth 3 is refused")
	assert.Empty(t, agent.sent, "nothing sent")
}
