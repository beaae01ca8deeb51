package a2aserver

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
)

// The questions of the scripted runs that wait for an A2A sub-agent's auth-required (with
// and without Baton's own sign-in to the agent), and for a sign-in mixed with a question.
var (
	textSchema   = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
	actionSchema = map[string]any{"type": "object", "properties": map[string]any{"action": map[string]any{"type": "string"}}}
	a2aMD        = map[string]any{"a2a": map[string]any{"agent": "vault", "taskId": "t-v", "contextId": "c-v"}}

	scriptedQuestions = map[string][]agui.Interrupt{
		// The agent's card declares an OAuth flow: Baton's sign-in to it has a URL.
		"agentsignin": {{ID: "int-a", Reason: reasonA2AAuthRequired, Message: "please authenticate", ResponseSchema: textSchema,
			Metadata: map[string]any{"a2a": a2aMD["a2a"], "authorizationUrl": "https://as.example/authorize?state=a"}}},
		// No flow Baton can use: only the caller can say when it is done.
		"agentauth": {{ID: "int-n", Reason: reasonA2AAuthRequired, Message: "please authenticate", ResponseSchema: textSchema, Metadata: a2aMD}},
		"mixed": {
			{ID: "int-s", Reason: reasonMCPAuthorization, Message: "Sign in to sec", ResponseSchema: actionSchema,
				Metadata: map[string]any{"server": "sec", "authorizationUrl": "https://as.example/authorize?state=s"}},
			{ID: "int-q", Reason: "input_required", Message: "which colour?", ResponseSchema: textSchema},
		},
	}
)

// TestSignInA2AAgentAuthRequired: an A2A sub-agent's auth-required that Baton's own sign-in
// to the agent resolves (its card declares an OAuth flow: the interrupt has a URL) puts the
// task in auth-required like an MCP sign-in; once the principal's sign-in to the agent is
// done the run goes on without a message, the task answered with an empty payload (the
// engine says "done" to the agent with the new token), and the task completes.
func TestSignInA2AAgentAuthRequired(t *testing.T) {
	t.Parallel()
	si := &fakeSignIns{done: map[string]bool{}}
	e, base := serveWith(t, si)
	c := client(t, base, "alice", "rest")

	id, st := untilAuthRequired(t, c, msg("agentsignin"))
	assert.Contains(t, text(st), "please authenticate")
	assert.Contains(t, text(st), "Sign in at https://as.example/authorize?state=a")
	var q map[string]any
	for _, p := range st.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			q = d
		}
	}
	assert.Equal(t, "int-a", q["interruptId"])
	assert.Equal(t, reasonA2AAuthRequired, q["reason"])
	assert.Equal(t, "vault", q["agent"])

	// A sign-in to an MCP server of the same name, or bob's to the agent, changes nothing.
	si.signIn("alice", "vault")
	si.signIn("bob", "a2a:vault")
	polls := si.polled()
	require.Eventually(t, func() bool { return si.polled() >= polls+2 }, 10*time.Second, 10*time.Millisecond)
	e.mu.Lock()
	assert.Empty(t, e.resumes, "not resumed before alice's sign-in to the agent")
	e.mu.Unlock()

	si.signIn("alice", "a2a:vault")
	waitState(t, c, id, a2a.TaskStateCompleted)
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Len(t, e.resumes, 1)
	require.Len(t, e.resumes[0], 1)
	assert.Equal(t, "int-a", e.resumes[0][0].InterruptID)
	assert.Equal(t, agui.ResumeResolved, e.resumes[0][0].Status)
	assert.JSONEq(t, `{}`, string(e.resumes[0][0].Payload))
}

// TestA2AAuthWithoutFlowIsInputRequired: an A2A sub-agent's auth-required that Baton cannot
// see completed (no flow of Baton's: the user must say when they are done) stays
// input-required even with SignIns, since a2asrv refuses messages to an auth-required task;
// the caller's "done" is the answer.
func TestA2AAuthWithoutFlowIsInputRequired(t *testing.T) {
	t.Parallel()
	si := &fakeSignIns{done: map[string]bool{"alice a2a:vault": true}}
	e, base := serveWith(t, si)
	c := client(t, base, "alice", "jsonrpc")
	s := stream(t, c, msg("agentauth"))
	require.Equal(t, a2a.TaskStateInputRequired, s.last.State, "%v", s.states)
	assert.Contains(t, text(s.last), "please authenticate")
	assert.NotContains(t, text(s.last), "Sign in at")

	r := stream(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, s.task, a2a.NewTextPart("done")))
	assert.Equal(t, a2a.TaskStateCompleted, r.last.State, "%v", r.states)
	assert.Equal(t, "answer was done", r.artifact)
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Len(t, e.resumes, 1)
	assert.Equal(t, "int-n", e.resumes[0][0].InterruptID)
	assert.JSONEq(t, `{"text":"done"}`, string(e.resumes[0][0].Payload))
	assert.Zero(t, si.polled(), "an input-required task does not wait for sign-ins")
}

// TestSignInMixedWithQuestionIsInputRequired: a run that waits for a sign-in and for another
// question puts its task in input-required (only a message can answer the question), with
// every question listed: the text of each (the sign-in's URL too) and one DataPart each.
// The sign-in alone does not move the task on; one message answering both does.
func TestSignInMixedWithQuestionIsInputRequired(t *testing.T) {
	t.Parallel()
	si := &fakeSignIns{done: map[string]bool{}}
	e, base := serveWith(t, si)
	c := client(t, base, "alice", "jsonrpc")
	s := stream(t, c, msg("mixed"))
	require.Equal(t, a2a.TaskStateInputRequired, s.last.State, "%v", s.states)
	got := text(s.last)
	assert.Contains(t, got, "Sign in to sec")
	assert.Contains(t, got, "Sign in at https://as.example/authorize?state=s")
	assert.Contains(t, got, "which colour?")
	var ids []any
	for _, p := range s.last.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			ids = append(ids, d["interruptId"])
		}
	}
	assert.Equal(t, []any{"int-s", "int-q"}, ids, "one DataPart per question")
	task, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: s.task.ID})
	require.NoError(t, err)
	assert.Len(t, questionsOf(task), 2, "both questions are the task's open ones")

	// The user signs in; the task still waits for the caller's answer to both.
	si.signIn("alice", "sec")
	r := stream(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, s.task, a2a.NewTextPart("blue")))
	assert.Equal(t, a2a.TaskStateInputRequired, r.last.State, "text alone cannot answer two questions")
	assert.Contains(t, text(r.last), "2 questions are open")

	r = stream(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, s.task,
		a2a.NewDataPart(map[string]any{"interruptId": "int-q", "payload": map[string]any{"text": "blue"}}),
		a2a.NewDataPart(map[string]any{"interruptId": "int-s", "payload": map[string]any{"action": "accept"}})))
	assert.Equal(t, a2a.TaskStateCompleted, r.last.State, "%v", r.states)
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Len(t, e.resumes, 1)
	require.Len(t, e.resumes[0], 2)
	byID := map[string]string{}
	for _, en := range e.resumes[0] {
		byID[en.InterruptID] = string(en.Payload)
	}
	assert.JSONEq(t, `{"text":"blue"}`, byID["int-q"])
	assert.JSONEq(t, `{"action":"accept"}`, byID["int-s"])
}
