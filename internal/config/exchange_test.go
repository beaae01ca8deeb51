package config

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExchangeAuth: auth mode exchange loads for agents and MCP servers with server.oidc
// and a secrets key, and each missing or unsafe piece is a load error naming its key.
func TestExchangeAuth(t *testing.T) {
	const server = "server: {secrets_key_env: K, oidc: {issuer: \"https://idp.example.com\", audience: baton}}\n"
	const ex = `auth: {mode: exchange, token_url: "https://idp.example.com/token", audience: tools, scopes: [tools:call], client_id: baton, client_secret_env: S}`
	agent := func(url, auth string) string {
		return "agents: [{name: a, url: \"" + url + "\", " + auth + "}]\n"
	}
	mcp := func(url, auth string) string {
		return "mcp_servers: [{name: m, url: \"" + url + "\", " + auth + "}]\n"
	}
	for _, tc := range []struct {
		name, yaml, wantErr string
	}{
		{"agent", server + agent("https://agent.example.com", ex), ""},
		{"agent loopback http", server + agent("http://127.0.0.1:9/", ex), ""},
		{"mcp", server + mcp("https://mcp.example.com/mcp", ex), ""},
		{"agent without oidc", "server: {secrets_key_env: K}\n" + agent("https://agent.example.com", ex), "agents[0].auth.mode: exchange exchanges the user's OpenID Connect token: it needs server.oidc"},
		{"mcp without secrets key", "server: {oidc: {issuer: \"https://idp.example.com\", audience: baton}}\n" + mcp("https://mcp.example.com/mcp", ex), "server.secrets_key_env: required with auth mode exchange"},
		{"agent plain http", server + agent("http://agent.example.com", ex), "its url must be https"},
		{"mcp stdio", server + "mcp_servers: [{name: m, command: [x], " + ex + "}]\n", "needs a peer reached over HTTP"},
		{"agent Authorization header", server + "agents: [{name: a, url: \"https://a.example.com\", headers: {Authorization: x}, " + ex + "}]\n", "sets the Authorization header itself"},
		{"no token_url", server + agent("https://a.example.com", strings.Replace(ex, `token_url: "https://idp.example.com/token", `, "", 1)), "agents[0].auth.token_url: required with mode exchange"},
		{"http token_url", server + agent("https://a.example.com", strings.Replace(ex, "https://idp.example.com/token", "http://idp.example.com/token", 1)), "agents[0].auth.token_url: must be an https URL"},
		{"no audience", server + mcp("https://m.example.com/mcp", strings.Replace(ex, "audience: tools, ", "", 1)), "mcp_servers[0].auth.audience: required with mode exchange"},
		{"no client secret", server + agent("https://a.example.com", strings.Replace(ex, ", client_secret_env: S", "", 1)), "needs client_id and client_secret_env"},
		{"secret is a value", server + agent("https://a.example.com", strings.Replace(ex, "client_secret_env: S", `client_secret_env: "s3cr3t value"`, 1)), "must be the name of an environment variable"},
		{"bad scope", server + agent("https://a.example.com", strings.Replace(ex, "[tools:call]", `["a b"]`, 1)), "agents[0].auth.scopes[0]: not an OAuth scope token"},
		{"token_url without exchange", mcp("https://m.example.com/mcp", `auth: {mode: none, token_url: "https://x.example.com/token"}`), "token_url and audience need mode exchange"},
		{"agent bad mode", agent("https://a.example.com", "auth: {mode: user}"), "must be none or exchange"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadYAML(t, tc.yaml, env{"S": "secret", "K": "key"})
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestExchangeEnv: at start the secrets key and each agent's client secret must be set;
// the agent's secret is read and is redacted from logs.
func TestExchangeEnv(t *testing.T) {
	const text = "server: {secrets_key_env: K, oidc: {issuer: \"https://idp.example.com\", audience: baton}}\n" +
		`agents: [{name: a, url: "https://a.example.com", auth: {mode: exchange, token_url: "https://idp.example.com/token", audience: tools, client_id: baton, client_secret_env: S}}]` + "\n"
	c, err := loadYAML(t, text, env{"S": "x", "K": "y"})
	require.NoError(t, err)
	require.True(t, UsesExchange(c))
	key := "1:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("A", 32)))
	_, err = c.SignIn(env{"S": "agent-secret"}.get)
	require.ErrorIs(t, err, ErrSignInEnv)
	assert.Contains(t, err.Error(), "auth mode exchange")
	_, err = c.SignIn(env{"K": key}.get)
	require.ErrorIs(t, err, ErrSignInEnv)
	assert.Contains(t, err.Error(), "agents[0].auth.client_secret_env names S")
	si, err := c.SignIn(env{"K": key, "S": "agent-secret"}.get)
	require.NoError(t, err)
	assert.NotNil(t, si.Ring)
	assert.Equal(t, "agent-secret", si.AgentClientSecrets["a"])
	assert.Contains(t, c.Secrets(env{"S": "agent-secret"}.get), "agent-secret")
}
