package coordinator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/subagent"
)

func TestPendingWork(t *testing.T) {
	retry := func(code string) failure.ToolResult { return failure.ToolResult{Tag: bridge.TagRetry, Code: code} }
	tests := []struct {
		name    string
		results []failure.ToolResult
		want    bool
	}{
		{"no round", nil, false},
		{"bad arguments", []failure.ToolResult{retry("validation_failed")}, true},
		{"all refused", []failure.ToolResult{retry("unknown_action"), retry("invalid_transition"), retry("validation_failed")}, true},
		{"one ran", []failure.ToolResult{retry("validation_failed"), {Tag: bridge.TagOK}}, false},
		{"tool error the model may report", []failure.ToolResult{retry("tool_error")}, false},
		{"policy refusal", []failure.ToolResult{retry("policy_deny")}, false},
		{"a sub-agent's question to relay", []failure.ToolResult{{Tag: bridge.TagInputRequired}}, false},
		{"failed task", []failure.ToolResult{{Tag: bridge.TagFailed}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, failure.PendingWork(tt.results))
		})
	}
}

// A text reply right after a round whose every call was refused as model-fixable is
// no_progress: one corrective instruction, and the model's next reply stands.
func TestTextAfterRefusedRoundIsNoProgress(t *testing.T) {
	m := &scriptModel{steps: []turnStep{
		callStep("c1", "research", `{"task":"x"}`), // no prompt: validation_failed
		textStep("I could not do it."),
		textStep("The research tool needs a prompt; here is what I know."),
	}}
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "x")}
	e := newEngine(t, m, agent)
	evs := startAndCollect(t, e, input("pending"))

	fv := failureValues(evs)
	require.Len(t, fv, 1, "%v", fv)
	assert.Equal(t, failure.KindNoProgress, fv[0].Kind)
	assert.Equal(t, failure.ActionNarrowScope, fv[0].Action)
	assert.Equal(t, agui.OutcomeSuccess, lastEvent(evs).(*agui.RunFinished).Outcome.Type)
	assert.Equal(t, "The research tool needs a prompt; here is what I know.", texts(evs), "the reply that ignored the signal was held back, never shown")
	reqs := m.requests()
	require.Len(t, reqs, 3)
	for _, msg := range reqs[2].Messages {
		assert.NotContains(t, msg.Content, "I could not do it.", "the reply that ignored the signal stays out of the history")
	}
	assert.Contains(t, reqs[2].Messages[0].Content+lastSystem(reqs[2]), "not making progress", "the corrective instruction is in the next call")
	assert.Empty(t, agent.sent)
}

// Text held back after a refused round is shown when the turn calls a tool after all.
func TestHeldTextShownWithToolCall(t *testing.T) {
	m := &scriptModel{steps: []turnStep{
		callStep("c1", "research", `{"task":"x"}`),
		{deltas: []llm.Delta{
			{Text: "Trying again with a prompt."},
			{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "c2", Name: "research", Arguments: `{"prompt":"x"}`}},
			{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}},
		}},
		textStep("Done."),
	}}
	e := newEngine(t, m, &fakeAgent{send: finalResult(subagent.StateCompleted, "found")})
	evs := startAndCollect(t, e, input("held"))
	assert.Empty(t, failureValues(evs))
	assert.Equal(t, "Trying again with a prompt.foundDone.", texts(evs), "the held text, the agent's streamed reply, the answer")
	assert.Len(t, toolResults(evs), 2)
	assert.Equal(t, agui.OutcomeSuccess, lastEvent(evs).(*agui.RunFinished).Outcome.Type)
}

// In model mode the model relays a sub-agent's question as text: that is the answer, not
// a failure.
func TestRelayedQuestionIsNotNoProgress(t *testing.T) {
	m := &scriptModel{steps: []turnStep{
		callStep("c1", "research", `{"prompt":"book a table"}`),
		textStep("The agent asks: which day?"),
	}}
	agent := &fakeAgent{send: finalResult(subagent.StateInputRequired, "Which day?")}
	e := newEngine(t, m, agent, func(c *Config) { c.Agents[0].InputRequired = "model" })
	evs := startAndCollect(t, e, input("relay"))
	res := toolResults(evs)
	require.Len(t, res, 1)
	assert.True(t, strings.HasPrefix(res[0], "[INPUT_REQUIRED:"), res[0])
	assert.Empty(t, failureValues(evs))
	assert.Contains(t, texts(evs), "The agent asks: which day?")
	assert.Len(t, m.requests(), 2)
}

func texts(evs []agui.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if c, ok := e.(*agui.TextMessageContent); ok {
			b.WriteString(c.Delta)
		}
	}
	return b.String()
}

// lastSystem is the text of every system message of req.
func lastSystem(req *llm.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}
