package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/store"
)

// errStoreDown is what /readyz shows for a store that does not answer or cannot be
// written; the cause (which may name a host or a path) goes to the log only.
var errStoreDown = errors.New("the store does not answer or cannot be written")

// errStoreMoved is what /readyz shows once the SQLite database file was deleted or
// replaced under the process: nothing it writes would last, and only a restart helps.
var errStoreMoved = errors.New("the database file was deleted or replaced; restart the coordinator")

// readyChecks registers one readiness check per dependency (DESIGN §3): the store, the
// model (its configuration, then the background probe's last answer), each agent and each
// MCP server.
func readyChecks(cfg *config.Config, st store.Store, agents []coordinator.Agent, registry *mcpclient.Registry, probe *modelProbe, fallbacks []fallbackProbe, log *slog.Logger) []server.ReadyCheck {
	primaryReady := func(context.Context) error {
		if err := modelProblem(cfg.LLM); err != nil {
			return err
		}
		if probe != nil {
			return probe.Ready()
		}
		return nil
	}
	checks := []server.ReadyCheck{
		{Group: server.GroupStore, Check: func(ctx context.Context) error {
			if err := st.Ping(ctx); err != nil {
				log.Debug("store ping failed", "err", err)
				if errors.Is(err, store.ErrFileMoved) {
					return errStoreMoved
				}
				return errStoreDown
			}
			return nil
		}},
		{Group: server.GroupModel, Check: primaryReady},
	}
	checks = append(checks, fallbackChecks(cfg, primaryReady, fallbacks)...)
	for _, a := range agents {
		// Agents whose client can tell (the a2a client once it resolves cards in the
		// background) report their own state; the others were resolved at start.
		probe, _ := a.Client.(interface{ Ready() error })
		checks = append(checks, server.ReadyCheck{Group: server.GroupAgents, Name: a.Name, Check: func(context.Context) error {
			if probe == nil {
				return nil
			}
			return probe.Ready()
		}})
	}
	if registry != nil {
		for _, m := range cfg.MCPServers {
			checks = append(checks, server.ReadyCheck{Group: server.GroupMCP, Name: m.Name, Check: func(context.Context) error {
				return mcpProblem(registry, m.Name)
			}})
		}
	}
	return checks
}

// mcpProblem reports why the MCP server name is not usable, nil when it is connected.
func mcpProblem(r *mcpclient.Registry, name string) error {
	for _, s := range r.Status() {
		if s.Name != name {
			continue
		}
		switch {
		case s.Connected:
			return nil
		case s.LastError != "":
			return errors.New(s.LastError)
		default:
			return errors.New("connecting")
		}
	}
	return errors.New("not configured")
}

// modelProblem reports a model provider that cannot work as configured: a provider that
// needs a key without one. A keyless OpenAI-compatible server (llm.base_url set, no
// llm.api_key_env) is fine. A missing key does not stop the start: it is a warning and a
// /readyz entry, so that the rest of the service can be checked.
func modelProblem(l config.LLM) error {
	switch l.Provider {
	case config.ProviderScripted:
		return nil
	case config.ProviderOpenAI, config.ProviderAnthropic:
	default:
		return fmt.Errorf("llm.provider %q is not available", l.Provider)
	}
	if l.APIKeyEnv != "" {
		if l.APIKey() == "" {
			return fmt.Errorf("the API key variable %s (llm.api_key_env) is not set", l.APIKeyEnv)
		}
		return nil
	}
	if l.BaseURL == "" {
		return fmt.Errorf("no API key: set llm.api_key_env to the variable that holds the %s key", l.Provider)
	}
	return nil
}
