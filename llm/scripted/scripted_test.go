package scripted

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/llmtest"
	"github.com/baton-dev/baton/llm"
)

func tools(names ...string) []llm.Tool {
	out := make([]llm.Tool, 0, len(names))
	for _, n := range names {
		out = append(out, llm.Tool{Name: n, Parameters: map[string]any{"type": "object"}})
	}
	return out
}

var demoTools = tools("travel", "research", "demo__deploy", "demo__divide", "demo__count_slowly", "ask_user")

func sys() llm.Message { return llm.Message{Role: llm.RoleSystem, Content: "You are Baton."} }

func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }

func callMsg(id, name, args string) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: args}}}
}

func result(id, content string) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: content}
}

func assistant(s string) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: s} }

func TestRouting(t *testing.T) {
	t.Parallel()
	const helpAll = Prefix + "I can delegate to: travel, research, demo__deploy, demo__divide, demo__count_slowly, ask_user." +
		" Try: 'plan a trip to Lisbon', 'research Go generics', 'research something that will fail', 'research slow topic', 'deploy', 'divide 10 by 0', 'count slowly', 'count slowly to 60'."
	tests := []struct {
		name     string
		msgs     []llm.Message
		tools    []llm.Tool
		wantCall *llm.ToolCall // arguments compared as JSON
		wantText string
	}{
		{
			name:     "trip goes to travel",
			msgs:     []llm.Message{sys(), user("Plan a trip to Lisbon")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "travel", Arguments: `{"prompt":"Plan a trip to Lisbon"}`},
		},
		{
			name:     "plural keyword still matches",
			msgs:     []llm.Message{user("cheap flights please")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "travel", Arguments: `{"prompt":"cheap flights please"}`},
		},
		{
			name:     "research",
			msgs:     []llm.Message{sys(), user("research Go generics")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "research", Arguments: `{"prompt":"research Go generics"}`},
		},
		{
			name:     "fail goes to research",
			msgs:     []llm.Message{user("please FAIL this one")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "research", Arguments: `{"prompt":"please FAIL this one"}`},
		},
		{
			name:     "deploy goes to the MCP tool with empty args",
			msgs:     []llm.Message{user("deploy it")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "demo__deploy", Arguments: `{"service":"web"}`},
		},
		{
			name:     "divide parses the first two numbers",
			msgs:     []llm.Message{user("divide 10 by 0 and then 7")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "demo__divide", Arguments: `{"a":10,"b":0}`},
		},
		{
			name:     "divide with decimals and negatives",
			msgs:     []llm.Message{user("divide -7.5 by 2.5")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "demo__divide", Arguments: `{"a":-7.5,"b":2.5}`},
		},
		{
			name:     "divide without numbers uses defaults",
			msgs:     []llm.Message{user("divide something")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "demo__divide", Arguments: `{"a":10,"b":2}`},
		},
		{
			name:     "earliest keyword wins over rule order",
			msgs:     []llm.Message{user("count slowly")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "demo__count_slowly", Arguments: `{"interval_ms":400,"to":5}`},
		},
		{
			name:     "ask",
			msgs:     []llm.Message{user("ask me my name")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_0", Name: "ask_user", Arguments: `{"question":"ask me my name"}`},
		},
		{
			name:     "rule skipped when its tool is not offered",
			msgs:     []llm.Message{user("plan a trip, or research it")},
			tools:    tools("research"),
			wantCall: &llm.ToolCall{ID: "call_0", Name: "research", Arguments: `{"prompt":"plan a trip, or research it"}`},
		},
		{
			name:     "no match lists the tools",
			msgs:     []llm.Message{sys(), user("hello there")},
			tools:    demoTools,
			wantText: helpAll,
		},
		{
			name:     "no tools at all",
			msgs:     []llm.Message{user("plan a trip")},
			wantText: Prefix + "I can delegate to: (no tools are available).",
		},
		{
			name:     "no user message",
			msgs:     []llm.Message{sys()},
			tools:    tools("travel"),
			wantText: Prefix + "I can delegate to: travel. Try: 'plan a trip to Lisbon'.",
		},
		{
			name: "tool result is reported",
			msgs: []llm.Message{sys(), user("research Go generics"),
				callMsg("call_0", "research", `{"prompt":"research Go generics"}`),
				result("call_0", "[COMPLETED]\nGenerics landed in Go 1.18.\n")},
			tools:    demoTools,
			wantText: Prefix + "research finished: Generics landed in Go 1.18.",
		},
		{
			name: "several results are all reported",
			msgs: []llm.Message{user("x"),
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "travel"}, {ID: "call_1", Name: "demo__divide"}}},
				result("call_0", "[COMPLETED]\nbooked"), result("call_1", "[ERROR]\ndivision by zero")},
			tools:    demoTools,
			wantText: Prefix + "travel finished: booked\n\ndemo__divide reported an error: division by zero",
		},
		{
			name: "long result is trimmed",
			msgs: []llm.Message{user("research"), callMsg("call_0", "research", `{}`),
				result("call_0", "[COMPLETED]\n"+strings.Repeat("a", 1000))},
			tools:    demoTools,
			wantText: Prefix + "research finished: " + strings.Repeat("a", maxResultRunes) + "… (truncated)",
		},
		{
			name: "answer to input-required continues the task",
			msgs: []llm.Message{sys(), user("plan a trip to Lisbon"),
				callMsg("call_0", "travel", `{"prompt":"plan a trip to Lisbon"}`),
				result("call_0", "[INPUT_REQUIRED:task_id=task-42]\nWhich dates?"),
				assistant(Prefix + "travel answered:\n[INPUT_REQUIRED:task_id=task-42]\nWhich dates?"),
				user("May 3 to 7")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_2", Name: "travel", Arguments: `{"prompt":"May 3 to 7","task_id":"task-42"}`},
		},
		{
			name: "input-required answer wins over keywords",
			msgs: []llm.Message{user("trip"), callMsg("call_0", "travel", `{}`),
				result("call_0", "[INPUT_REQUIRED:task_id=t1]\nWhen?"), user("research says next week")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_1", Name: "travel", Arguments: `{"prompt":"research says next week","task_id":"t1"}`},
		},
		{
			name: "input-required from an earlier exchange is not reused",
			msgs: []llm.Message{user("trip"), callMsg("call_0", "travel", `{}`),
				result("call_0", "[INPUT_REQUIRED:task_id=t1]\nWhen?"), assistant(Prefix + "…"),
				user("never mind"), assistant(Prefix + "…"), user("hello")},
			tools:    demoTools,
			wantText: helpAll,
		},
		{
			name: "completed result does not continue",
			msgs: []llm.Message{user("trip"), callMsg("call_0", "travel", `{}`),
				result("call_0", "[COMPLETED]\nbooked"), assistant(Prefix + "done"), user("deploy now")},
			tools:    demoTools,
			wantCall: &llm.ToolCall{ID: "call_2", Name: "demo__deploy", Arguments: `{"service":"web"}`},
		},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, done, err := llmtest.Collect(m.Stream(context.Background(), &llm.Request{Messages: tt.msgs, Tools: tt.tools}))
			require.NoError(t, err)
			require.NotNil(t, done)
			if tt.wantCall != nil {
				assert.Equal(t, llm.FinishToolCalls, done.FinishReason)
				assert.Empty(t, msg.Content)
				require.Len(t, msg.ToolCalls, 1)
				got := msg.ToolCalls[0]
				assert.Equal(t, tt.wantCall.ID, got.ID)
				assert.Equal(t, tt.wantCall.Name, got.Name)
				assert.JSONEq(t, tt.wantCall.Arguments, got.Arguments)
				return
			}
			assert.Equal(t, llm.FinishStop, done.FinishReason)
			assert.Empty(t, msg.ToolCalls)
			assert.Equal(t, tt.wantText, msg.Content)
		})
	}
}

