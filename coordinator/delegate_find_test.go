package coordinator

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// slowStartAgent is an A2A agent that makes its task as soon as a message arrives but never
// answers the send in time (its first event is late): the sender does not learn the task's
// id. It lists tasks by context (FindTask), can be followed by id, and counts what it gets.
type slowStartAgent struct {
	received chan struct{} // closed when the first message arrived

	mu       sync.Mutex
	sends    []subagent.Request
	task     *subagent.Result  // the task the first message made
	messages map[string]string // task id -> id of the message that started it
	finds    int
	follows  []string
	cancels  []string
	// findGate, when set, holds FindTask until it is closed.
	findGate chan struct{}
	// follow is the followed task's end; nil: until ctx ends.
	follow func(taskID string) *subagent.Result
}

func newSlowStartAgent() *slowStartAgent {
	return &slowStartAgent{received: make(chan struct{}), messages: map[string]string{}}
}

func (f *slowStartAgent) Send(ctx context.Context, req subagent.Request, _ subagent.Observer) (*subagent.Result, error) {
	f.mu.Lock()
	f.sends = append(f.sends, req)
	first := f.task == nil
	if first {
		f.task = &subagent.Result{TaskID: "task-o", ContextID: req.ContextID, State: subagent.StateWorking}
		f.messages["task-o"] = req.MessageID
	}
	f.mu.Unlock()
	if first {
		close(f.received)
	}
	<-ctx.Done() // the first event never comes in time
	return nil, ctx.Err()
}

func (f *slowStartAgent) FindTask(ctx context.Context, contextID, messageID string) (*subagent.Result, error) {
	f.mu.Lock()
	f.finds++
	gate := f.findGate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.task == nil || f.task.ContextID != contextID || f.messages[f.task.TaskID] != messageID {
		return nil, subagent.ErrTaskNotFound
	}
	got := *f.task
	return &got, nil
}

func (f *slowStartAgent) Follow(ctx context.Context, taskID, contextID string, obs subagent.Observer) (*subagent.Result, error) {
	f.mu.Lock()
	f.follows = append(f.follows, taskID)
	end := f.follow
	f.mu.Unlock()
	obs.Task(taskID, contextID)
	if end != nil {
		return end(taskID), nil
	}
	<-ctx.Done()
	return nil, &subagent.TaskError{TaskID: taskID, ContextID: contextID, Err: ctx.Err()}
}

func (f *slowStartAgent) Cancel(_ context.Context, taskID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, taskID)
	if f.task != nil && f.task.TaskID == taskID {
		f.task.State = subagent.StateCanceled
	}
	return nil
}

func (f *slowStartAgent) GetTask(_ context.Context, taskID string) (*subagent.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.task == nil || f.task.TaskID != taskID {
		return nil, subagent.ErrInvalidTransition
	}
	got := *f.task
	return &got, nil
}

// counts returns what the agent got: sends, finds, follows and cancels.
func (f *slowStartAgent) counts() (sends []subagent.Request, finds int, follows, cancels []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]subagent.Request(nil), f.sends...), f.finds, append([]string(nil), f.follows...), append([]string(nil), f.cancels...)
}

// orphanedSend runs thread's run on a first engine until its sub-agent call reached the
// agent, whose first event never comes; then the run's owner "dies": another replica
// ("replica-dead") claims the run with a short lease, which fences the first engine out
// (it stops the run and sends nothing more), as a kill would; the first engine is then
// shut down, and the next engine started takes the run over once that lease lapsed.
func orphanedSend(t *testing.T, st store.Store, agent *slowStartAgent, thread string) {
	t.Helper()
	ctx := context.Background()
	first := newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, Store: st, Replica: "replica-first",
		Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Hour})
	r, err := first.StartRun(context.Background(), input(thread), "alice")
	require.NoError(t, err)
	select {
	case <-agent.received:
	case <-time.After(10 * time.Second):
		t.Fatal("the message never reached the agent")
	}
	// The checkpoint with the turn's call is written behind the run; the owner "dies" once
	// it is stored (before it, a takeover starts the run over from its input).
	require.Eventually(t, func() bool {
		rec, err := st.GetRun(ctx, thread, "r-"+thread)
		return err == nil && strings.Contains(string(rec.Work), "call_1")
	}, 10*time.Second, 5*time.Millisecond)
	stolen, err := st.TakeOverRuns(ctx, "replica-dead", 2*time.Second, 10, true)
	require.NoError(t, err)
	require.Len(t, stolen, 1)
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced replica kept the run")
	}
	// Gone before the dead replica's lease lapses: the run is the next replica's.
	require.NoError(t, first.Stop(ctx))
}

