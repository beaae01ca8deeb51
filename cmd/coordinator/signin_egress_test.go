package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/a2aauth"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/egress"
)

// Each peer's sign-in requests reach loopback and private addresses only when that peer
// is configured on one: a private agent next to a public MCP server does not let the
// public server's metadata point Baton's sign-in client at an internal host.
func TestSignInClientsArePerPeer(t *testing.T) {
	var hits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer internal.Close()
	w := newSignIn(&config.Config{
		MCPServers: []config.MCPServer{{Name: "docs", URL: "https://mcp.example.com/mcp"}, {Name: "local", URL: "http://127.0.0.1:9000/mcp"}},
		Agents: []config.Agent{{Name: "pub", URL: "https://agent.example.com"},
			{Name: "lab", URL: "https://agent.example.com", CardURL: "http://localhost:1/card.json"},
			{Name: "intra", URL: "http://10.0.0.7:8080"}},
	}, &config.SignInEnv{})
	reach := func(c *http.Client) error {
		resp, err := c.Get(internal.URL + "/register")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, name := range []string{"docs", a2aauth.ServerName("pub"), "unknown"} {
		require.ErrorIs(t, reach(w.serverClient(name)), egress.ErrForbidden, name)
	}
	require.ErrorIs(t, reach(w.agentClient("pub")), egress.ErrForbidden)
	assert.Zero(t, hits.Load(), "a public peer's client reached a loopback address")
	for _, name := range []string{"local", a2aauth.ServerName("lab"), a2aauth.ServerName("intra")} {
		require.NoError(t, reach(w.serverClient(name)), name)
	}
	assert.Equal(t, int32(3), hits.Load())
}
