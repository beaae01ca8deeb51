package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/internal/config"
)

// The sign-in client reaches loopback and private addresses only when the operator put a
// peer there; otherwise a peer's metadata cannot point it at an internal host.
func TestPrivatePeers(t *testing.T) {
	assert.False(t, privatePeers(&config.Config{
		MCPServers: []config.MCPServer{{Name: "docs", URL: "https://mcp.example.com/mcp"}, {Name: "local", Command: []string{"x"}}},
		Agents:     []config.Agent{{Name: "a", URL: "https://agent.example.com"}},
	}))
	assert.True(t, privatePeers(&config.Config{MCPServers: []config.MCPServer{{Name: "docs", URL: "http://127.0.0.1:9000/mcp"}}}))
	assert.True(t, privatePeers(&config.Config{Agents: []config.Agent{{Name: "a", URL: "http://10.0.0.7:8080"}}}))
	assert.True(t, privatePeers(&config.Config{Agents: []config.Agent{{Name: "a", URL: "https://agent.example.com", CardURL: "http://localhost:1/card.json"}}}))
}
