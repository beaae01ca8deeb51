package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// TestMain fails the package if a test leaves a goroutine behind, and stops the throwaway
// PostgreSQL server if a benchmark started one.
func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m, pgtest.Stop)
}

// turnFunc scripts the model: it gets the request and returns the deltas of one turn.
type turnFunc func(req *llm.Request) []llm.Delta

type fakeModel struct {
	mu    sync.Mutex
	turn  turnFunc
	calls int
	block chan struct{} // when set, Stream blocks until ctx is done
}

func (m *fakeModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	return func(yield func(llm.Delta, error) bool) {
		if m.block != nil {
			select {
			case <-ctx.Done():
				yield(llm.Delta{}, ctx.Err())
				return
			case <-m.block:
			}
		}
		for _, d := range m.turn(req) {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// callThenReport calls tool with args on a user turn and reports the tool result as text.
func callThenReport(tool, args string) turnFunc {
	return func(req *llm.Request) []llm.Delta {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			return []llm.Delta{{Text: "RESULT: " + last.Content}, {Done: &llm.Completion{FinishReason: "stop"}}}
		}
		return []llm.Delta{
			{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "call_1", Name: tool}},
			{ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: args}},
			{Done: &llm.Completion{FinishReason: "tool_calls"}},
		}
	}
}

type fakeAgent struct {
	mu      sync.Mutex
	send    func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error)
	cancels []string
	sent    []subagent.Request
	tasks   map[string]*subagent.Result
}

func (f *fakeAgent) Send(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
	f.mu.Lock()
	f.sent = append(f.sent, req)
	f.mu.Unlock()
	return f.send(ctx, req, obs)
}

func (f *fakeAgent) Cancel(_ context.Context, taskID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, taskID)
	return nil
}

func (f *fakeAgent) GetTask(_ context.Context, taskID string) (*subagent.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.tasks[taskID]; ok {
		return r, nil
	}
	return nil, subagent.ErrInvalidTransition
}

func (f *fakeAgent) cancelled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cancels...)
}

func finalResult(state subagent.State, text string) func(context.Context, subagent.Request, subagent.Observer) (*subagent.Result, error) {
	return func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		id := req.TaskID
		if id == "" && state != subagent.StateMessage {
			id = "task-1"
		}
		if obs.Task != nil && id != "" {
			obs.Task(id, "ctx-1")
		}
		if obs.Text != nil {
			obs.Text(text)
		}
		return &subagent.Result{State: state, TaskID: id, ContextID: "ctx-1", Text: text}, nil
	}
}

func newEngine(t *testing.T, model llm.Model, agent *fakeAgent, mut ...func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Model: model, Agents: []Agent{{Name: "research", Description: "Researches.", Client: agent, Timeout: time.Minute}}, CancelTimeout: 2 * time.Second}
	for _, m := range mut {
		m(&cfg)
	}
	return newStartedEngine(t, cfg)
}

// newStartedEngine builds an engine of cfg and launches it; it is shut down when the test
// ends, after the cleanups registered later (a second Shutdown does no harm).
func newStartedEngine(tb testing.TB, cfg Config) *Engine {
	tb.Helper()
	e, err := New(cfg)
	require.NoError(tb, err)
	require.NoError(tb, e.Start(context.Background()))
	// Cancellations still being confirmed in the background end with the engine.
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return e
}

func input(thread string) *agui.RunAgentInput {
	content, _ := json.Marshal("hello")
	return &agui.RunAgentInput{ThreadID: thread, RunID: "r-" + thread, ProtocolVersion: "1.0",
		Messages: []agui.Message{{ID: "u1", Role: "user", Content: content}}}
}

// collect drains a run's events until its terminal event.
func collect(t *testing.T, r *Run) []agui.Event {
	t.Helper()
	var all []agui.Event
	timeout := time.After(20 * time.Second)
	for {
		evs, ended := r.Stream().Next()
		all = append(all, evs...)
		if ended {
			<-r.Done()
			return all
		}
		select {
		case <-r.Stream().Wake():
		case <-timeout:
			t.Fatalf("run did not end; events so far: %v", types(all))
		}
	}
}