// TestTakeOverFindsUnnamedTask: the replica that sent a sub-agent its message died before the
// agent named its task. The replica that takes the run over finds the task by the context
// and message ids the send's journal intent recorded, follows it by id (nothing is sent
// again), and the model gets the task's real result instead of an in-doubt report.
func TestTakeOverFindsUnnamedTask(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	agent := newSlowStartAgent()
	agent.follow = func(taskID string) *subagent.Result {
		return &subagent.Result{State: subagent.StateCompleted, TaskID: taskID, Text: "the findings"}
	}
	orphanedSend(t, st, agent, "orph")

	var mu sync.Mutex
	var lastTool string
	newStartedEngine(t, Config{Model: &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
			mu.Lock()
			lastTool = last.Content
			mu.Unlock()
		}
		return callThenReport("research", `{"prompt":"go"}`)(req)
	}}, Store: st, Replica: "replica-second",
		Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Second})

	run, evs := waitEnded(t, st, "orph", "r-orph")
	assert.Equal(t, string(OutcomeCompleted), run.State)
	assert.Equal(t, "replica-second", run.Replica)
	sends, finds, follows, cancels := agent.counts()
	require.Len(t, sends, 1, "the message was sent once")
	assert.NotEmpty(t, sends[0].MessageID, "the sender chose the message id")
	assert.NotEmpty(t, sends[0].ContextID, "the sender chose a context of its own for the new task")
	assert.GreaterOrEqual(t, finds, 1)
	assert.Equal(t, []string{"task-o"}, follows, "the task found was followed by id")
	assert.Empty(t, cancels)
	mu.Lock()
	assert.Contains(t, lastTool, "the findings", "the model got the task's result")
	assert.NotContains(t, lastTool, "may or may not have run")
	mu.Unlock()
	typs := checkStream(t, evs)
	assert.Equal(t, "RUN_FINISHED", typs[len(typs)-1])
	assert.Equal(t, 1, countType(typs, "TOOL_CALL_RESULT"), "one result for the call: %v", typs)

	steps, err := st.Steps(ctx, "orph", 0, 0)
	require.NoError(t, err)
	var send *store.Step
	for i := range steps {
		if steps[i].Kind == store.StepA2ASend {
			require.Nil(t, send, "one send step")
			send = &steps[i]
		}
	}
	require.NotNil(t, send)
	assert.Equal(t, "replica-first", send.Replica)
	assert.Contains(t, send.Detail, "contextId="+sends[0].ContextID, "the intent says what the message was sent as")
	assert.Contains(t, send.Detail, "messageId="+sends[0].MessageID)
	rec, err := st.GetRun(ctx, "orph", "r-orph")
	require.NoError(t, err)
	assert.Contains(t, string(rec.Work), `"taskId":"task-o"`, "the task found is recorded with the run")
}

// TestTakeOverStopWhileFindingTask: the run taken over is stopped while its new owner is
// still looking for the task of a send whose id was never learned: the task, once found,
// is cancelled (not left running without an owner), and the run ends cancelled.
func TestTakeOverStopWhileFindingTask(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	agent := newSlowStartAgent()
	gate := make(chan struct{})
	agent.findGate = gate
	orphanedSend(t, st, agent, "orphstop")

	second := newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, Store: st, Replica: "replica-second",
		Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Second})
	require.Eventually(t, func() bool {
		_, finds, _, _ := agent.counts()
		return finds > 0
	}, 10*time.Second, 5*time.Millisecond, "the new owner looks for the task")
	require.NoError(t, second.StopRun("orphstop", "r-orphstop", "alice"))
	close(gate)

	run, evs := waitEnded(t, st, "orphstop", "r-orphstop")
	assert.Equal(t, string(OutcomeCancelled), run.State)
	require.Eventually(t, func() bool {
		_, _, _, cancels := agent.counts()
		return len(cancels) > 0
	}, 10*time.Second, 5*time.Millisecond, "the task found is cancelled")
	sends, _, _, cancels := agent.counts()
	assert.Len(t, sends, 1)
	assert.Equal(t, "task-o", cancels[0])
	var last map[string]any
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &last))
	assert.Contains(t, []any{"RUN_FINISHED", "RUN_ERROR"}, last["type"])
	checkStream(t, evs)
}

func countType(typs []string, typ string) int {
	n := 0
	for _, t := range typs {
		if t == typ {
			n++
		}
	}
	return n
}

// TestTakeOverCannotContinueCancelsUnnamed: a run taken over that cannot continue has its
// tasks cancelled, also the one its previous owner never learned the id of: it is found by
// the ids the send's journal intent recorded.
func TestTakeOverCannotContinueCancelsUnnamed(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	// A task of an agent this replica does not have: the run cannot continue here.
	deadRun(t, st, "unnamed", deadDelegationConv(), durable.Work{A2A: []durable.Task{
		{Agent: "elsewhere", TaskID: "task-b", State: string(subagent.StateWorking), ToolCallID: "call_2"},
	}}, deadDelegationEvents()...)
	require.NoError(t, st.RecordStep(ctx, &store.Step{ThreadID: "unnamed", RunID: "r-unnamed", Kind: store.StepA2ASend, Target: "research",
		Ref: "call_1", Attempt: 1, Replica: "replica-dead", Detail: "messageId=m-1 contextId=c-1"}))
	agent := newSlowStartAgent()
	agent.task = &subagent.Result{TaskID: "task-o", ContextID: "c-1", State: subagent.StateWorking}
	agent.messages["task-o"] = "m-1"
	newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", "{}")}, Store: st,
		Agents: []Agent{{Name: "research", Client: agent, Timeout: time.Minute}}, Heartbeat: 20 * time.Millisecond, Lease: time.Second})

	run, _ := waitEnded(t, st, "unnamed", "r-unnamed")
	assert.Equal(t, string(OutcomeError), run.State)
	require.Eventually(t, func() bool {
		_, _, _, cancels := agent.counts()
		return len(cancels) > 0
	}, 10*time.Second, 5*time.Millisecond, "the unnamed task is cancelled")
	sends, _, follows, cancels := agent.counts()
	assert.Equal(t, []string{"task-o"}, cancels)
	assert.Empty(t, sends)
	assert.Empty(t, follows)
}
