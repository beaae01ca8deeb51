package coordinator

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/dispatch"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/internal/toolname"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// toolset is the set of tools offered to the model in one run. llm, agents, mcp and
// backend may be those of base, shared with other runs: never modified in place.
type toolset struct {
	base     *backendTools
	llm      []llm.Tool
	agents   map[string]*Agent
	mcp      map[string]mcpclient.Tool
	frontend map[string]agui.Tool
	// backend lists the names the coordinator executes itself, sorted.
	backend []string
	// hidden holds the backend tools the policy denies: they are not offered to the model
	// (a call to one is refused with policy_deny; see newGuard).
	hidden map[string]bool
}

func (t *toolset) isFrontend(name string) bool {
	_, ok := t.frontend[name]
	return ok
}

func (t *toolset) hasMCP(name string) bool {
	_, ok := t.mcp[name]
	return ok
}

// restrict hides from the model the tools that permitted refuses.
func (t *toolset) restrict(permitted func(name string) bool) {
	t.hidden = map[string]bool{}
	offered := make([]llm.Tool, 0, len(t.llm)) // t.llm may be shared
	for _, lt := range t.llm {
		if !permitted(lt.Name) {
			t.hidden[lt.Name] = true
			continue
		}
		offered = append(offered, lt)
	}
	t.llm = offered
}

// agentParameters is the JSON Schema of every sub-agent tool (DESIGN §5).
func agentParameters() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"prompt":  map[string]any{"type": "string", "description": "What the sub-agent should do, or the answer to its question."},
			"task_id": map[string]any{"type": "string", "description": "Only to continue a task that waits for input: the task_id from its [INPUT_REQUIRED:task_id=…] or [AUTH_REQUIRED:task_id=…] tag."},
		},
		"required":             []string{"prompt"},
		"additionalProperties": false,
	}
}

// agentDescription describes a sub-agent tool from its agent card. The card's text is
// untrusted: each part is flattened and capped like the system prompt's, and so is the
// whole (DESIGN §5).
func agentDescription(a *Agent) string {
	var b strings.Builder
	b.WriteString("Delegate to the sub-agent ")
	b.WriteString(a.Name)
	description, skills := a.describe()
	if description != "" {
		b.WriteString(": ")
		b.WriteString(bridge.Flatten(description, bridge.MaxDescription))
	}
	for i, s := range skills {
		if i == 0 {
			b.WriteString(" Skills:")
		}
		fmt.Fprintf(&b, " %s", bridge.Flatten(s.Name, 100))
		if s.Description != "" {
			fmt.Fprintf(&b, " (%s)", bridge.Flatten(s.Description, bridge.MaxDescription))
		}
		b.WriteString(";")
	}
	return bridge.Flatten(b.String(), 4*bridge.MaxDescription)
}

// kind is the kind of the tool named name: a sub-agent, a connected MCP server's tool (which
// wins over the built-in ask_user of the same name), the user's question, or anything else.
func (t *toolset) kind(name string) dispatch.Kind {
	if _, ok := t.agents[name]; ok {
		return dispatch.Agent
	}
	if t.hasMCP(name) {
		return dispatch.MCP
	}
	if name == askUserTool {
		return dispatch.AskUser
	}
	return dispatch.Other
}

// badArguments refuses a call whose arguments are not a JSON object.
func badArguments(r *Run, t *toolset, c llm.ToolCall) toolOutcome {
	return signalOutcome(bridge.Signal{
		Code: "validation_failed", Requested: c.Name,
		Message:          "The arguments must be a JSON object.",
		ValidNextActions: nextActions(r.guard, t, c.Name), Reason: "arguments are not a JSON object",
		Details: &bridge.Details{Field: "arguments", Got: bridge.UntrustedN(c.Arguments, 200)},
	})
}

// otherTool runs a call that is neither a sub-agent's nor a connected MCP server's nor the
// user's question: a tool of a server that is down, or an unknown tool.
func otherTool(r *Run, t *toolset, c llm.ToolCall) toolOutcome {
	// A tool of an MCP server that is not connected is unreachable, not unknown.
	if down, ok := r.e.cfg.Tools.(interface {
		Unreachable(string) (mcpclient.Result, bool)
	}); ok {
		if res, isDown := down.Unreachable(c.Name); isDown {
			return mcpResult(r, t, res)
		}
	}
	return signalOutcome(bridge.Signal{
		Code: "unknown_action", Requested: bridge.UntrustedN(c.Name, 64),
		Message:          fmt.Sprintf("There is no tool named %q. Use one of known_actions.", bridge.UntrustedN(c.Name, 64)),
		ValidNextActions: unknownNext(r.guard, t, c.Name), KnownActions: knownActions(t, c.Name),
	})
}

// askUserTool is the built-in tool that ends the run with a question to the user.
const askUserTool = "ask_user"

func askUserParameters() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"question": map[string]any{"type": "string", "description": "The question for the user."},
			"choices":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Optional: the answers the user may pick from."},
		},
		"required":             []string{"question"},
		"additionalProperties": false,
	}
}

func askUser(r *Run, t *toolset, c llm.ToolCall, args map[string]any) toolOutcome {
	q, _ := args["question"].(string)
	if strings.TrimSpace(q) == "" {
		return signalOutcome(bridge.Signal{
			Code: "validation_failed", Requested: askUserTool,
			Message:          `ask_user needs a non-empty "question" string.`,
			ValidNextActions: nextActions(r.guard, t, askUserTool), Reason: "question is missing",
			Details: &bridge.Details{Field: "question", Got: args["question"]},
		})
	}
	var choices []string
	if raw, ok := args["choices"].([]any); ok {
		for _, v := range raw {
			if s, ok := v.(string); ok && s != "" {
				choices = append(choices, s)
			}
		}
	}
	in := hitl.AskUser(r.e.hitlOptions(), q, choices)
	in.ToolCallID = c.ID
	in.Handle = mustJSON(handle{Question: q, Choices: choices})
	return toolOutcome{interrupts: []store.Interrupt{in}}
}

// mcpOptions are the options of an MCP call of the run, with its progress coalesced; the
// caller flushes the coalescer when the call returns.
func mcpOptions(ctx context.Context, r *Run, t *toolset, toolCallID string) (mcpclient.CallOptions, *progressCoalescer) {
	progress := newProgressCoalescer(func(p mcpclient.Progress) { r.emit(progressEvent(toolCallID, p)) })
	// A server that is another Baton starts its run one deeper (contract §9c, §9d), within
	// what is left of this run's budget, as an agent that is a Baton does.
	meta := map[string]any{subagent.DepthKey: depthOf(r)}
	if b := remainingBudget(ctx, r); b != nil {
		meta[subagent.BudgetKey] = b.Metadata()
	}
	return mcpclient.CallOptions{
		Park:      true,
		Principal: r.owner,
		Progress:  progress.note,
		Meta:      meta,
	}, progress
}

// ToolName sanitises a configured name into a tool name: [A-Za-z0-9_-], at most 64
// characters (DESIGN §5), through the one sanitiser that config and catalog use too.
func ToolName(s string) string { return toolname.Sanitize(s) }
