package a2aserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/internal/principal"
	"github.com/baton-dev/baton/store"
)

// fakeRun is a run whose events the test pushes.
type fakeRun struct {
	mu      sync.Mutex
	evs     []agui.Event
	taken   int
	ended   bool
	wake    chan struct{}
	done    chan struct{}
	reports []cancel.Report
	// sink, when set, also gets every event pushed (the store's event log).
	sink func(seq int, ev agui.Event)
}

func newFakeRun() *fakeRun {
	return &fakeRun{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (r *fakeRun) push(evs ...agui.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		r.evs = append(r.evs, ev)
		if r.sink != nil {
			r.sink(len(r.evs), ev)
		}
		switch ev.(type) {
		case *agui.RunFinished, *agui.RunError:
			if !r.ended { // a stop after the end, as the engine allows
				r.ended = true
				close(r.done)
			}
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
	return append([]cancel.Report(nil), r.reports...)
}

// fakeEngine scripts runs by the first word of the user's text.
type fakeEngine struct {
	mu      sync.Mutex
	runs    map[string]*fakeRun // by run id
	resumes [][]agui.ResumeEntry
	owners  map[string]string // thread → principal
	// st, when set, gets the runs' records and event logs, as the engine's store does.
	st store.Store
	// onStop, when set, is called by Stop before the run ends (what the owner records); it
	// returns more cancellation reports of the run.
	onStop func(threadID, runID string) []cancel.Report
	// stopErr, when set, is Stop's answer for a run it does not know (one that ended
	// before a restart).
	stopErr error
}

func (e *fakeEngine) Start(_ context.Context, in *agui.RunAgentInput, who string) (Run, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.owners[in.ThreadID]; ok && o != who {
		return nil, ErrForbidden
	}
	e.owners[in.ThreadID] = who
	r := newFakeRun()
	if e.st != nil {
		r.sink = logTo(e.st, in.ThreadID, in.RunID, who)
	}
	e.runs[in.RunID] = r
	started := &agui.RunStarted{ThreadID: in.ThreadID, RunID: in.RunID}
	if len(in.Resume) > 0 {
		e.resumes = append(e.resumes, in.Resume)
		var p struct{ Text string }
		_ = json.Unmarshal(in.Resume[0].Payload, &p)
		if p.Text == "wrong" {
			r.push(started, &agui.RunError{Code: "INVALID_RESUME", Message: "payload.text must be a colour"})
			return r, nil
		}
		r.push(started)
		r.push(say("m2", "answer was "+p.Text)...)
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID})
		return r, nil
	}
	var text string
	_ = json.Unmarshal(in.Messages[0].Content, &text)
	r.push(started)
	switch strings.Fields(text)[0] {
	case "hello":
		r.push(say("m1", "hi ", "there")...)
		r.push(&agui.TextMessageStart{MessageID: "s1", Role: "assistant", SubagentRunID: "sub"}, &agui.TextMessageContent{MessageID: "s1", Delta: "not mine", SubagentRunID: "sub"}, &agui.TextMessageEnd{MessageID: "s1", SubagentRunID: "sub"})
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID})
	case "handoff", "policy":
		kind := "output_refused"
		if strings.HasPrefix(text, "policy") {
			kind = kindPolicy
		}
		r.push(&agui.Custom{Name: eventFailure, Value: map[string]any{"kind": kind}},
			&agui.Custom{Name: eventHandoff, Value: map[string]any{"rationale": "cannot do it", "blockers": []string{"the rules"}, "next_steps": []string{}}},
			&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID})
	case "error":
		r.push(&agui.RunError{Code: "MODEL", Message: "the model is down"})
	case "ask":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: "interrupt", Interrupts: []agui.Interrupt{{
			ID: "int-1", Reason: "input_required", Message: "which colour?",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		}}}})
	case "signin":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: "interrupt", Interrupts: []agui.Interrupt{{
			ID: "int-s", Reason: reasonMCPAuthorization, Message: "Sign in to sec",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"action": map[string]any{"type": "string"}}},
			Metadata:       map[string]any{"server": "sec", "authorizationUrl": "https://as.example/authorize?state=s"},
		}}}})
	case "agentsignin", "agentauth", "mixed":
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &agui.Outcome{Type: "interrupt", Interrupts: scriptedQuestions[strings.Fields(text)[0]]}})
	case "slow":
		// runs until stopped
	case "long":
		// "long N": an answer of N bytes in 4-character deltas
		n, _ := strconv.Atoi(strings.Fields(text)[1])
		deltas := make([]string, n/4)
		for i := range deltas {
			deltas[i] = "abc "
		}
		r.push(say("m1", deltas...)...)
		r.push(&agui.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID})
	}
	return r, nil
}