// failureValues returns the values of the run's baton.failure events.
func failureValues(evs []agui.Event) []FailureValue {
	var out []FailureValue
	for _, e := range evs {
		if c, ok := e.(*agui.Custom); ok && c.Name == EventFailure {
			out = append(out, c.Value.(FailureValue))
		}
	}
	return out
}

func types(evs []agui.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.EventType()))
	}
	return out
}

func toolResults(evs []agui.Event) []string {
	var out []string
	for _, e := range evs {
		if tr, ok := e.(*agui.ToolCallResult); ok {
			out = append(out, tr.Content)
		}
	}
	return out
}

func TestRunTextOnly(t *testing.T) {
	m := &fakeModel{turn: func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "Hel"}, {Text: "lo"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	e := newEngine(t, m, &fakeAgent{})
	r, err := e.StartRun(context.Background(), input("t1"), "")
	require.NoError(t, err)
	evs := collect(t, r)
	assert.Equal(t, []string{"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"}, types(evs))
	assert.Equal(t, "1.0", evs[0].(*agui.RunStarted).ProtocolVersion)
	assert.Equal(t, "completed", r.EndReason())
}

func TestDelegationTags(t *testing.T) {
	tests := []struct {
		state   subagent.State
		tag     string
		closing agui.EventType
	}{
		{subagent.StateCompleted, "[COMPLETED]", agui.EventSubagentFinished},
		{subagent.StateMessage, "[COMPLETED]", agui.EventSubagentFinished},
		{subagent.StateFailed, "[FAILED]", agui.EventSubagentError},
		{subagent.StateRejected, "[REJECTED]", agui.EventSubagentError},
		{subagent.StateCanceled, "[CANCELED]", agui.EventSubagentError},
		{subagent.StateInputRequired, "[INPUT_REQUIRED:task_id=task-1]", agui.EventSubagentFinished},
		{subagent.StateAuthRequired, "[AUTH_REQUIRED:task_id=task-1]", agui.EventSubagentFinished},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			agent := &fakeAgent{send: finalResult(tt.state, "agent says hi")}
			e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"go"}`)}, agent, func(c *Config) { c.Agents[0].InputRequired = "model" })
			r, err := e.StartRun(context.Background(), input("t"), "")
			require.NoError(t, err)
			evs := collect(t, r)
			res := toolResults(evs)
			require.Len(t, res, 1)
			assert.True(t, strings.HasPrefix(res[0], tt.tag+"\n"), "got %q", res[0])
			assert.Contains(t, types(evs), string(tt.closing))
			assert.Contains(t, types(evs), "SUBAGENT_STARTED")
			// the attributed text carries the sub-agent's run id
			for _, ev := range evs {
				if c, ok := ev.(*agui.TextMessageContent); ok && c.Delta == "agent says hi" {
					assert.True(t, strings.HasPrefix(c.SubagentRunID, "sa-"), c.SubagentRunID)
				}
			}
			assert.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
		})
	}
}

func TestUnknownToolAndBadArguments(t *testing.T) {
	tests := []struct {
		name, tool, args, want string
	}{
		{"unknown tool", "nope", `{}`, `[RETRY:unknown_action] `},
		{"not an object", "research", `[1]`, `[RETRY:validation_failed] `},
		{"missing prompt", "research", `{"task":"x"}`, `[RETRY:validation_failed] `},
		{"continue unknown task", "research", `{"prompt":"x","task_id":"made-up"}`, `[RETRY:invalid_transition] `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "x")}
			e := newEngine(t, &fakeModel{turn: callThenReport(tt.tool, tt.args)}, agent)
			r, err := e.StartRun(context.Background(), input("t"), "")
			require.NoError(t, err)
			res := toolResults(collect(t, r))
			require.Len(t, res, 1)
			assert.True(t, strings.HasPrefix(res[0], tt.want), "got %q", res[0])
			var sig map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(res[0], res[0][:strings.Index(res[0], " ")+1])), &sig))
			for _, k := range []string{"error", "requested", "message", "valid_next_actions"} {
				assert.Contains(t, sig, k)
			}
			assert.Empty(t, agent.sent, "a refused call sends nothing")
		})
	}
}

// A task_id continues a task this thread started; the same id from another thread (another
// principal's, say) is refused without contacting the agent (a task id is no capability), and so is an
// id the agent knows but the thread never saw (no GetTask fallback).
func TestContinuationOfWaitingTask(t *testing.T) {
	agent := &fakeAgent{
		send: func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
			if req.TaskID == "" {
				obs.Task("t-9", "c-9")
				return &subagent.Result{State: subagent.StateInputRequired, TaskID: "t-9", ContextID: "c-9", Text: "Which day?"}, nil
			}
			return &subagent.Result{State: subagent.StateCompleted, TaskID: req.TaskID, ContextID: req.ContextID, Text: "booked"}, nil
		},
		tasks: map[string]*subagent.Result{"t-9": {State: subagent.StateInputRequired, TaskID: "t-9", ContextID: "c-9"}},
	}
	model := &switchModel{turns: map[string]turnFunc{
		"start":    callThenReport("research", `{"prompt":"book"}`),
		"continue": callThenReport("research", `{"prompt":"May 12","task_id":"t-9"}`),
	}}
	e := newEngine(t, &fakeModel{turn: model.turn}, agent, func(c *Config) { c.Agents[0].InputRequired = "model" })

	// Thread "other" never started t-9: refused, nothing sent, no GetTask.
	model.use("continue")
	res := toolResults(startAndCollect(t, e, input("other")))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[RETRY:invalid_transition] "), res[0])
	assert.Empty(t, agent.sent)

	// Thread "t" starts it, then continues it.
	model.use("start")
	res = toolResults(startAndCollect(t, e, input("t")))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[INPUT_REQUIRED:task_id=t-9]\n"), res[0])
	model.use("continue")
	in := input("t")
	in.RunID = "r-t-2"
	res = toolResults(startAndCollect(t, e, in))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]\n"), res[0])
	require.Len(t, agent.sent, 2)
	assert.Equal(t, subagent.Request{Prompt: "May 12", TaskID: "t-9", ContextID: "c-9", Depth: 1}, agent.sent[1])

	// Still refused for "other", now that t-9 exists and waits.
	model.use("continue")
	in = input("other")
	in.RunID = "r-other-2"
	res = toolResults(startAndCollect(t, e, in))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[RETRY:invalid_transition] "), res[0])
	assert.Len(t, agent.sent, 2)
}

// switchModel plays the turn function chosen by use.
type switchModel struct {
	mu    sync.Mutex
	turns map[string]turnFunc
	cur   string
}

func (m *switchModel) use(name string) { m.mu.Lock(); defer m.mu.Unlock(); m.cur = name }

func (m *switchModel) turn(req *llm.Request) []llm.Delta {
	m.mu.Lock()
	f := m.turns[m.cur]
	m.mu.Unlock()
	return f(req)
}

func TestThreadBusyAndStop(t *testing.T) {
	m := &fakeModel{turn: callThenReport("research", `{}`), block: make(chan struct{})}
	e := newEngine(t, m, &fakeAgent{})
	r, err := e.StartRun(context.Background(), input("busy"), "")
	require.NoError(t, err)
	_, err = e.StartRun(context.Background(), input("busy"), "")
	assert.ErrorIs(t, err, ErrThreadBusy)
	assert.ErrorIs(t, e.StopRun("busy", "other-run", ""), ErrRunNotFound)
	assert.ErrorIs(t, e.StopRun("nope", "x", ""), ErrRunNotFound)
	require.Eventually(t, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.calls == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, e.StopRun("busy", "r-busy", ""))
	evs := collect(t, r)
	last, ok := evs[len(evs)-1].(*agui.RunFinished)
	require.True(t, ok, "got %#v", evs[len(evs)-1])
	assert.Equal(t, agui.OutcomeCancelled, last.Outcome.Type)
	reps := r.Cancellations()
	require.Len(t, reps, 1)
	assert.Equal(t, cancel.KindLLM, reps[0].Kind, "the LLM request is cancelled too")
	assert.ErrorIs(t, e.StopRun("busy", "r-busy", ""), ErrRunFinished)
}

func TestOwnerIsolation(t *testing.T) {
	m := &fakeModel{turn: func(*llm.Request) []llm.Delta { return []llm.Delta{{Done: &llm.Completion{FinishReason: "stop"}}} }}
	e := newEngine(t, m, &fakeAgent{})
	r, err := e.StartRun(context.Background(), input("mine"), "alice")
	require.NoError(t, err)
	collect(t, r)
	_, err = e.StartRun(context.Background(), input("mine"), "bob")
	assert.ErrorIs(t, err, ErrForbidden)
	assert.ErrorIs(t, e.StopRun("mine", "r-mine", "bob"), ErrForbidden)
}

// A disconnect cancels the run: the running task gets CancelTask, even when its id only
// arrives after the cancellation.
func TestCancelHeldUntilTaskIDKnown(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		close(started)
		<-release // the peer delays its first event
		obs.Task("late-task", "ctx")
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, agent)
	r, err := e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	<-started
	r.Cancel(ErrClientGone)
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	evs := collect(t, r)
	assert.Equal(t, []string{"late-task"}, agent.cancelled())
	assert.Contains(t, types(evs), "SUBAGENT_ERROR")
	reps := r.Cancellations()
	require.Len(t, reps, 1, "the run's record says what was cancelled")
	assert.Equal(t, cancel.KindA2ATask, reps[0].Kind)
	assert.Equal(t, "late-task", reps[0].ID)
	assert.Equal(t, cancel.ResultConfirmed, reps[0].Result)
	assert.Equal(t, "cancelled: client disconnected", r.EndReason())
}

func TestDelegationTimeout(t *testing.T) {
	agent := &fakeAgent{send: func(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("slow-1", "ctx")
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEngine(t, &fakeModel{turn: callThenReport("research", `{"prompt":"slow"}`)}, agent, func(c *Config) { c.Agents[0].Timeout = 50 * time.Millisecond })
	r, err := e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	res := toolResults(collect(t, r))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[TIMEOUT:task_id=slow-1]\n"), res[0])
	assert.Equal(t, []string{"slow-1"}, agent.cancelled())
}

func TestFrontendToolPending(t *testing.T) {
	m := &fakeModel{turn: callThenReport("show_map", `{"city":"Lisbon"}`)}
	e := newEngine(t, m, &fakeAgent{})
	in := input("t")
	in.Tools = []agui.Tool{{Name: "show_map", Description: "Shows a map", Parameters: json.RawMessage(`{"type":"object"}`)}}
	r, err := e.StartRun(context.Background(), in, "")
	require.NoError(t, err)
	evs := collect(t, r)
	assert.Empty(t, toolResults(evs), "a frontend tool's result comes from the application")
	last := evs[len(evs)-1].(*agui.RunFinished)
	assert.Equal(t, []string{"call_1"}, last.Outcome.PendingToolCallIDs)
}

// The iteration limit asks the user whether to go on (DESIGN §6, §9): continuing gives a
// fresh allowance of steps, stopping ends the run with baton.partial.
func TestIterationLimit(t *testing.T) {
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "x")}
	// Every call differs, so that the loop detector stays out of it.
	m := &fakeModel{}
	m.turn = func(*llm.Request) []llm.Delta {
		m.mu.Lock()
		n := m.calls
		m.mu.Unlock()
		return []llm.Delta{{ToolCall: &llm.ToolCallDelta{Index: 0, ID: fmt.Sprintf("c%d", n), Name: "research", Arguments: fmt.Sprintf(`{"prompt":"step %d"}`, n)}}, {Done: &llm.Completion{FinishReason: "tool_calls"}}}
	}
	e := newEngine(t, m, agent, func(c *Config) { c.Limits.MaxIterations = 3 })
	r, err := e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	evs := collect(t, r)
	assert.Equal(t, 3, m.calls)
	assert.Len(t, agent.sent, 3)
	assert.Equal(t, []FailureValue{{Kind: failure.KindIterationLimit, Action: failure.ActionAskUser, Attempt: 1,
		Explanation: "The run reached its limit of 3 steps without finishing. Your decision is needed to go on."}}, failureValues(evs))
	ins := interruptsOf(t, evs)
	require.Len(t, ins, 1)
	assert.Equal(t, "input_required", ins[0].Reason)
	assert.Equal(t, "The run reached its limit of 3 steps without finishing. Your decision is needed to go on. Continue?", ins[0].Message)
	assert.Equal(t, map[string]any{"baton": map[string]any{"kind": "iteration_limit"}}, ins[0].Metadata)
	assert.Equal(t, "interrupt: iteration_limit", r.EndReason())

	// Continuing: a fresh allowance of three steps, then the question again.
	evs = startAndCollect(t, e, resumeInput("t", "r2", resolved(ins[0].ID, `{"continue":true}`)))
	assert.Equal(t, 6, m.calls)
	again := interruptsOf(t, evs)
	require.Len(t, again, 1)
	assert.Equal(t, []FailureValue{{Kind: failure.KindIterationLimit, Action: failure.ActionAskUser, Attempt: 2,
		Explanation: "The run reached its limit of 3 steps without finishing. Your decision is needed to go on."}}, failureValues(evs))

	// Stopping: a partial result, no more model calls.
	evs = startAndCollect(t, e, resumeInput("t", "r3", resolved(again[0].ID, `{"continue":false}`)))
	assert.Equal(t, 6, m.calls)
	assert.Equal(t, []string{"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM", "RUN_FINISHED"}, types(evs))
	partial := evs[4].(*agui.Custom)
	assert.Equal(t, EventPartial, partial.Name)
	assert.Equal(t, Handoff{
		Rationale: "The run reached its limit of 3 steps without finishing. You chose to stop here.",
		Blockers:  []string{"the step limit was reached"},
		NextSteps: []string{"continue the run", "ask again with a narrower request", "raise limits.max_iterations"},
	}, partial.Value)
	fin := lastEvent(evs).(*agui.RunFinished)
	assert.Equal(t, map[string]any{"stopped": "iteration_limit", "action": "stop"}, fin.Result)
}

func TestModelErrorIsUserSafe(t *testing.T) {
	m := &fakeModel{turn: nil}
	m.turn = func(*llm.Request) []llm.Delta { return nil }
	e := newEngine(t, errModel{&llm.Error{Kind: llm.ErrBadRequest, Status: 400, Message: "secret internal detail", Err: errors.New("x")}}, &fakeAgent{})
	r, err := e.StartRun(context.Background(), input("t"), "")
	require.NoError(t, err)
	evs := collect(t, r)
	re := evs[len(evs)-1].(*agui.RunError)
	assert.Equal(t, "MODEL_UNAVAILABLE", re.Code)
	assert.NotContains(t, re.Message, "secret")
}

type errModel struct{ err error }

func (m errModel) Stream(context.Context, *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) { yield(llm.Delta{}, m.err) }
}

func TestShutdownCancelsActiveRuns(t *testing.T) {
	m := &fakeModel{turn: callThenReport("research", `{}`), block: make(chan struct{})}
	e := newEngine(t, m, &fakeAgent{})
	r, err := e.StartRun(context.Background(), input("s"), "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.NoError(t, e.Stop(ctx))
	_, err = e.StartRun(context.Background(), input("s2"), "")
	assert.ErrorIs(t, err, ErrShuttingDown)
	assert.Equal(t, "cancelled: coordinator shutdown", r.EndReason())
}

func TestHistoryRepairsOrphans(t *testing.T) {
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	msgs := []agui.Message{
		{ID: "u", Role: "user", Content: str("hi")},
		{ID: "a", Role: "assistant", ToolCalls: []agui.ToolCall{{ID: "c1", Type: "function", Function: agui.FunctionCall{Name: "x", Arguments: "{}"}}, {ID: "c2", Type: "function", Function: agui.FunctionCall{Name: "y"}}}},
		{ID: "u2", Role: "user", Content: str("and?")},
		{ID: "t1", Role: "tool", ToolCallID: "c1", Content: str("[OK]\nfine")},
		{ID: "act", Role: "activity"},
	}
	got := fromAGUI(msgs)
	require.Len(t, got, 5)
	assert.Equal(t, llm.RoleAssistant, got[1].Role)
	assert.Equal(t, "c1", got[2].ToolCallID)
	assert.Equal(t, "[OK]\nfine", got[2].Content)
	assert.Equal(t, "c2", got[3].ToolCallID)
	assert.Equal(t, orphanResult, got[3].Content)
	assert.Equal(t, llm.RoleUser, got[4].Role)
}

func TestToolName(t *testing.T) {
	assert.Equal(t, "my_agent-1", ToolName("my agent-1"))
	assert.Len(t, ToolName(strings.Repeat("a", 100)), 64)
}

// A model that numbers its calls per turn (call_0 every time) still gets distinct ids.
func TestRepeatedToolCallIDsAreMadeUnique(t *testing.T) {
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "x")}
	turns := 0
	m := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		turns++
		if turns > 2 {
			return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
		}
		return []llm.Delta{{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "call_0", Name: "research", Arguments: fmt.Sprintf(`{"prompt":"p%d"}`, turns)}}, {Done: &llm.Completion{FinishReason: "tool_calls"}}}
	}}
	e := newEngine(t, m, agent)
	r, err := e.StartRun(context.Background(), input("ids"), "")
	require.NoError(t, err)
	evs := collect(t, r)
	var ids []string
	for _, ev := range evs {
		if s, ok := ev.(*agui.ToolCallStart); ok {
			ids = append(ids, s.ToolCallID)
		}
	}
	require.Len(t, ids, 2)
	assert.Equal(t, "call_0", ids[0])
	assert.NotEqual(t, ids[0], ids[1])
}

// A task the thread started stays the thread's after a restart even when the thread was not
// parked (input_required: model): the new process finds it in the store's record of the
// thread's earlier runs, and another thread still cannot continue it.
func TestContinuationAfterRestart(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	agent := &fakeAgent{
		send: func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
			if req.TaskID == "" {
				obs.Task("t-7", "c-7")
				return &subagent.Result{State: subagent.StateInputRequired, TaskID: "t-7", ContextID: "c-7", Text: "Which day?"}, nil
			}
			return &subagent.Result{State: subagent.StateCompleted, TaskID: req.TaskID, ContextID: req.ContextID, Text: "booked"}, nil
		},
		tasks: map[string]*subagent.Result{"t-7": {State: subagent.StateInputRequired, TaskID: "t-7", ContextID: "c-7"}},
	}
	model := &switchModel{turns: map[string]turnFunc{
		"start":    callThenReport("research", `{"prompt":"book"}`),
		"continue": callThenReport("research", `{"prompt":"May 12","task_id":"t-7"}`),
	}}
	modelMode := func(c *Config) { c.Agents[0].InputRequired = "model"; c.Store = st }

	first := newEngine(t, &fakeModel{turn: model.turn}, agent, modelMode)
	model.use("start")
	res := toolResults(startAndCollect(t, first, input("t")))
	require.Len(t, res, 1)
	require.True(t, strings.HasPrefix(res[0], "[INPUT_REQUIRED:task_id=t-7]\n"), res[0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, first.Stop(ctx))

	second := newEngine(t, &fakeModel{turn: model.turn}, agent, modelMode)
	model.use("continue")
	in := input("other")
	in.RunID = "r-other-after"
	res = toolResults(startAndCollect(t, second, in))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[RETRY:invalid_transition] "), "another thread: %s", res[0])
	require.Len(t, agent.sent, 1, "nothing sent for the other thread")

	in = input("t")
	in.RunID = "r-t-after"
	res = toolResults(startAndCollect(t, second, in))
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]\n"), res[0])
	require.Len(t, agent.sent, 2)
	assert.Equal(t, subagent.Request{Prompt: "May 12", TaskID: "t-7", ContextID: "c-7", Depth: 1}, agent.sent[1])
}
