// Package hitl is the human in the loop (DESIGN §9): it builds the interrupts that end a run
// when the user must answer something (a sub-agent's question, an MCP elicitation, the
// ask_user tool, a "continue?" after a loop or a limit), converts them to AG-UI, and validates
// the resume that answers them.
//
// # Interrupts
//
// Each builder returns a store.Interrupt with a fresh id ("int-" and 16 hex digits from
// crypto/rand, so ids never collide across restarts and are stable once persisted), an expiry
// (Options.TTL, default 30 minutes), and the reason, responseSchema and metadata that DESIGN §9
// fixes for its source. Schemas and metadata are built from map[string]any and []any only,
// the shapes encoding/json decodes into, so an interrupt compares equal to itself after a
// round trip through the store.
//
// # Resume validation
//
// Validate applies the AG-UI 1.0 producer rules (agui-1.0.md §4.1) to a resume list, in a
// fixed order so that the user sees the most useful error: an expired interrupt first
// (answering it cannot help any more), then coverage (every open interrupt answered or
// cancelled, no conflicting duplicates), then each payload against its responseSchema.
// Entries for ids that are not open are ignored and reported, as the spec asks, since a
// client may replay an old answer.
package hitl

import (
	"crypto/rand"
	"encoding/hex"
	"github.com/baton-dev/baton/mcpclient"
	"net/url"
	"strings"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/store"
)

// Interrupt kinds (store.Interrupt.Kind): what the engine must do with the answer.
const (
	KindA2AInput   = "a2a_input"
	KindA2AAuth    = "a2a_auth"
	KindMCPForm    = "mcp_form"    // MCP 2026-07-28 (MRTR): the call is retried with inputResponses
	KindMCPURL     = "mcp_url"     // MCP URL-mode elicitation (or error -32042): the call is retried
	KindMCPSession = "mcp_session" // MCP 2025-11-25: an in-session handler is waiting
	KindMCPAuth    = "mcp_auth"    // MCP server needs the user's sign-in (OAuth): the call is retried
	KindAskUser    = "ask_user"
	KindContinue   = "continue"
)

// Interrupt reasons on the wire.
const (
	ReasonInputRequired     = "input_required"
	ReasonA2AAuthRequired   = "a2a:auth_required"
	ReasonMCPURLElicitation = "mcp:url_elicitation"
	ReasonMCPAuthorization  = "mcp:authorization"
)

// MCP elicitation shapes, the last argument of MCPForm.
const (
	ShapeMRTR    = mcpclient.ShapeMRTR    // 2026-07-28: Kind mcp_form
	ShapeSession = mcpclient.ShapeSession // 2025-11-25: Kind mcp_session
)

// MCP elicitation actions, the "action" of a form or URL answer.
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
)

// defaultTTL is how long an interrupt stays answerable when Options.TTL is zero: the
// default of interrupts.ttl, defined in internal/config.
const defaultTTL = time.Duration(config.DefaultInterruptTTL)

// Options configure the builders. The zero value uses time.Now and the interrupts.ttl default.
type Options struct {
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// TTL is the lifetime of an interrupt; zero or negative means the interrupts.ttl
	// default (internal/config).
	TTL time.Duration
}

func (o Options) newInterrupt(kind, reason, message string, schema, metadata map[string]any) store.Interrupt {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	ttl := o.TTL
	if ttl <= 0 {
		ttl = defaultTTL
	}
	return store.Interrupt{
		ID:             NewID(),
		Kind:           kind,
		Reason:         reason,
		Message:        message,
		ResponseSchema: schema,
		ExpiresAt:      now().Add(ttl).UTC(),
		Metadata:       metadata,
	}
}

// NewID returns a fresh interrupt id: "int-" and 16 hex digits.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return "int-" + hex.EncodeToString(b[:])
}

func object(properties map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": properties}
	if len(required) > 0 {
		r := make([]any, len(required))
		for i, name := range required {
			r[i] = name
		}
		s["required"] = r
	}
	return s
}

func textSchema(required bool) map[string]any {
	props := map[string]any{"text": map[string]any{"type": "string"}}
	if required {
		return object(props, "text")
	}
	return object(props)
}

func actionProperty() map[string]any {
	return map[string]any{"type": "string", "enum": []any{ActionAccept, ActionDecline}}
}

func a2aMetadata(agent, taskID, contextID string) map[string]any {
	return map[string]any{"a2a": map[string]any{"agent": agent, "taskId": taskID, "contextId": contextID}}
}

// A2AInput is the interrupt for an A2A task in input-required (ask_user mode): the user's
// text answer is sent to the same task.
func A2AInput(o Options, agent, taskID, contextID, question string) store.Interrupt {
	return o.newInterrupt(KindA2AInput, ReasonInputRequired, question, textSchema(true), a2aMetadata(agent, taskID, contextID))
}

// A2AAuth is the interrupt for an A2A task in auth-required: the user authenticates out of
// band and says so; the optional text (e.g. "done") is sent to the task.
func A2AAuth(o Options, agent, taskID, contextID, message string) store.Interrupt {
	return o.newInterrupt(KindA2AAuth, ReasonA2AAuthRequired, message, textSchema(false), a2aMetadata(agent, taskID, contextID))
}