func say(id string, deltas ...string) []agui.Event {
	evs := []agui.Event{&agui.TextMessageStart{MessageID: id, Role: "assistant"}}
	for _, d := range deltas {
		evs = append(evs, &agui.TextMessageContent{MessageID: id, Delta: d})
	}
	return append(evs, &agui.TextMessageEnd{MessageID: id})
}

func (e *fakeEngine) Stop(threadID, runID, who string) error {
	e.mu.Lock()
	r := e.runs[runID]
	e.mu.Unlock()
	if r == nil {
		return e.stopErr
	}
	r.mu.Lock()
	r.reports = []cancel.Report{{Kind: "a2a", Name: "research", ID: "t-ok", Result: cancel.ResultConfirmed}, {Kind: "a2a", Name: "travel", ID: "t-bad", Result: cancel.ResultFailed}}
	r.mu.Unlock()
	if e.onStop != nil {
		more := e.onStop(threadID, runID)
		r.mu.Lock()
		r.reports = append(r.reports, more...)
		r.mu.Unlock()
	}
	r.push(&agui.RunFinished{ThreadID: threadID, RunID: runID, Outcome: &agui.Outcome{Type: "cancelled"}})
	return nil
}

// serve runs the A2A surface behind a stand-in for the server's auth: the principal is the
// X-Principal header.
func serve(t *testing.T) (*fakeEngine, string) {
	return serveWith(t, nil)
}

// serveWith is serve with the sign-ins the executor watches.
func serveWith(t *testing.T, signIns SignIns) (*fakeEngine, string) {
	t.Helper()
	e := &fakeEngine{runs: map[string]*fakeRun{}, owners: map[string]string{}}
	s := New(Config{Engine: e, Tasks: memPort(t), Card: CardInfo{Name: "baton", Bearer: true, Skills: []Skill{{ID: "agent:research", Name: "research", Description: "d"}}}, CancelHorizon: 2 * time.Second, SignIns: signIns})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r.WithContext(principal.With(r.Context(), r.Header.Get("X-Principal"))))
	}))
	t.Cleanup(srv.Close)
	return e, srv.URL
}

type headerTransport struct{ who string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Principal", h.who)
	return http.DefaultTransport.RoundTrip(r)
}

func client(t *testing.T, base, who, wire string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{who}}
	iface := a2a.NewAgentInterface(base+PathJSONRPC, a2a.TransportProtocolJSONRPC)
	switch wire {
	case "rest":
		iface = a2a.NewAgentInterface(base+PathREST, a2a.TransportProtocolHTTPJSON)
	case "jsonrpc-v03":
		iface = &a2a.AgentInterface{URL: base + PathJSONRPCv03, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version}
	case "rest-v03":
		iface = &a2a.AgentInterface{URL: base + PathRESTv03, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2av0.Version}
	}
	c, err := a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{iface}, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

type seen struct {
	task     *a2a.Task
	states   []a2a.TaskState
	last     a2a.TaskStatus
	artifact string
}

func stream(t *testing.T, c *a2aclient.Client, m *a2a.Message) seen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s seen
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: m}) {
		require.NoError(t, err)
		switch v := ev.(type) {
		case *a2a.Task:
			s.task = v
			s.states = append(s.states, v.Status.State)
			s.last = v.Status
		case *a2a.TaskStatusUpdateEvent:
			s.states = append(s.states, v.Status.State)
			s.last = v.Status
			if s.task == nil {
				s.task = &a2a.Task{ID: v.TaskID, ContextID: v.ContextID}
			}
		case *a2a.TaskArtifactUpdateEvent:
			for _, p := range v.Artifact.Parts {
				s.artifact += p.Text()
			}
		}
	}
	return s
}

func text(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	var out []string
	for _, p := range s.Message.Parts {
		out = append(out, p.Text())
	}
	return strings.Join(out, "\n")
}

func msg(t string) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(t)) }

func TestTerminalStates(t *testing.T) {
	t.Parallel()
	_, base := serve(t)
	for _, wire := range []string{"jsonrpc", "rest"} {
		c := client(t, base, "alice", wire)
		for _, tc := range []struct {
			say      string
			state    a2a.TaskState
			artifact string
			explain  string
		}{
			{"hello", a2a.TaskStateCompleted, "hi there", ""},
			{"handoff now", a2a.TaskStateFailed, "", "cannot do it"},
			{"policy now", a2a.TaskStateRejected, "", "the rules"},
			{"error now", a2a.TaskStateFailed, "", "the model is down"},
		} {
			s := stream(t, c, msg(tc.say))
			assert.Equal(t, tc.state, s.last.State, "%s %s: %v", wire, tc.say, s.states)
			assert.Equal(t, tc.artifact, s.artifact, "%s %s: only the run's own text", wire, tc.say)
			assert.Contains(t, text(s.last), tc.explain)
		}
	}
}

