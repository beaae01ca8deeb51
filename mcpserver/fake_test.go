package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
)

// fakeRun is a run whose events the test's script pushes.
type fakeRun struct {
	mu      sync.Mutex
	evs     []agui.Event
	taken   int
	ended   bool
	wake    chan struct{}
	done    chan struct{}
	reports []cancel.Report
	// settledAsked counts the Cancellations calls after the run ended.
	settledAsked int
}

func newFakeRun() *fakeRun {
	return &fakeRun{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (r *fakeRun) push(evs ...agui.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		if r.ended {
			return
		}
		r.evs = append(r.evs, ev)
		switch ev.(type) {
		case *agui.RunFinished, *agui.RunError:
			r.ended = true
			close(r.done)
		}
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *fakeRun) NextFrom() (int64, []agui.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := int64(r.taken + 1)
	evs := r.evs[r.taken:]
	r.taken = len(r.evs)
	return first, evs, r.ended
}

func (r *fakeRun) Wake() <-chan struct{} { return r.wake }
func (r *fakeRun) Done() <-chan struct{} { return r.done }
func (r *fakeRun) Cancellations() []cancel.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.settledAsked++
	}
	return append([]cancel.Report(nil), r.reports...)
}

// started is one Start or Delegate the fake engine got.
type started struct {
	agent string // "" for Start
	in    *agui.RunAgentInput
	who   string
	run   *fakeRun
}

// fakeEngine scripts runs by the first word of the prompt (or by the resume):
//
//	hello     the model answers "hi there"
//	complete  the delegation completes: "[COMPLETED]\ndone: <prompt>"
//	fail      the delegation fails: "[FAILED]\nno way"
//	progress  a sub-agent "research" streams 50 text deltas, then completes
//	slow      a sub-agent starts and works until stopped; its cancel is confirmed
//	ask       the run ends with a question (input_required, {text})
//	approve   the run ends with an approval question ({approved, editedArgs})
//	signin    the run ends with an A2A sign-in (a2a:auth_required, an authorizationUrl)
//	mcpsignin the run ends with an MCP sign-in whose authorizationUrl is not http(s)
//
// A resume completes with "[COMPLETED]\nanswer: <payload>" (or "[CANCELED]" when the
// answer was cancelled).
type fakeEngine struct {
	mu      sync.Mutex
	starts  []started
	stops   []string
	owners  map[string]string
	started chan started
	stopped chan string
	// paged counts the threads ThreadsPage returned (taskEngine); lookups the threads
	// Thread and RunLog looked up, listedLogs the logs ListedLog read.
	paged, lookups, listedLogs int
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{owners: map[string]string{}, started: make(chan started, 100), stopped: make(chan string, 100)}
}

func (e *fakeEngine) Start(ctx context.Context, in *agui.RunAgentInput, who string) (Run, error) {
	return e.start("", in, who)
}

func (e *fakeEngine) Delegate(ctx context.Context, agent string, in *agui.RunAgentInput, who string) (Run, error) {
	return e.start(agent, in, who)
}

func (e *fakeEngine) start(agent string, in *agui.RunAgentInput, who string) (Run, error) {
	e.mu.Lock()
	if owner, ok := e.owners[in.ThreadID]; ok && owner != who {
		e.mu.Unlock()
		return nil, ErrForbidden
	}
	e.owners[in.ThreadID] = who
	r := newFakeRun()
	s := started{agent: agent, in: in, who: who, run: r}
	e.starts = append(e.starts, s)
	e.mu.Unlock()
	e.started <- s
	go script(r, in)
	return r, nil
}

func (e *fakeEngine) Stop(threadID, runID, who string) error {
	e.mu.Lock()
	var run *fakeRun
	for _, s := range e.starts {
		if s.in.ThreadID == threadID && s.in.RunID == runID && s.who == who {
			run = s.run
		}
	}
	e.stops = append(e.stops, runID)
	e.mu.Unlock()
	e.stopped <- runID
	if run != nil {
		run.mu.Lock()
		for i := range run.reports {
			run.reports[i].Result = cancel.ResultConfirmed
		}
		run.mu.Unlock()
		run.push(&agui.RunFinished{ThreadID: threadID, RunID: runID, Outcome: &agui.Outcome{Type: agui.OutcomeCancelled}})
	}
	return nil
}