func TestCustomRules(t *testing.T) {
	t.Parallel()
	m := New(Config{Rules: []Rule{{Keywords: []string{"Weather"}, Tool: "forecast",
		Args: func(text string) map[string]any { return map[string]any{"q": strings.ToUpper(text)} }}}})
	msg, _, err := llmtest.Collect(m.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{user("weather in Oslo")},
		Tools:    tools("forecast", "travel"),
	}))
	require.NoError(t, err)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "forecast", msg.ToolCalls[0].Name)
	assert.JSONEq(t, `{"q":"WEATHER IN OSLO"}`, msg.ToolCalls[0].Arguments)

	// The default rules are replaced, not extended.
	msg, _, err = llmtest.Collect(m.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{user("plan a trip")},
		Tools:    tools("forecast", "travel"),
	}))
	require.NoError(t, err)
	assert.Empty(t, msg.ToolCalls)
}

func TestStreamShape(t *testing.T) {
	t.Parallel()
	m := New(Config{})

	t.Run("text in word groups", func(t *testing.T) {
		var texts []string
		var done *llm.Completion
		for d, err := range m.Stream(context.Background(), &llm.Request{Messages: []llm.Message{user("hello")}, Tools: demoTools}) {
			require.NoError(t, err)
			require.Nil(t, d.ToolCall)
			if d.Done != nil {
				done = d.Done
				continue
			}
			require.Nil(t, done, "nothing after Done")
			texts = append(texts, d.Text)
		}
		require.NotNil(t, done)
		assert.Greater(t, len(texts), 2)
		assert.True(t, strings.HasPrefix(strings.Join(texts, ""), Prefix))
		for _, piece := range texts[:len(texts)-1] {
			assert.Len(t, strings.Fields(piece), wordsPerChunk, "piece %q", piece)
		}
		assert.Positive(t, done.Usage.OutputTokens)
	})

	t.Run("tool call in two fragments", func(t *testing.T) {
		var deltas []llm.ToolCallDelta
		for d, err := range m.Stream(context.Background(), &llm.Request{Messages: []llm.Message{user("research Go")}, Tools: demoTools}) {
			require.NoError(t, err)
			require.Empty(t, d.Text)
			if d.ToolCall != nil {
				deltas = append(deltas, *d.ToolCall)
			}
		}
		require.Len(t, deltas, 2)
		assert.Equal(t, "call_0", deltas[0].ID)
		assert.Equal(t, "research", deltas[0].Name)
		assert.NotEmpty(t, deltas[0].Arguments)
		assert.Equal(t, llm.ToolCallDelta{Arguments: deltas[1].Arguments}, deltas[1], "later fragments carry only arguments")
		var args map[string]any
		require.NoError(t, json.Unmarshal([]byte(deltas[0].Arguments+deltas[1].Arguments), &args))
		assert.Equal(t, map[string]any{"prompt": "research Go"}, args)
	})
}