func TestQuestionAndAnswer(t *testing.T) {
	t.Parallel()
	e, base := serve(t)
	c := client(t, base, "alice", "jsonrpc")
	s := stream(t, c, msg("ask"))
	require.Equal(t, a2a.TaskStateInputRequired, s.last.State)
	assert.Contains(t, text(s.last), "which colour?")
	var data []map[string]any
	for _, p := range s.last.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			data = append(data, d)
		}
	}
	require.Len(t, data, 1)
	assert.Equal(t, "int-1", data[0]["interruptId"])
	assert.Equal(t, "input_required", data[0]["reason"])
	assert.NotNil(t, data[0]["responseSchema"])

	// Bad answers keep the task waiting and say why; the engine sees none of them.
	for _, bad := range []*a2a.Message{
		a2a.NewMessageForTask(a2a.MessageRoleUser, s.task, a2a.NewDataPart(map[string]any{"interruptId": "other", "payload": map[string]any{}})),
		a2a.NewMessageForTask(a2a.MessageRoleUser, s.task, a2a.NewDataPart(map[string]any{"interruptId": "int-1"})),
	} {
		r := stream(t, c, bad)
		assert.Equal(t, a2a.TaskStateInputRequired, r.last.State)
		assert.Contains(t, text(r.last), "not accepted")
	}
	e.mu.Lock()
	assert.Empty(t, e.resumes)
	e.mu.Unlock()
	// An answer the engine refuses keeps it waiting too.
	r := stream(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, s.task, a2a.NewTextPart("wrong")))
	assert.Equal(t, a2a.TaskStateInputRequired, r.last.State, "%v", r.states)
	assert.Contains(t, text(r.last), "must be a colour")

	r = stream(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, s.task, a2a.NewTextPart("blue")))
	assert.Equal(t, a2a.TaskStateCompleted, r.last.State, "%v", r.states)
	assert.Equal(t, "answer was blue", r.artifact)
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Len(t, e.resumes, 2)
	assert.Equal(t, "int-1", e.resumes[1][0].InterruptID)
	assert.JSONEq(t, `{"text":"blue"}`, string(e.resumes[1][0].Payload))
}

func TestCancelNamesUnconfirmed(t *testing.T) {
	t.Parallel()
	_, base := serve(t)
	c := client(t, base, "alice", "jsonrpc")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg("slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok)
	require.EventuallyWithT(t, func(c2 *assert.CollectT) {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if assert.NoError(c2, err) {
			assert.Equal(c2, a2a.TaskStateWorking, got.Status.State)
		}
	}, 5*time.Second, 10*time.Millisecond)
	got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
	assert.Contains(t, text(got.Status), "travel task t-bad (failed)")
	assert.NotContains(t, text(got.Status), "t-ok")
}

func TestTasksBelongToTheirPrincipal(t *testing.T) {
	t.Parallel()
	_, base := serve(t)
	alice, bob := client(t, base, "alice", "jsonrpc"), client(t, base, "bob", "rest")
	s := stream(t, alice, msg("hello"))
	ctx := context.Background()
	_, err := bob.GetTask(ctx, &a2a.GetTaskRequest{ID: s.task.ID})
	assert.ErrorIs(t, err, a2a.ErrTaskNotFound)
	list, err := bob.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: s.task.ContextID})
	require.NoError(t, err)
	assert.Empty(t, list.Tasks)
	list, err = alice.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: s.task.ContextID})
	require.NoError(t, err)
	assert.Len(t, list.Tasks, 1)
	// Bob cannot run on Alice's thread.
	m := msg("hello")
	m.ContextID = s.task.ContextID
	for _, err := range bob.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: m}) {
		if err != nil {
			assert.ErrorIs(t, err, a2a.ErrUnauthorized)
			return
		}
	}
	t.Fatal("bob ran on alice's thread")
}

func TestCard(t *testing.T) {
	t.Parallel()
	_, base := serve(t)
	resp, err := http.Get(base + "/.well-known/agent-card.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	var card map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
	b, _ := json.Marshal(card)
	for _, want := range []string{`"name":"baton"`, base + "/a2a", base + "/a2a/v1", base + "/a2a/v0/jsonrpc", `"bearer"`, `"Bearer"`, `"research"`, `"streaming":true`} {
		assert.Contains(t, string(b), want)
	}
	assert.NotContains(t, string(b), `"pushNotifications":true`)
}
