package a2aserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/baton-dev/baton/a2aauth"
	"github.com/baton-dev/baton/agui"
)

// SignIns tells whether a principal has completed a sign-in to a downstream server: Baton's
// OAuth callback stored the principal's grant for it. server is an MCP server's name, or
// a2aauth.ServerName(agent) for an A2A agent whose card declares an OAuth flow. With it, a
// run that waits only for sign-ins puts its task in auth-required (the credentials arrive
// out of band, as A2A means it) and the run goes on by itself once the user has signed in.
type SignIns interface {
	SignedIn(ctx context.Context, principal, server string) bool
}

// Interrupt reasons of a sign-in (DESIGN §9): an MCP server's, and an A2A sub-agent's
// auth-required (a sign-in of Baton's own when it carries an authorization URL).
const (
	reasonMCPAuthorization = "mcp:authorization"
	reasonA2AAuthRequired  = "a2a:auth_required"
)

// signInPoll is how often a task in auth-required checks whether its sign-ins are done.
const signInPoll = 250 * time.Millisecond

// outOfBand reports whether q is answered by signing in, not by a message: an MCP sign-in
// with a URL to open and the server it is for, or an A2A sub-agent's auth-required that
// Baton's own sign-in to the agent resolves (a URL, and the agent). An A2A auth-required
// without a URL (the agent's card declares no flow Baton can use) needs the caller's
// "done", a message: it is not out of band.
func (q Question) outOfBand() bool {
	return q.signInServer() != ""
}

// signInServer is the name Baton keeps q's sign-in under (SignIns), "" when q is not a
// sign-in that Baton completes by itself.
func (q Question) signInServer() string {
	if q.AuthorizationURL == "" {
		return ""
	}
	switch {
	case q.Reason == reasonMCPAuthorization && q.Server != "":
		return q.Server
	case q.Reason == reasonA2AAuthRequired && q.Agent != "":
		return a2aauth.ServerName(q.Agent)
	}
	return ""
}

// signedInPayload is the answer that lets q's parked call go on once the sign-in is done:
// an MCP sign-in is accepted (the call is sent again with the new grant); an A2A task is
// continued with an empty answer (the engine says "done" to it, with the new token).
func (q Question) signedInPayload() json.RawMessage {
	if q.Reason == reasonA2AAuthRequired {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(`{"action":"accept"}`)
}

// onlySignIns reports whether every question is answered out of band.
func onlySignIns(qs []Question) bool {
	for _, q := range qs {
		if !q.outOfBand() {
			return false
		}
	}
	return len(qs) > 0
}

// awaitSignIns waits, for a task in auth-required, until every question's sign-in is done
// (resolved: the parked calls are sent again with the new grant) or the first question
// expires (cancelled: the model is told the user did not sign in). ok is false when ctx
// ended first (CancelTask, shutdown).
func (x *executor) awaitSignIns(ctx context.Context, who string, qs []Question) (resume []agui.ResumeEntry, ok bool) {
	var expires time.Time
	for _, q := range qs {
		if t, err := time.Parse(time.RFC3339Nano, q.ExpiresAt); err == nil && (expires.IsZero() || t.Before(expires)) {
			expires = t
		}
	}
	tick := time.NewTicker(signInPoll)
	defer tick.Stop()
	for {
		done := true
		for _, q := range qs {
			done = done && x.signIns.SignedIn(ctx, who, q.signInServer())
		}
		status := agui.ResumeResolved
		switch {
		case done:
		case !expires.IsZero() && time.Now().After(expires):
			status = agui.ResumeCancelled
		default:
			select {
			case <-tick.C:
				continue
			case <-ctx.Done():
				return nil, false
			}
		}
		for _, q := range qs {
			e := agui.ResumeEntry{InterruptID: q.InterruptID, Status: status}
			if status == agui.ResumeResolved {
				e.Payload = q.signedInPayload()
			}
			resume = append(resume, e)
		}
		return resume, true
	}
}

// waitingSignIn reports whether the relayed run ended in auth-required.
func (r *relay) waitingSignIn() bool {
	ev, ok := r.final.(*a2a.TaskStatusUpdateEvent)
	return ok && ev.Status.State == a2a.TaskStateAuthRequired
}
