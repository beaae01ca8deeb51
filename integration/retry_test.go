package integration

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// cutOnceModel answers every conversation with text and a call of the frontend tool "show".
// The first attempt of each conversation is cut in the middle of the call's arguments; the
// retry, with the same provider call id, completes.
type cutOnceModel struct {
	mu   sync.Mutex
	seen map[string]int
}

const cutText = "Let me show it."

func (m *cutOnceModel) handle(req fakellm.Request) fakellm.Reply {
	key := req.Last().Content
	m.mu.Lock()
	m.seen[key]++
	n := m.seen[key]
	m.mu.Unlock()
	rep := fakellm.Reply{Text: cutText, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "show", Arguments: `{"prompt": "ok"}`}}}
	if n == 1 {
		// role chunk, the text's words, the call's head and the first half of its
		// arguments; the second half never comes.
		rep.CutAfter = 1 + len(fakellm.SplitWords(cutText)) + 2
	}
	return rep
}

func (m *cutOnceModel) attempts(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[key]
}

// A model stream cut in the middle of a tool call, then retried: both official clients see
// one call, under an id the failed attempt did not use, closed, with unmerged arguments, and
// their message history holds exactly that call.
func TestCutToolCallRetriedCleanly(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	m := &cutOnceModel{seen: map[string]int{}}
	model := fakellm.Start(m.handle)
	t.Cleanup(model.Close)
	coord := startCoordinator(t, testConfig{LLMURL: model.URL}.yaml())

	for _, lane := range []string{"v1", "legacy"} {
		t.Run(lane, func(t *testing.T) {
			text := "cut-" + lane
			job := userJob("cut", text)
			job["tools"] = []any{map[string]any{"name": "show", "description": "show a prompt to the user",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"prompt": map[string]any{"type": "string"}}}}}
			r := runAGUIClient(t, lane, coord+"/agui", job)
			assertCleanClientRun(t, r)
			require.Equal(t, 2, m.attempts(text), "the cut attempt was retried once")

			starts := eventsOfType(r.Events, "TOOL_CALL_START")
			require.Len(t, starts, 1, "only the completed attempt's call is streamed: %v", eventTypes(r.Events))
			id, _ := starts[0]["toolCallId"].(string)
			assert.NotEqual(t, "call_1", id, "the retry does not reuse the failed attempt's id")
			assert.Len(t, eventsOfType(r.Events, "TOOL_CALL_END"), 1, "the call is closed")
			for _, ev := range eventsOfType(r.Events, "TOOL_CALL_ARGS") {
				assert.Equal(t, id, ev["toolCallId"])
			}

			// What the client assembled: one call, valid arguments, nothing merged.
			type call struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			}
			var calls []call
			for _, msg := range r.Messages {
				raw, err := json.Marshal(msg["toolCalls"])
				require.NoError(t, err)
				var cs []call
				if string(raw) != "null" {
					require.NoError(t, json.Unmarshal(raw, &cs))
				}
				calls = append(calls, cs...)
			}
			require.Len(t, calls, 1, "the client's history has one call: %v", r.Messages)
			assert.Equal(t, id, calls[0].ID)
			assert.Equal(t, "show", calls[0].Function.Name)
			assert.JSONEq(t, `{"prompt": "ok"}`, calls[0].Function.Arguments)
			assert.False(t, strings.Contains(calls[0].Function.Arguments, `"o{`), "no merged arguments")
		})
	}
}