func (e *fakeEngine) startCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.starts)
}

func promptOf(in *agui.RunAgentInput) string {
	if len(in.Messages) == 0 {
		return ""
	}
	var s string
	_ = json.Unmarshal(in.Messages[0].Content, &s)
	return s
}

func script(r *fakeRun, in *agui.RunAgentInput) {
	fin := &agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID}
	if len(in.Resume) > 0 {
		res := in.Resume[0]
		if res.Status == agui.ResumeCancelled {
			r.push(&agui.ToolCallResult{ToolCallID: "c1", Content: "[CANCELED]\nthe question was declined"}, fin)
			return
		}
		r.push(&agui.ToolCallResult{ToolCallID: "c1", Content: "[COMPLETED]\nanswer: " + string(res.Payload)},
			&agui.TextMessageStart{MessageID: "m2", Role: "assistant"},
			&agui.TextMessageContent{MessageID: "m2", Delta: "answer: " + string(res.Payload)},
			&agui.TextMessageEnd{MessageID: "m2"}, fin)
		return
	}
	prompt := promptOf(in)
	word, _, _ := strings.Cut(prompt, " ")
	switch word {
	case "hello":
		r.push(&agui.RunStarted{ThreadID: in.ThreadID, RunID: in.RunID},
			&agui.TextMessageStart{MessageID: "m1", Role: "assistant"},
			&agui.TextMessageContent{MessageID: "m1", Delta: "hi "},
			&agui.TextMessageContent{MessageID: "m1", Delta: "there"},
			&agui.TextMessageEnd{MessageID: "m1"}, fin)
	case "complete":
		r.push(&agui.ToolCallStart{ToolCallID: "c1", ToolCallName: "research"},
			&agui.ToolCallResult{ToolCallID: "c1", Content: "[COMPLETED]\ndone: " + prompt}, fin)
	case "fail":
		r.push(&agui.ToolCallResult{ToolCallID: "c1", Content: "[FAILED]\nno way"}, fin)
	case "progress":
		r.push(&agui.SubagentStarted{SubagentRunID: "s1", Name: "research"})
		for i := 0; i < 50; i++ {
			r.push(&agui.TextMessageContent{MessageID: "sm", SubagentRunID: "s1", Delta: "step "})
			time.Sleep(5 * time.Millisecond)
		}
		r.push(&agui.ToolCallResult{ToolCallID: "c1", Content: "[COMPLETED]\nfound it"}, fin)
	case "slow":
		r.mu.Lock()
		r.reports = append(r.reports, cancel.Report{Kind: "a2a", Name: "research", ID: "task-1", Result: cancel.ResultPending})
		r.mu.Unlock()
		r.push(&agui.SubagentStarted{SubagentRunID: "s1", Name: "research"},
			&agui.TextMessageContent{MessageID: "sm", SubagentRunID: "s1", Delta: "working"})
	case "ask":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: agui.OutcomeInterrupt, Interrupts: []agui.Interrupt{{
			ID: "int-1", Reason: "input_required", Message: "Which colour?",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}},
		}}}})
	case "approve":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: agui.OutcomeInterrupt, Interrupts: []agui.Interrupt{{
			ID: "int-2", Reason: "tool_call", Message: "May research run?",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{
				"approved": map[string]any{"type": "boolean"}, "editedArgs": map[string]any{"type": "object"}}, "required": []any{"approved"}},
		}}}})
	case "signin":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: agui.OutcomeInterrupt, Interrupts: []agui.Interrupt{{
			ID: "int-3", Reason: "a2a:auth_required", Message: "Please sign in to the vault.",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
			Metadata:       map[string]any{"agent": "vault", "authorizationUrl": "https://idp.example/authorize?state=s1"},
		}}}})
	case "mcpsignin":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: agui.OutcomeInterrupt, Interrupts: []agui.Interrupt{{
			ID: "int-4", Reason: "mcp:authorization", Message: "Sign in to deploy",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{
				"action": map[string]any{"type": "string", "enum": []any{"accept", "decline"}}}, "required": []any{"action"}},
			Metadata: map[string]any{"server": "deploy", "authorizationUrl": "javascript:alert(1)"},
		}}}})
	default:
		r.push(&agui.RunError{Message: "unscripted prompt " + prompt})
	}
}
