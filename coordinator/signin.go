package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/hitl"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// Sign-in (OAuth) for MCP servers in auth mode user (design/signin-engine.md). A call whose
// server needs the principal to sign in was not run: it is parked like any other
// suspension, and the run ends with an mcp:authorization interrupt that carries the
// authorization URL. The token the user's sign-in leaves never passes through here: the
// callback stores it (sealed) and the principal's MCP session reads it. On resume the call
// is sent again, once, as a new call; declined or cancelled, the model gets [DECLINED].

// signInInterrupt is the interrupt of a call parked on sign-in.
func signInInterrupt(r *Run, callID string, sign *mcpclient.SignInRequired) store.Interrupt {
	var authURL string
	var expires time.Time
	if ns := sign.NeedsSignIn; ns != nil {
		authURL, expires = ns.URL, ns.Expires
	}
	in := hitl.MCPAuthorization(r.e.hitlOptions(), sign.Server, sign.ToolName, authURL, expires)
	in.ToolCallID = callID
	in.Handle = mustJSON(handle{SignIn: sign})
	return in
}

// signInHome: MCP calls waiting for the user's sign-in. Nothing waits remotely: the call
// was not sent, and an unused pending sign-in lapses by itself.
type signInHome struct{}

func (signInHome) toolName(in store.Interrupt) string {
	if h := decodeHandle(in); h.SignIn != nil {
		return h.SignIn.Tool
	}
	return metaTool(in)
}

func (signInHome) deliver(ctx context.Context, r *Run, t *toolset, callID string, ins []store.Interrupt, answers map[string]hitl.Answer) toolOutcome {
	in := ins[0]
	h := decodeHandle(in)
	if h.SignIn == nil || r.e.cfg.Tools == nil {
		return taggedOutcome(bridge.TagError, bridge.Error("The call waiting for the sign-in can no longer be made."))
	}
	ans := answers[in.ID]
	action, _ := ans.Payload["action"].(string)
	if ans.Cancelled || action != hitl.ActionAccept {
		return taggedOutcome(bridge.TagDeclined, bridge.Declined(fmt.Sprintf("The user did not sign in to %s, so %q was not called.", h.SignIn.Server, h.SignIn.ToolName)))
	}
	sign := h.SignIn
	// Sent again as a fresh call: with the stored token now, or, when the user did not
	// finish signing in, ending in a new sign-in interrupt.
	return runSessionCall(ctx, r, t, callID, sign.Tool, func(cctx context.Context, opts mcpclient.CallOptions) (mcpclient.Result, error) {
		r.elog.NoteCall(durable.Call{ToolCallID: callID, Tool: sign.Tool, State: durable.CallStarted})
		defer r.elog.NoteCall(durable.Call{ToolCallID: callID, Tool: sign.Tool, State: durable.CallDone})
		return r.e.cfg.Tools.Call(cctx, sign.Tool, sign.Args, opts)
	})
}

func (signInHome) abandon(context.Context, *Engine, string, string, []store.Interrupt) {}
