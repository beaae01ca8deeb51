package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/baton-dev/baton/a2aserver"
	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/followers"
)

// newA2AServer returns Baton's A2A surface (a2a_server.enabled), or nil when it is off:
// then none of its paths exists.
func newA2AServer(cfg *config.Config, engine *coordinator.Engine, signIns a2aserver.SignIns, bearer bool, follows *followers.Counter, log *slog.Logger) http.Handler {
	if !cfg.A2AServer.Enabled {
		return nil
	}
	var skills []a2aserver.Skill
	agents := map[string]bool{} // by the engine's name for them, as pending cancels name them
	for _, a := range cfg.Agents {
		skills = append(skills, a2aserver.Skill{ID: "agent:" + a.Name, Name: a.Name, Description: fmt.Sprintf("Delegates to the A2A agent %q.", a.Name)})
		agents[coordinator.ToolName(a.Name)] = true
	}
	for _, s := range cfg.MCPServers {
		skills = append(skills, a2aserver.Skill{ID: "tools:" + s.Name, Name: s.Name, Description: fmt.Sprintf("Uses the tools of the MCP server %q.", s.Name)})
	}
	return a2aserver.New(a2aserver.Config{
		Engine: a2aEngine{e: engine, maxActive: cfg.Server.MaxActiveRuns},
		// Tasks live in the store with the runs whose event logs hold their answers, and
		// expire with them.
		Tasks:     engine.Store().Tasks(),
		Log:       engine.Store(),
		Retention: time.Duration(cfg.Server.EventRetention),
		Card: a2aserver.CardInfo{
			Name:        cfg.A2AServer.Name,
			Description: cfg.A2AServer.Description,
			Version:     version,
			Skills:      skills,
			Bearer:      bearer,
		},
		CancelHorizon: time.Duration(cfg.Limits.CancelHorizon),
		// One principal's follow streams are capped across A2A and AG-UI together.
		Followers: follows,
		SignIns:   signIns,
		// A downstream cancel of an agent removed from the configuration cannot be
		// confirmed from here (its pending record is dropped at start).
		AgentConfigured: func(name string) bool { return agents[name] },
		Logger:          log.With("component", "a2a_server"),
	})
}

// a2aEngine adapts the engine to the A2A surface (a2aserver.Engine).
type a2aEngine struct {
	e         *coordinator.Engine
	maxActive int
}

func (a a2aEngine) Start(ctx context.Context, in *agui.RunAgentInput, principal string) (a2aserver.Run, error) {
	// The engine admits the run against server.max_active_runs in one step with every
	// other start (AG-UI's included).
	r, err := a.e.StartContext(ctx, in, principal, coordinator.MaxActive(a.maxActive))
	var budget *coordinator.BudgetExceededError
	switch {
	case err == nil:
		return a2aRun{r}, nil
	case errors.As(err, &budget):
		return nil, &a2aserver.BudgetExceededError{Message: budget.Error(), ResetsAt: budget.ResetsAt}
	case errors.Is(err, coordinator.ErrThreadBusy), errors.Is(err, coordinator.ErrTooManyRuns):
		return nil, fmt.Errorf("%w: %w", a2aserver.ErrBusy, err)
	case errors.Is(err, coordinator.ErrForbidden):
		return nil, fmt.Errorf("%w: %w", a2aserver.ErrForbidden, err)
	case errors.Is(err, coordinator.ErrShuttingDown):
		return nil, fmt.Errorf("%w: %w", a2aserver.ErrShuttingDown, err)
	case errors.Is(err, coordinator.ErrTooDeep):
		return nil, fmt.Errorf("%w: %w", a2aserver.ErrTooDeep, err)
	case errors.Is(err, coordinator.ErrTooManyThreads):
		return nil, fmt.Errorf("%w: %w", a2aserver.ErrTooManyThreads, err)
	default:
		return nil, err
	}
}

// a2aRun adapts a run to the A2A surface (a2aserver.Run): its events come from the run's
// stream.
type a2aRun struct{ *coordinator.Run }

func (r a2aRun) NextFrom() (first int64, events []agui.Event, ended bool) {
	return r.Stream().NextFrom()
}

func (r a2aRun) Wake() <-chan struct{} { return r.Stream().Wake() }

func (a a2aEngine) Stop(threadID, runID, principal string) error {
	return a.e.Stop(threadID, runID, principal)
}

// grantSignIns tells the A2A surface when a principal's sign-in to an MCP server is done:
// the callback used up the pending sign-in and stored a grant. A grant alone is not
// enough: an older one may be the very one the server refused.
type grantSignIns struct{ w *signInWiring }

func (g grantSignIns) SignedIn(ctx context.Context, principal, server string) bool {
	if g.w == nil || g.w.ts == nil {
		return false
	}
	if p, err := g.w.ts.PendingFor(ctx, principal, server); err != nil || p != nil {
		return false
	}
	_, err := g.w.ts.Grant(ctx, principal, server)
	return err == nil
}