func TestStreamCancellation(t *testing.T) {
	t.Parallel()
	m := New(Config{})
	req := &llm.Request{Messages: []llm.Message{user("hello")}, Tools: demoTools}

	t.Run("before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n := 0
		var final error
		for _, err := range m.Stream(ctx, req) {
			n++
			final = err
		}
		assert.Equal(t, 1, n)
		assert.ErrorIs(t, final, context.Canceled)
	})

	t.Run("between deltas", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []llm.Delta
		var final error
		for d, err := range m.Stream(ctx, req) {
			if err != nil {
				final = err
				break
			}
			got = append(got, d)
			cancel()
		}
		require.Len(t, got, 1)
		assert.NotEmpty(t, got[0].Text)
		assert.ErrorIs(t, final, context.Canceled)
	})
}

func TestWordGroups(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"one", 3, []string{"one"}},
		{"a b c d e", 2, []string{"a b ", "c d ", "e"}},
		{"a  b\nc d", 3, []string{"a  b\nc ", "d"}},
		{"  lead", 1, []string{"  lead"}},
	}
	for _, tt := range tests {
		got := wordGroups(tt.in, tt.n)
		assert.Equal(t, tt.want, got, "%q", tt.in)
		assert.Equal(t, tt.in, strings.Join(got, ""))
	}
}

func TestDescribeResults(t *testing.T) {
	t.Parallel()
	tests := []struct{ result, want string }{
		{"[COMPLETED]\nBooked.", "travel finished: Booked."},
		{"[FAILED]\nno flights", "travel could not do it: no flights"},
		{"[REJECTED]", "travel declined the task."},
		{"[CANCELED]\nby user", "travel's task was cancelled."},
		{"[INPUT_REQUIRED:task_id=t-1]\nWhich dates?", "travel needs more information: Which dates?"},
		{"[AUTH_REQUIRED:task_id=t-1]\nsign in", "travel needs you to sign in first: sign in"},
		{"[TIMEOUT:task_id=t-1]", "travel took too long, so its task was cancelled."},
		{"[UNREACHABLE]\nagent down", "travel cannot be reached right now. Try again later."},
		{"[OK]\n{\"quotient\":5}", "travel finished: {\"quotient\":5}"},
		{"[ERROR]\nboom", "travel reported an error: boom"},
		{"[ANSWERED] blue", "You answered: blue"},
		{"[DECLINED]", "You declined, so travel did not run."},
		{`[RETRY:tool_error] {"error":"tool_error","requested":"travel","message":"The tool reported an error.","valid_next_actions":["travel"],"error_message":"division by zero","attempts_left":1}`,
			"travel could not run that request: division by zero"},
		{`[RETRY:unknown_action] {"error":"unknown_action","message":"There is no tool named x."}`, "travel could not run that request: There is no tool named x."},
		{"plain text", "travel answered: plain text"},
		// A continued task's note is for the model's history, not for people.
		{"[COMPLETED]\nBooked for 12-19 May.\n\n(continuation of task 3f1c2a9e-0b7d-4c55-9a51-6d2f1e0c8b44: the agent asked \"Which dates?\"; the user answered \"12-19 May\")",
			"travel finished: Booked for 12-19 May."},
	}
	for _, tt := range tests {
		got := describe("travel", tt.result)
		assert.Equal(t, tt.want, got, tt.result)
		assert.NotContains(t, got, "{\"error\"", "no raw retry JSON for people")
	}
}

func TestExamplesFollowTheOfferedTools(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"divide 10 by 0"}, Examples(DefaultRules(), []string{"demo__divide", "other"}))
	assert.Empty(t, Examples(DefaultRules(), []string{"files__read"}), "a deployment without the demo tools gets no demo prompts")
	assert.Equal(t, map[string]any{"to": 60, "interval_ms": 1000}, countArgs("count slowly to 60"))
	assert.Equal(t, map[string]any{"to": 5, "interval_ms": 400}, countArgs("count slowly"))
	assert.Equal(t, map[string]any{"release": "v1.2.3"}, deleteArgs("delete release v1.2.3"))
}
