package config

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMCPServerEnv(t *testing.T) {
	text := "mcp_servers:\n  - name: memory\n    command: [npx, \"@modelcontextprotocol/server-memory\"]\n" +
		"    env: {MEMORY_FILE_PATH: /data/memory.json, API_TOKEN: \"tok ${MEM_TOKEN}\"}\n"
	c, err := loadYAML(t, text, env{"MEM_TOKEN": secretToken})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"MEMORY_FILE_PATH": "/data/memory.json", "API_TOKEN": "tok " + secretToken}, c.MCPServers[0].Env)

	// The values never reach a log line.
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("server", "mcp", c.MCPServers[0])
	assert.NotContains(t, b.String(), secretToken)
	assert.NotContains(t, b.String(), "/data/memory.json")
	assert.Contains(t, b.String(), "API_TOKEN")
}

func TestMCPServerEnvErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unset variable", "mcp_servers:\n  - name: m\n    command: [a]\n    env: {TOKEN: \"${NOPE_TOKEN}\"}\n",
			`baton.yaml: mcp_servers[0].env.TOKEN: environment variable NOPE_TOKEN is not set`},
		{"with url", "mcp_servers:\n  - name: m\n    url: http://x/mcp\n    env: {A: b}\n",
			`baton.yaml: mcp_servers[0].env: only used with command (stdio)`},
		{"bad name", "mcp_servers:\n  - name: m\n    command: [a]\n    env: {\"A=B\": c}\n",
			`baton.yaml: mcp_servers[0].env: "A=B" is not a valid environment variable name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadYAML(t, tt.text, nil)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestUnknownEnv(t *testing.T) {
	text := "llm:\n  provider: openai\n  model: m\n  api_key_env: BATON_OPENAI_KEY\n" +
		"mcp_servers:\n  - name: d\n    url: http://x/mcp\n    headers: {Authorization: \"Bearer ${BATON_DEPLOY_TOKEN}\"}\n"
	e := env{"BATON_DEPLOY_TOKEN": "x"}
	c, err := loadYAML(t, text, e)
	require.NoError(t, err)
	got := c.UnknownEnv([]string{
		"BATON_LLM_MODLE=gpt", "BATON_LLM_MODEL=gpt", "BATON_OPENAI_KEY=sk", "BATON_DEPLOY_TOKEN=x",
		"BATON_LOG_LEVEL=debug", "HOME=/root", "BATON_WHATEVER_THING=1", "BATON_STORE=memory:",
	})
	assert.Equal(t, []UnknownVar{
		{Name: "BATON_LLM_MODLE", Suggest: "BATON_LLM_MODEL"},
		{Name: "BATON_WHATEVER_THING"},
	}, got)
}

// TestUnreadAuthTokens: a bearer-token variable that is set while no configuration names it
// is reported (auth would be off silently); the one server.auth_tokens_env names, empty
// ones, the BATON_SERVER_AUTH_TOKENS_ENV override and unrelated variables are not.
func TestUnreadAuthTokens(t *testing.T) {
	environ := []string{"BATON_AUTH_TOKENS=s3cret", "BATON_ADMIN_AUTH_TOKENS=x", "BATON_EMPTY_AUTH_TOKENS=",
		"BATON_SERVER_AUTH_TOKENS_ENV=BATON_AUTH_TOKENS", "BATON_TOKEN=client-side", "AUTH_TOKENS=other", "HOME=/root"}
	off := Default()
	assert.Equal(t, []string{"BATON_ADMIN_AUTH_TOKENS", "BATON_AUTH_TOKENS"}, off.UnreadAuthTokens(environ))

	on := Default()
	on.Server.AuthTokensEnv = "BATON_AUTH_TOKENS"
	assert.Equal(t, []string{"BATON_ADMIN_AUTH_TOKENS"}, on.UnreadAuthTokens(environ))
	assert.Empty(t, on.UnreadAuthTokens([]string{"BATON_AUTH_TOKENS=s3cret"}))
	assert.Empty(t, off.UnreadAuthTokens([]string{"BATON_AUTH_TOKENS= "}), "an empty variable asks for nothing")
}
