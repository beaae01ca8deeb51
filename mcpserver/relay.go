package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/subagent"
)

// maxAnswerBytes bounds the answer text a call keeps: memory stays bounded whatever the
// model or an agent writes.
const maxAnswerBytes = 4 << 20

// maxProgressText bounds the sub-agent text quoted in one progress message.
const maxProgressText = 200

// Names of Baton's CUSTOM events the surface reads (DESIGN §8).
const eventHandoff = "baton.handoff"

// eventUsage is the engine's CUSTOM event of what a run a calling Baton started has used
// so far (its value: {inputTokens, outputTokens, costUsd}).
const eventUsage = "baton.usage"

// relay reads one run's AG-UI events: the answer, the results of the run's own tool
// calls, its end, and a progress message for the events a client would want to see.
type relay struct {
	names    map[string]string // sub-agent run id → its name
	texts    map[string]string // sub-agent run id → the tail of its text
	top      map[string]bool   // top-level assistant messages
	answer   strings.Builder
	cut      bool
	results  []string // the run's own tool results, in order
	resultOf []string // the tool call id of each of results
	files    *files   // the files of the last delegation that had any (at most one kept: memory stays bounded)
	handoff  string
	usage    *subagent.Usage // the run's last usage report (a run a calling Baton started)

	ended      bool
	endedAt    int64 // the terminal event's timestamp (Unix ms), when it has one
	cancelled  bool
	runErr     *agui.RunError
	interrupts []agui.Interrupt
}

// eventBudgetWarning is the engine's CUSTOM event of a budget that passed its warn_at.
const eventBudgetWarning = "baton.budget_warning"

func newRelay() *relay {
	return &relay{names: map[string]string{}, texts: map[string]string{}, top: map[string]bool{}}
}

// event reads one event and returns the progress message it makes ("" for none).
func (r *relay) event(ev agui.Event) string {
	switch e := ev.(type) {
	case *agui.SubagentStarted:
		r.names[e.SubagentRunID] = e.Name
		return e.Name + ": started"
	case *agui.SubagentFinished:
		return r.name(e.SubagentRunID) + ": finished"
	case *agui.SubagentError:
		return r.name(e.SubagentRunID) + ": " + oneLine(e.Message)
	case *agui.ToolCallStart:
		if e.SubagentRunID == "" {
			return "calling " + e.ToolCallName
		}
	case *agui.TextMessageStart:
		if e.SubagentRunID == "" && (e.Role == "" || e.Role == "assistant") {
			r.top[e.MessageID] = true
			if r.answer.Len() > 0 {
				r.write("\n\n")
			}
		}
	case *agui.TextMessageContent:
		if e.SubagentRunID != "" {
			t := r.texts[e.SubagentRunID] + e.Delta
			if len(t) > maxProgressText {
				t = t[len(t)-maxProgressText:]
			}
			r.texts[e.SubagentRunID] = t
			return r.name(e.SubagentRunID) + ": " + oneLine(t)
		}
		if r.top[e.MessageID] {
			r.write(e.Delta)
		}
	case *agui.ActivitySnapshot:
		if msg := activityText(e.Content); msg != "" {
			if e.SubagentRunID != "" {
				return r.name(e.SubagentRunID) + ": " + msg
			}
			return msg
		}
	case *agui.ToolCallResult:
		if e.SubagentRunID == "" {
			r.results = append(r.results, e.Content)
			r.resultOf = append(r.resultOf, e.ToolCallID)
		}
	case *agui.Custom:
		return r.custom(e)
	case *agui.RunFinished:
		r.ended, r.endedAt = true, e.Timestamp
		if e.Outcome != nil {
			switch e.Outcome.Type {
			case agui.OutcomeInterrupt:
				r.interrupts = e.Outcome.Interrupts
			case agui.OutcomeCancelled:
				r.cancelled = true
			}
		}
	case *agui.RunError:
		r.ended, r.endedAt = true, e.Timestamp
		if e.Code == "CANCELLED" {
			r.cancelled = true
		} else {
			r.runErr = e
		}
	}
	return ""
}

