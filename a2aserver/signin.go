package a2aserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/baton-dev/baton/agui"
)

// SignIns tells whether a principal has completed a sign-in to a downstream server: Baton's
// OAuth callback stored the principal's grant for it. With it, a run that waits only for
// sign-ins puts its task in auth-required (the credentials arrive out of band, as A2A
// means it) and the run goes on by itself once the user has signed in.
type SignIns interface {
	SignedIn(ctx context.Context, principal, server string) bool
}

// reasonMCPAuthorization is the interrupt reason of an MCP sign-in (DESIGN §9).
const reasonMCPAuthorization = "mcp:authorization"

// signInPoll is how often a task in auth-required checks whether its sign-ins are done.
const signInPoll = 250 * time.Millisecond

// outOfBand reports whether q is answered by signing in, not by a message: an MCP sign-in
// with a URL to open and the server it is for.
func (q Question) outOfBand() bool {
	return q.Reason == reasonMCPAuthorization && q.AuthorizationURL != "" && q.Server != ""
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
			done = done && x.signIns.SignedIn(ctx, who, q.Server)
		}
		status, payload := agui.ResumeResolved, json.RawMessage(`{"action":"accept"}`)
		switch {
		case done:
		case !expires.IsZero() && time.Now().After(expires):
			status, payload = agui.ResumeCancelled, nil
		default:
			select {
			case <-tick.C:
				continue
			case <-ctx.Done():
				return nil, false
			}
		}
		for _, q := range qs {
			resume = append(resume, agui.ResumeEntry{InterruptID: q.InterruptID, Status: status, Payload: payload})
		}
		return resume, true
	}
}

// waitingSignIn reports whether the relayed run ended in auth-required.
func (r *relay) waitingSignIn() bool {
	ev, ok := r.final.(*a2a.TaskStatusUpdateEvent)
	return ok && ev.Status.State == a2a.TaskStateAuthRequired
}
