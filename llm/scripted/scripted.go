// Package scripted is the deterministic offline demo model.
//
// It needs no network and no key: it reads the latest turn of the
// conversation and either calls one of the offered tools, chosen by keywords
// in the user's message, or reports the tool results it just received. Every
// text reply starts with "(offline demo model) " so nobody mistakes it for a
// real model. Replies are streamed in several deltas (text in word groups,
// tool arguments in two fragments) so the engine's streaming path runs just
// as it does with a real provider.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/baton-dev/baton/llm"
)

// Prefix starts every text reply of the demo model.
const Prefix = "(offline demo model) "

// maxResultRunes caps how much of a tool result is echoed back.
const maxResultRunes = 400

// wordsPerChunk is how many words go into one streamed text delta.
const wordsPerChunk = 3

// Rule routes a user message to a tool.
type Rule struct {
	// Keywords match the start of a word of the message, case-insensitively
	// ("flight" matches "flights").
	Keywords []string
	// Tool is the tool to call; the rule only applies when it is offered.
	Tool string
	// Args builds the call's arguments from the user's message; nil means {}.
	Args func(userText string) map[string]any
	// Examples are prompts that trigger the rule, offered as suggestions when the tool
	// is offered.
	Examples []string
}

// Config configures the demo model.
type Config struct {
	// Rules route user messages to tools; DefaultRules() when nil.
	Rules []Rule
}

// Model is the scripted demo model. It is safe for concurrent use.
type Model struct {
	rules []Rule
}

var _ llm.Model = (*Model)(nil)

// New builds the demo model.
func New(cfg Config) *Model {
	rules := cfg.Rules
	if rules == nil {
		rules = DefaultRules()
	}
	return &Model{rules: rules}
}

// DefaultRules routes the demo stack's phrases to its agents and MCP tools
// (MCP tools are named <server>__<tool>).
func DefaultRules() []Rule {
	prompt := func(text string) map[string]any { return map[string]any{"prompt": text} }
	return []Rule{
		{Keywords: []string{"trip", "travel", "flight", "holiday"}, Tool: "travel", Args: prompt,
			Examples: []string{"plan a trip to Lisbon"}},
		{Keywords: []string{"research", "report", "find", "fail", "reject", "slow"}, Tool: "research", Args: prompt,
			Examples: []string{"research Go generics", "research something that will fail", "research slow topic"}},
		{Keywords: []string{"deploy"}, Tool: "demo__deploy", Args: func(string) map[string]any { return map[string]any{"service": "web"} },
			Examples: []string{"deploy"}},
		{Keywords: []string{"delete", "remove"}, Tool: "demo__delete_release", Args: deleteArgs,
			Examples: []string{"delete release v1.2.3"}},
		{Keywords: []string{"divide"}, Tool: "demo__divide", Args: divideArgs,
			Examples: []string{"divide 10 by 0"}},
		{Keywords: []string{"count"}, Tool: "demo__count_slowly", Args: countArgs,
			Examples: []string{"count slowly", "count slowly to 60"}},
		{Keywords: []string{"ask"}, Tool: "ask_user", Args: func(text string) map[string]any { return map[string]any{"question": text} }},
	}
}

// Examples returns the example prompts of the rules whose tool is in tools, in rule
// order: the suggestions of a deployment that runs this model.
func Examples(rules []Rule, tools []string) []string {
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t] = true
	}
	var out []string
	for _, r := range rules {
		if offered[r.Tool] {
			out = append(out, r.Examples...)
		}
	}
	return out
}

// countArgs counts to 5 quickly ("count slowly"), or to the number in the text at one
// number a second ("count slowly to 60": long enough to try Stop).
func countArgs(text string) map[string]any {
	if n := numberRE.FindString(text); n != "" {
		if v, err := strconv.Atoi(n); err == nil && v >= 1 {
			return map[string]any{"to": min(v, 1000), "interval_ms": 1000}
		}
	}
	return map[string]any{"to": 5, "interval_ms": 400}
}

var releaseRE = regexp.MustCompile(`v?\d+(?:\.\d+)*`)

// deleteArgs takes the release from the text ("delete release v1.2.3"); v1.0.0 if none.
func deleteArgs(text string) map[string]any {
	rel := releaseRE.FindString(text)
	if rel == "" {
		rel = "v1.0.0"
	}
	return map[string]any{"release": rel}
}

