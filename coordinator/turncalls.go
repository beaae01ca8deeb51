package coordinator

import "github.com/baton-dev/baton/llm"

// turnCalls are the tool calls of a model turn as their deltas arrive: each call's
// arguments kept as deltas (textParts) and the text message streamed just before it.
type turnCalls struct {
	calls   []llm.ToolCall
	args    []textParts
	byIndex map[int]int
	// parents holds, per call, the text message streamed just before it.
	parents []string
}

// add applies a delta and reports whether it began a new call. A new call whose id is
// unusable (reused reports true for it) gets an id of its own: some OpenAI-compatible
// servers number calls per turn (call_0 every time), and a retried attempt may repeat the
// failed one's ids; a repeated id would merge two calls in the client.
func (t *turnCalls) add(tc *llm.ToolCallDelta, textID string, reused func(id string) bool) bool {
	if t.byIndex == nil {
		t.byIndex = map[int]int{}
	}
	i, seen := t.byIndex[tc.Index]
	if !seen {
		id := tc.ID
		if id == "" || reused(id) {
			id = newID("call")
		}
		t.calls = append(t.calls, llm.ToolCall{ID: id, Name: tc.Name})
		t.args = append(t.args, textParts{})
		i = len(t.calls) - 1
		t.byIndex[tc.Index] = i
		t.parents = append(t.parents, textID)
	}
	t.args[i].add(tc.Arguments)
	return !seen
}

// done returns the calls with their whole arguments.
func (t *turnCalls) done() []llm.ToolCall {
	for i := range t.calls {
		t.calls[i].Arguments = t.args[i].String()
	}
	return t.calls
}
