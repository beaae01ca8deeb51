package hitl

import (
	"encoding/json"

	"github.com/baton-dev/baton/store"
)

// KindApproval is the interrupt of a call that needs the user's approval before it is sent
// (config approvals, DESIGN §9); the engine keeps the call in the interrupt's handle.
const KindApproval = "approval"

// ReasonToolCall is the reason of an approval interrupt: AG-UI 1.0's tool-bound interrupt.
const ReasonToolCall = "tool_call"

// InDoubtMessage is the question of an in-doubt interrupt: an approved call was sent, and the
// coordinator stopped before its result was recorded.
const InDoubtMessage = "this call may already have run: run it again?"

// Approval is the interrupt that asks the user to approve a call of tool with arguments
// args (a JSON object) before it is sent. inputSchema is the tool's input schema: the answer
// is {approved: boolean, editedArgs?: <inputSchema>, reason?: string}, so that edited
// arguments are checked before anything runs. message says what the call will do; the
// caller escapes it (it quotes a peer's description and the model's arguments).
// metadata.baton carries the tool and the arguments for a form; inDoubt marks the second
// question after a crash (metadata.baton.inDoubt: true).
func Approval(o Options, tool, message string, args json.RawMessage, inputSchema map[string]any, inDoubt bool) store.Interrupt {
	edited := jsonCopy(inputSchema)
	if edited == nil {
		edited = map[string]any{"type": "object"}
	}
	// A nested "$schema" names a dialect for a root only; the validator may refuse it
	// inside a property.
	delete(edited, "$schema")
	schema := object(map[string]any{
		"approved":   map[string]any{"type": "boolean"},
		"editedArgs": edited,
		"reason":     map[string]any{"type": "string"},
	}, "approved")
	md := map[string]any{"tool": tool}
	var a any
	if json.Unmarshal(args, &a) == nil {
		md["arguments"] = a
	}
	if inDoubt {
		md["inDoubt"] = true
	}
	return o.newInterrupt(KindApproval, ReasonToolCall, message, schema, map[string]any{"baton": md})
}

// jsonCopy deep-copies a JSON-shaped map through encoding/json, so that the result holds
// only map[string]any and []any, as it will after a round trip through the store.
func jsonCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}