var numberRE = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

// divideArgs takes a and b from the first two numbers in the text; missing
// ones default to 10 and 2.
func divideArgs(text string) map[string]any {
	vals := []float64{10, 2}
	for i, s := range numberRE.FindAllString(text, 2) {
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			vals[i] = v
		}
	}
	return map[string]any{"a": vals[0], "b": vals[1]}
}

var inputRequiredRE = regexp.MustCompile(`^\[INPUT_REQUIRED:task_id=([^\]\s]+)\]`)

// reply is what the model decided to say for one turn.
type reply struct {
	text string
	call *llm.ToolCall
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		var msgs []llm.Message
		var tools []llm.Tool
		if req != nil {
			msgs, tools = req.Messages, req.Tools
		}
		r := m.decide(msgs, tools)

		emit := func(d llm.Delta) bool {
			if err := ctx.Err(); err != nil {
				yield(llm.Delta{}, err)
				return false
			}
			return yield(d, nil)
		}
		out := 0
		finish := llm.FinishStop
		if r.call != nil {
			finish = llm.FinishToolCalls
			a, b := splitHalf(r.call.Arguments)
			if !emit(llm.Delta{ToolCall: &llm.ToolCallDelta{ID: r.call.ID, Name: r.call.Name, Arguments: a}}) ||
				!emit(llm.Delta{ToolCall: &llm.ToolCallDelta{Arguments: b}}) {
				return
			}
			out = len(strings.Fields(r.call.Arguments)) + 1
		} else {
			for _, piece := range wordGroups(r.text, wordsPerChunk) {
				if !emit(llm.Delta{Text: piece}) {
					return
				}
			}
			out = len(strings.Fields(r.text))
		}
		in := 0
		for _, msg := range msgs {
			in += len(strings.Fields(msg.Content))
		}
		emit(llm.Delta{Done: &llm.Completion{FinishReason: finish, Usage: llm.Usage{InputTokens: in, OutputTokens: out}}})
	}
}

// decide routes on the latest turn.
func (m *Model) decide(msgs []llm.Message, tools []llm.Tool) reply {
	if len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleTool {
		return reply{text: reportResults(msgs)}
	}
	user, at := lastUser(msgs)
	if at < 0 {
		return reply{text: m.help(tools)}
	}
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	if tool, taskID, ok := pendingInput(msgs[:at]); ok && offered[tool] {
		return reply{call: m.call(msgs, tool, map[string]any{"prompt": user, "task_id": taskID})}
	}
	if rule, ok := m.match(user, offered); ok {
		args := map[string]any{}
		if rule.Args != nil {
			args = rule.Args(user)
		}
		return reply{call: m.call(msgs, rule.Tool, args)}
	}
	return reply{text: m.help(tools)}
}

// call builds a tool call whose id is unique within the thread: each
// assistant turn adds one message, so their count never repeats.
func (m *Model) call(msgs []llm.Message, tool string, args map[string]any) *llm.ToolCall {
	n := 0
	for _, msg := range msgs {
		if msg.Role == llm.RoleAssistant {
			n++
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte("{}") // Args funcs only build plain JSON values
	}
	return &llm.ToolCall{ID: fmt.Sprintf("call_%d", n), Name: tool, Arguments: string(b)}
}

// match returns the rule whose keyword occurs first in the text among those
// whose tool is offered; ties go to the earlier rule.
func (m *Model) match(text string, offered map[string]bool) (Rule, bool) {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		for _, rule := range m.rules {
			if !offered[rule.Tool] {
				continue
			}
			for _, k := range rule.Keywords {
				if k != "" && strings.HasPrefix(w, strings.ToLower(k)) {
					return rule, true
				}
			}
		}
	}
	return Rule{}, false
}

// lastUser returns the last user message and its position, or -1.
func lastUser(msgs []llm.Message) (string, int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i].Content, i
		}
	}
	return "", -1
}

