package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/baton-dev/baton/a2aserver"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/followers"
)

// newA2AServer returns Baton's A2A surface (a2a_server.enabled), or nil when it is off:
// then none of its paths exists. It reaches the engine through its port only.
func newA2AServer(cfg *config.Config, port *coordinator.Runs, signIns a2aserver.SignIns, bearer bool, follows *followers.Counter, log *slog.Logger) http.Handler {
	if !cfg.A2AServer.Enabled {
		return nil
	}
	var skills []a2aserver.Skill
	for _, a := range cfg.Agents {
		skills = append(skills, a2aserver.Skill{ID: "agent:" + a.Name, Name: a.Name, Description: fmt.Sprintf("Delegates to the A2A agent %q.", a.Name)})
	}
	for _, s := range cfg.MCPServers {
		skills = append(skills, a2aserver.Skill{ID: "tools:" + s.Name, Name: s.Name, Description: fmt.Sprintf("Uses the tools of the MCP server %q.", s.Name)})
	}
	return a2aserver.New(a2aserver.Config{
		// Tasks live in the store with the runs whose event logs hold their answers, and
		// expire with them; the port keeps both.
		Port:          port,
		MaxActiveRuns: cfg.Server.MaxActiveRuns,
		Retention:     time.Duration(cfg.Server.EventRetention),
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
		Logger:    log.With("component", "a2a_server"),
	})
}
