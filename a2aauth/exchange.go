package a2aauth

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/baton-dev/baton/subagent"
	"github.com/baton-dev/baton/tokenexchange"
)

// Exchanger obtains a token carrying a user's identity for a peer (tokenexchange.Exchanger).
type Exchanger interface {
	Token(ctx context.Context, principal string, t *tokenexchange.Target) (string, error)
}

// Exchange authorises calls to agents in auth mode exchange: each call carries, as its
// bearer token, the caller's OIDC access token exchanged (RFC 8693) for one with the
// agent's audience. It is safe for concurrent use.
type Exchange struct {
	x       Exchanger
	targets map[string]*tokenexchange.Target
}

// NewExchange returns an Exchange for the agents named in targets.
func NewExchange(x Exchanger, targets map[string]*tokenexchange.Target) *Exchange {
	return &Exchange{x: x, targets: targets}
}

// Has reports whether agent is in auth mode exchange.
func (e *Exchange) Has(agent string) bool {
	if e == nil {
		return false
	}
	_, ok := e.targets[agent]
	return ok
}

// failureKey keys the failed exchange a context carries to Guarded.
type failureKey struct{}

// Authorize returns ctx carrying principal's exchanged token for agent as an HTTP header
// of the agent's calls (a2a-go sends service parameters to the agent's endpoint only).
// When the exchange fails, ctx carries the failure instead: Guarded then ends the call with
// an error wrapping subagent.ErrAuth without contacting the agent, so that the agent is never
// called without the user's identity. ctx itself for an agent not in mode exchange.
func (e *Exchange) Authorize(ctx context.Context, principal, agent string) context.Context {
	t, ok := e.targets[agent]
	if !ok {
		return ctx
	}
	tok, err := e.x.Token(ctx, principal, t)
	if err != nil {
		return context.WithValue(ctx, failureKey{}, &ExchangeError{Agent: agent, Err: err})
	}
	return a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"Authorization": {"Bearer " + tok}})
}

// ExchangeError is a call that did not go out because the user's token could not be
// exchanged for the agent. It wraps subagent.ErrAuth (the model sees [AUTH_REQUIRED]) and the
// tokenexchange error; Reason says what the user can do.
type ExchangeError struct {
	Agent string
	Err   error
}

func (e *ExchangeError) Error() string {
	return fmt.Sprintf("a2a: agent %q: %v: %v", e.Agent, subagent.ErrAuth, e.Err)
}

// Unwrap returns subagent.ErrAuth and the exchange's error.
func (e *ExchangeError) Unwrap() []error { return []error{subagent.ErrAuth, e.Err} }

// Reason is a plain sentence for the model and the user.
func (e *ExchangeError) Reason() string { return tokenexchange.Reason(e.Err) }

// failure returns the failed exchange ctx carries, or nil.
func failure(ctx context.Context) error {
	if err, ok := ctx.Value(failureKey{}).(*ExchangeError); ok {
		return err
	}
	return nil
}

// Guarded is an agent whose calls stop, before anything is sent, when their context
// carries a failed exchange (Exchange.Authorize). Every other method is the agent's own.
type Guarded struct {
	*subagent.Agent
}

// Send sends req unless the exchange for it failed.
func (g Guarded) Send(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
	if err := failure(ctx); err != nil {
		if req.TaskID != "" {
			return nil, &subagent.TaskError{TaskID: req.TaskID, ContextID: req.ContextID, Err: err}
		}
		return nil, err
	}
	return g.Agent.Send(ctx, req, obs)
}

// Cancel cancels taskID unless the exchange for it failed.
func (g Guarded) Cancel(ctx context.Context, taskID string) error {
	if err := failure(ctx); err != nil {
		return err
	}
	return g.Agent.Cancel(ctx, taskID)
}

// CancelConfirm is Cancel that says whether the task was already over.
func (g Guarded) CancelConfirm(ctx context.Context, taskID string) (bool, error) {
	if err := failure(ctx); err != nil {
		return false, err
	}
	return g.Agent.CancelConfirm(ctx, taskID)
}

// CancelOnce is one attempt of CancelConfirm.
func (g Guarded) CancelOnce(ctx context.Context, taskID string) (bool, error) {
	if err := failure(ctx); err != nil {
		return false, err
	}
	return g.Agent.CancelOnce(ctx, taskID)
}

// GetTask reads taskID unless the exchange for it failed.
func (g Guarded) GetTask(ctx context.Context, taskID string) (*subagent.Result, error) {
	if err := failure(ctx); err != nil {
		return nil, err
	}
	return g.Agent.GetTask(ctx, taskID)
}

// Follow follows taskID unless the exchange for it failed.
func (g Guarded) Follow(ctx context.Context, taskID, contextID string, obs subagent.Observer) (*subagent.Result, error) {
	if err := failure(ctx); err != nil {
		return nil, &subagent.TaskError{TaskID: taskID, ContextID: contextID, Err: err}
	}
	return g.Agent.Follow(ctx, taskID, contextID, obs)
}
