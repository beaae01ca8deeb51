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
		{Keywords: []string{"trip", "travel", "flight", "holiday"}, Tool: "travel", Args: prompt},
		{Keywords: []string{"research", "report", "find", "fail", "reject", "slow"}, Tool: "research", Args: prompt},
		{Keywords: []string{"deploy"}, Tool: "demo__deploy", Args: func(string) map[string]any { return map[string]any{"service": "web"} }},
		{Keywords: []string{"divide"}, Tool: "demo__divide", Args: divideArgs},
		{Keywords: []string{"count"}, Tool: "demo__count_slowly", Args: func(string) map[string]any { return map[string]any{"to": 5, "interval_ms": 400} }},
		{Keywords: []string{"ask"}, Tool: "ask_user", Args: func(text string) map[string]any { return map[string]any{"question": text} }},
	}
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
		return reply{text: help(tools)}
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
	return reply{text: help(tools)}
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
		parts = append(parts, name+" answered:\n"+trim(strings.TrimSpace(msg.Content), maxResultRunes))
	}
	return Prefix + strings.Join(parts, "\n\n")
}

func help(tools []llm.Tool) string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	list := strings.Join(names, ", ")
	if list == "" {
		list = "(no tools are available)"
	}
	return Prefix + "I can delegate to: " + list +
		". Try: 'plan a trip to Lisbon', 'research Go generics', 'divide 10 by 0', 'count slowly', 'deploy'."
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
