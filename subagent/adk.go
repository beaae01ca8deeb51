package subagent

import (
	"fmt"
	"sort"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// Google ADK's way of asking (design/agent-conventions.md). An ADK agent whose long-running
// tool waits for a person ends the task input-required with a status message of DataParts:
// the genai FunctionCall ({id, name, args}) marked metadata adk_type "function_call" and
// adk_is_long_running true, usually followed by its pending FunctionResponse (adk_type
// "function_response"). It accepts as the answer only a DataPart {id, name, response:
// {…object…}} marked adk_type "function_response" for every pending call id; a text reply
// leaves the task input-required, forever.
const (
	adkTypeKey        = "adk_type"
	adkLongRunningKey = "adk_is_long_running"
	adkFunctionCall   = "function_call"
	adkFunctionResp   = "function_response"
)

// adkCall is one pending long-running function call of an ADK agent.
type adkCall struct {
	ID   string
	Name string
	Args map[string]any
}

// adkMeta returns the part's adk_type ("" when it has none).
func adkMeta(p *sdk.Part) string {
	if p == nil || p.Metadata == nil {
		return ""
	}
	t, _ := p.Metadata[adkTypeKey].(string)
	return t
}

// adkCallOf returns the long-running function call a part carries, if it is one.
func adkCallOf(p *sdk.Part) (adkCall, bool) {
	if adkMeta(p) != adkFunctionCall {
		return adkCall{}, false
	}
	if lr, _ := p.Metadata[adkLongRunningKey].(bool); !lr {
		return adkCall{}, false
	}
	d, ok := p.Content.(sdk.Data)
	if !ok {
		return adkCall{}, false
	}
	m, _ := d.Value.(map[string]any)
	id, _ := m["id"].(string)
	name, _ := m["name"].(string)
	if id == "" {
		return adkCall{}, false
	}
	args, _ := m["args"].(map[string]any)
	return adkCall{ID: id, Name: name, Args: args}, true
}

// adkPendingCalls returns the long-running function calls of a status message, each id
// once, in order.
func adkPendingCalls(m *sdk.Message) []adkCall {
	if m == nil {
		return nil
	}
	var out []adkCall
	seen := map[string]bool{}
	for _, p := range m.Parts {
		if c, ok := adkCallOf(p); ok && !seen[c.ID] {
			seen[c.ID] = true
			out = append(out, c)
		}
	}
	return out
}

// questionKeys are the argument names whose string value is the question itself.
var questionKeys = []string{"question", "prompt", "message", "text", "query"}

// adkQuestionText renders a long-running call as the question a person reads: the
// question argument when there is one, else the tool name with its arguments as
// "name: value" lines (never the raw JSON of the part).
func adkQuestionText(c adkCall) string {
	for _, k := range questionKeys {
		if s, ok := c.Args[k].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	var b strings.Builder
	name := c.Name
	if name == "" {
		name = "the agent"
	}
	fmt.Fprintf(&b, "%s asks for input", name)
	keys := make([]string, 0, len(c.Args))
	for k := range c.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s: %v", k, c.Args[k])
	}
	return b.String()
}

// adkAnswerParts builds the answer ADK accepts: one function_response DataPart per pending
// call, with the call's id and name and the person's text as {"answer": text} (the
// response must be a JSON object; ADK prescribes no shape inside it).
func adkAnswerParts(calls []adkCall, text string) []*sdk.Part {
	parts := make([]*sdk.Part, 0, len(calls))
	for _, c := range calls {
		p := sdk.NewDataPart(map[string]any{"id": c.ID, "name": c.Name, "response": map[string]any{"answer": text}})
		p.SetMeta(adkTypeKey, adkFunctionResp)
		parts = append(parts, p)
	}
	return parts
}