// pendingInput looks at the most recent tool result since the previous user
// message: if it is an input-required tag, the user's new message answers it,
// and the same tool is called again with the task id.
func pendingInput(before []llm.Message) (tool, taskID string, ok bool) {
	for i := len(before) - 1; i >= 0; i-- {
		switch before[i].Role {
		case llm.RoleUser:
			return "", "", false
		case llm.RoleTool:
			sub := inputRequiredRE.FindStringSubmatch(strings.TrimSpace(before[i].Content))
			if sub == nil {
				return "", "", false
			}
			name := toolName(before[:i], before[i].ToolCallID)
			return name, sub[1], name != ""
		}
	}
	return "", "", false
}

// toolName finds the name of the call with id among the assistant messages.
func toolName(msgs []llm.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, tc := range msgs[i].ToolCalls {
			if tc.ID == id {
				return tc.Name
			}
		}
	}
	return ""
}

// reportResults reports the tool results that follow the last assistant turn.
func reportResults(msgs []llm.Message) string {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == llm.RoleTool {
		start--
	}
	parts := make([]string, 0, len(msgs)-start)
	for _, msg := range msgs[start:] {
		name := toolName(msgs[:start], msg.ToolCallID)
		if name == "" {
			name = "a tool"
		}
		parts = append(parts, describe(name, strings.TrimSpace(msg.Content)))
	}
	return Prefix + strings.Join(parts, "\n\n")
}

var tagRE = regexp.MustCompile(`^\[([A-Z_]+)(?::([^\]\s]*))?\]`)

// stripNotes removes the engine's notes for the model from a result's body: the line that
// records a continued task's question and answer ("(continuation of task …)") is history
// for the model, not something to read out to people.
func stripNotes(body string) string {
	lines := strings.Split(body, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "(continuation of task ") {
			continue
		}
		kept = append(kept, l)
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}

// describe words one tool result for people: the tag (which the tool card still shows
// raw) becomes a sentence, and a retry signal's JSON becomes its message.
func describe(name, result string) string {
	m := tagRE.FindStringSubmatch(result)
	if m == nil {
		return name + " answered: " + trim(result, maxResultRunes)
	}
	body := stripNotes(strings.TrimSpace(result[len(m[0]):]))
	with := func(s string) string {
		if body == "" {
			return s + "."
		}
		return s + ": " + trim(body, maxResultRunes)
	}
	switch m[1] {
	case "COMPLETED", "OK":
		return with(name + " finished")
	case "FAILED":
		return with(name + " could not do it")
	case "REJECTED":
		return with(name + " declined the task")
	case "CANCELED":
		return name + "'s task was cancelled."
	case "INPUT_REQUIRED":
		return with(name + " needs more information")
	case "AUTH_REQUIRED":
		return with(name + " needs you to sign in first")
	case "TIMEOUT":
		return name + " took too long, so its task was cancelled."
	case "UNREACHABLE":
		return name + " cannot be reached right now. Try again later."
	case "ERROR":
		return with(name + " reported an error")
	case "ANSWERED":
		return with("You answered")
	case "DECLINED":
		return "You declined, so " + name + " did not run."
	case "RETRY":
		var sig struct {
			Message      string `json:"message"`
			ErrorMessage string `json:"error_message"`
		}
		_ = json.Unmarshal([]byte(body), &sig)
		why := sig.ErrorMessage
		if why == "" {
			why = sig.Message
		}
		if why == "" {
			return name + " could not run that request."
		}
		return name + " could not run that request: " + trim(why, maxResultRunes)
	default:
		return name + " answered: " + trim(body, maxResultRunes)
	}
}

func (m *Model) help(tools []llm.Tool) string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	list := strings.Join(names, ", ")
	if list == "" {
		list = "(no tools are available)"
	}
	out := Prefix + "I can delegate to: " + list + "."
	if ex := Examples(m.rules, names); len(ex) > 0 {
		out += " Try: '" + strings.Join(ex, "', '") + "'."
	}
	return out
}

func trim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "… (truncated)"
}

// wordGroups cuts s into pieces of n words each (with their spacing), whose
// concatenation is s.
func wordGroups(s string, n int) []string {
	var out []string
	words := 0
	start := 0
	inWord := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			if words == n {
				out = append(out, s[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func splitHalf(s string) (string, string) {
	r := []rune(s)
	h := len(r) / 2
	return string(r[:h]), string(r[h:])
}
