package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContractConfigExample loads the configuration example of DESIGN §4
// (design/contract.md) as written: tests outside the code base use the contract's keys, so
// every one of them must be accepted (or, for a feature this build lacks, refused with a
// message that says so - not as an unknown key).
func TestContractConfigExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "design", "contract.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "## 4. Configuration")
	require.GreaterOrEqual(t, start, 0, "design/contract.md has a section 4")
	m := fencedYAML.FindStringSubmatch(doc[start:])
	require.NotNil(t, m, "section 4 has a YAML example")
	text := m[1]
	e := env{}
	for _, ref := range varRef.FindAllStringSubmatch(text, -1) {
		e[ref[1]] = "set-for-the-test"
	}
	for _, name := range []string{"BATON_AUTH_TOKENS", "OPENAI_API_KEY", "BATON_SECRETS_KEY"} {
		e[name] = "set-for-the-test"
	}
	c, err := loadYAML(t, text, e)
	require.NoError(t, err, "the contract's config example:\n%s", text)
	assert.Equal(t, OnShutdownHandoff, c.Server.OnShutdown)
	assert.Equal(t, OnShutdownHandoff, c.ShutdownMode())
	assert.Equal(t, "BATON_SECRETS_KEY", c.Server.SecretsKeyEnv)
	require.Len(t, c.MCPServers, 2)
	assert.Equal(t, MCPAuthNone, c.MCPServers[1].Auth.Mode)
}

func TestShutdownAndMCPAuthKeys(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantErr string
	}{
		{"cancel", "server: {on_shutdown: cancel}\n", ""},
		{"bad on_shutdown", "server: {on_shutdown: later}\n", "server.on_shutdown: must be handoff or cancel"},
		{"secrets key is a name", "server: {secrets_key_env: \"abc def\"}\n", "server.secrets_key_env"},
		{"public url", "server: {public_url: \"https://baton.example.com/chat\"}\n", ""},
		{"bad public url", "server: {public_url: \"baton.example.com\"}\n", "server.public_url: must be an absolute http(s) URL"},
		{"auth none", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: none}}]\n", ""},
		{"auth user", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: user, scopes: [files:read, offline_access]}}]\n", ""},
		{"auth user localhost", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"http://localhost:1/mcp\", auth: {mode: user}}]\n", ""},
		{"auth user https", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"https://mcp.example.com/mcp\", auth: {mode: user, client_id: baton, client_secret_env: S}}]\n", ""},
		{"auth user without key", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: user}}]\n", "server.secrets_key_env: required with mcp server \"m\" in mode user"},
		{"auth user plain http", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"http://mcp.example.com/mcp\", auth: {mode: user}}]\n", "mcp_servers[0].auth.mode: user (OAuth) needs an https url, or http only on a loopback host"},
		{"auth user stdio", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, command: [x], auth: {mode: user}}]\n", "needs a streamable HTTP server"},
		{"auth user with Authorization header", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", headers: {authorization: x}, auth: {mode: user}}]\n", "sets the Authorization header itself"},
		{"auth user bad scope", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: user, scopes: [\"a b\"]}}]\n", "mcp_servers[0].auth.scopes[0]: not an OAuth scope token"},
		{"auth user secret without client_id", "server: {secrets_key_env: K}\nmcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: user, client_secret_env: S}}]\n", "mcp_servers[0].auth.client_id: required with client_secret_env"},
		{"auth service", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: service, client_id: x, client_secret_env: S}}]\n", ""},
		{"auth service without secret", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: service, client_id: x}}]\n", "mode service (client credentials) needs client_id and client_secret_env"},
		{"auth service secret is a value", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: service, client_id: x, client_secret_env: \"s3cr3t value\"}}]\n", "client_secret_env: must be the name of an environment variable"},
		{"client_secret_env with mode none", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: none, client_secret_env: S}}]\n", "mcp_servers[0].auth.client_secret_env: is used only with mode user or service"},
		{"auth bad mode", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: magic}}]\n", "must be one of none, user, service"},
		{"client_id without mode", "mcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {client_id: x}}]\n", "need mode user or service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadYAML(t, tc.yaml, nil)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