// custom reads one of the engine's CUSTOM events and returns its progress message.
func (r *relay) custom(e *agui.Custom) string {
	switch e.Name {
	case eventFiles:
		if fs, ok := readFiles(e.Value); ok {
			r.files = &fs
		}
	case eventHandoff:
		var h struct {
			Rationale string `json:"rationale"`
		}
		if b, err := json.Marshal(e.Value); err == nil && json.Unmarshal(b, &h) == nil {
			r.handoff = h.Rationale
		}
	case eventUsage:
		// Cumulative for the run: the last one is what the run used.
		if u, err := subagent.ParseCallUsage(e.Value); err == nil && u != nil {
			r.usage = u
		}
	case eventBudgetWarning:
		// A budget past its warn_at reaches the MCP client as a progress message, as
		// A2A callers get it as a working status (contract §7).
		if b, err := json.Marshal(e.Value); err == nil && len(b) > 0 && b[0] == '{' {
			return "[BUDGET_WARNING] " + oneLine(string(b))
		}
	}
	return ""
}

func (r *relay) name(subID string) string {
	if n := r.names[subID]; n != "" {
		return n
	}
	return "a sub-agent"
}

func (r *relay) write(s string) {
	if r.cut {
		return
	}
	if r.answer.Len()+len(s) > maxAnswerBytes {
		r.cut = true
		s = s[:maxAnswerBytes-r.answer.Len()] + "… (truncated)"
	}
	r.answer.WriteString(s)
}

// activityText is what an activity says, when it says it as text.
func activityText(content map[string]any) string {
	for _, k := range []string{"message", "status", "title"} {
		if s, ok := content[k].(string); ok && s != "" {
			return oneLine(s)
		}
	}
	return ""
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxProgressText {
		s = s[:maxProgressText] + "…"
	}
	return s
}

// outcome is how a run ended, as the surface answers it.
type outcome struct {
	answer     string
	results    []string
	files      *files // the files of the last result's delegation
	handoff    string
	cancelled  bool
	runErr     *agui.RunError
	interrupts []agui.Interrupt
	usage      *subagent.Usage
}

func (r *relay) outcome() *outcome {
	o := &outcome{answer: r.answer.String(), results: r.results, handoff: r.handoff,
		cancelled: r.cancelled, runErr: r.runErr, interrupts: r.interrupts, usage: r.usage}
	if n := len(r.resultOf); n > 0 && r.files != nil && r.files.ToolCallID == r.resultOf[n-1] {
		o.files = r.files
	}
	return o
}

// withUsage puts what the run used in res's _meta (baton/usage), for a calling Baton to
// count against its own run (contract §7): one report per result, which answers one call.
func (o *outcome) withUsage(res *mcp.CallToolResult) *mcp.CallToolResult {
	if o.usage == nil || res == nil {
		return res
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	u := *o.usage
	u.MessageID = ""
	md := u.Metadata()
	delete(md, "messageId")
	res.Meta[subagent.UsageKey] = md
	return res
}

// result is the tool result of a run that ended without a question.
func (o *outcome) result(t tool) *mcp.CallToolResult {
	switch {
	case o.cancelled:
		return errorResult(bridge.TagCanceled, "The run was stopped.")
	case o.runErr != nil:
		msg := o.runErr.Message
		if msg == "" {
			msg = "The run failed."
		}
		if o.runErr.Code != "" {
			msg += " (" + o.runErr.Code + ")"
		}
		return errorResult(bridge.TagError, msg)
	case t.agent != "":
		return agentResult(t, o.results, o.files)
	case o.handoff != "":
		return errorResult(bridge.TagFailed, o.handoff)
	}
	answer := o.answer
	if strings.TrimSpace(answer) == "" {
		answer = "(Baton gave no answer.)"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}}
}

// agentResult is the result of an agent tool: the outcome of its one delegation, as the
// engine tagged it (the closed set of DESIGN §5). Completed: the agent's text; anything
// else: isError, with the tag and the agent's words.
func agentResult(t tool, results []string, fs *files) *mcp.CallToolResult {
	if len(results) == 0 {
		// A repeated answer ends so too: it was delivered once, by the first resume.
		return errorResult(bridge.TagError, fmt.Sprintf("The run ended without a result from the agent %q (an answer sent twice is delivered once).", t.name))
	}
	res := results[len(results)-1]
	tag, _, ok := bridge.ParseTag(res)
	_, body, _ := strings.Cut(res, "\n")
	if ok && (tag == bridge.TagCompleted || tag == bridge.TagOK) {
		content := []mcp.Content{&mcp.TextContent{Text: body}}
		if fs != nil {
			content = append(content, fileContent(*fs)...)
		}
		return &mcp.CallToolResult{
			Content:           content,
			StructuredContent: map[string]any{"status": "completed", "tag": tag},
		}
	}
	if !ok {
		tag = bridge.TagError
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: res}},
		StructuredContent: map[string]any{"status": strings.ToLower(tag), "tag": tag},
	}
}