// MCPForm is the interrupt for a form-mode MCP elicitation. The answer mirrors MCP's
// ElicitResult: {action:"accept", content} or {action:"decline"}; a cancelled resume entry is
// MCP's "cancel". shape is ShapeMRTR (Kind mcp_form) or ShapeSession (Kind mcp_session); any
// other value is taken as ShapeMRTR. A nil requested schema accepts any object as content.
func MCPForm(o Options, server, tool, message string, requested map[string]any, shape string) store.Interrupt {
	kind := KindMCPForm
	if shape == ShapeSession {
		kind = KindMCPSession
	}
	content := requested
	if content == nil {
		content = map[string]any{"type": "object"}
	}
	schema := object(map[string]any{"action": actionProperty(), "content": content}, "action")
	md := map[string]any{"mcp": map[string]any{"server": server, "tool": tool, "mode": "form"}}
	return o.newInterrupt(kind, ReasonInputRequired, bridge.UntrustedN(message, maxPeerMessageBytes), schema, md)
}

// maxPeerMessageBytes caps a peer's elicitation message shown in an interrupt.
const maxPeerMessageBytes = 4000

// maxURLBytes caps a URL passed on to the client in metadata.mcp.url.
const maxURLBytes = 4096

// SafeURL reports whether a URL from a peer may be passed on to the client: an absolute
// http or https URL with a host, of bounded length. Anything else (javascript:, data:,
// file:, relative or malformed URLs) could run code or reach local files in the client.
func SafeURL(raw string) bool {
	if raw == "" || len(raw) > maxURLBytes {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return true
	}
	return false
}

// MCPURL is the interrupt for a URL-mode MCP elicitation (or error -32042): the user opens
// link, then accepts (the call is retried) or declines. The peer's message is escaped like
// every other untrusted text, and link is passed on only when it is an http(s) URL.
func MCPURL(o Options, server, tool, link, message string) store.Interrupt {
	schema := object(map[string]any{"action": actionProperty()}, "action")
	mcpMD := map[string]any{"server": server, "tool": tool, "mode": "url"}
	// Only http(s) URLs leave; the interrupt stays, so the user can still decline.
	if SafeURL(link) {
		mcpMD["url"] = link
	}
	return o.newInterrupt(KindMCPURL, ReasonMCPURLElicitation, bridge.UntrustedN(message, maxPeerMessageBytes), schema, map[string]any{"mcp": mcpMD})
}

// MCPAuthorization is the interrupt of a call that needs the user to sign in to an MCP
// server (OAuth, DESIGN §9): the user opens authURL, signs in, and accepts (the call is
// sent again with the new token) or declines. metadata.authorizationUrl is passed on only
// when it is an http(s) URL; the sign-in itself is accepted until signInExpires, reported
// as metadata.signInExpiresAt.
func MCPAuthorization(o Options, server, tool, authURL string, signInExpires time.Time) store.Interrupt {
	schema := object(map[string]any{"action": actionProperty()}, "action")
	md := map[string]any{"server": server, "mcp": map[string]any{"server": server, "tool": tool}}
	if SafeURL(authURL) {
		md["authorizationUrl"] = authURL
	}
	if !signInExpires.IsZero() {
		md["signInExpiresAt"] = signInExpires.UTC().Format(expiresAtLayout)
	}
	return o.newInterrupt(KindMCPAuth, ReasonMCPAuthorization, "Sign in to "+server, schema, md)
}

// AskUser is the interrupt of the ask_user tool: a free text answer, or one of choices when
// there are any.
func AskUser(o Options, question string, choices []string) store.Interrupt {
	schema := textSchema(true)
	if len(choices) > 0 {
		enum := make([]any, len(choices))
		for i, c := range choices {
			enum[i] = c
		}
		schema = object(map[string]any{"text": map[string]any{"type": "string", "enum": enum}}, "text")
	}
	return o.newInterrupt(KindAskUser, ReasonInputRequired, question, schema, nil)
}

// Continue is the interrupt that asks whether a run should go on after a loop was detected or
// a limit was reached; kind names the cause (e.g. "loop_detected", "max_iterations") and is
// reported as metadata.baton.kind. The answer is {"continue": true|false}.
func Continue(o Options, question string, kind string) store.Interrupt {
	schema := object(map[string]any{"continue": map[string]any{"type": "boolean"}}, "continue")
	md := map[string]any{"baton": map[string]any{"kind": kind}}
	return o.newInterrupt(KindContinue, ReasonInputRequired, question, schema, md)
}

// expiresAtLayout is RFC 3339 in UTC with millisecond precision, as JavaScript's
// Date.prototype.toISOString writes it.
const expiresAtLayout = "2006-01-02T15:04:05.000Z07:00"

// ToAGUI converts a stored interrupt to its wire form. Kind and Handle are Baton's own and
// stay out of it; a zero ExpiresAt (no expiry) is omitted.
func ToAGUI(in store.Interrupt) agui.Interrupt {
	out := agui.Interrupt{
		ID:             in.ID,
		Reason:         in.Reason,
		Message:        in.Message,
		ToolCallID:     in.ToolCallID,
		ResponseSchema: in.ResponseSchema,
		Metadata:       in.Metadata,
		SubagentRunID:  in.SubagentRunID,
	}
	if !in.ExpiresAt.IsZero() {
		out.ExpiresAt = in.ExpiresAt.UTC().Format(expiresAtLayout)
	}
	return out
}
