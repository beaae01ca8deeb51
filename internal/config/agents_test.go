package config

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const agentsYAML = `
agents:
  - name: research
    url: https://user:p4ssw0rd@agents.example.com
    card_url: https://agents.example.com/.well-known/research/agent-card.json
    headers: {Authorization: "Bearer ${RESEARCH_TOKEN}", X-Team: blue}
    allowed_origins: ["https://cdn.example.com:8443"]
    timeout: 30s
    card_ttl: 2m
`

func TestAgentKeys(t *testing.T) {
	c, err := loadYAML(t, agentsYAML, env{"RESEARCH_TOKEN": secretToken})
	require.NoError(t, err)
	require.Len(t, c.Agents, 1)
	a := c.Agents[0]
	assert.Equal(t, "https://agents.example.com/.well-known/research/agent-card.json", a.CardURL)
	assert.Equal(t, map[string]string{"Authorization": "Bearer " + secretToken, "X-Team": "blue"}, a.Headers)
	assert.Equal(t, []string{"https://cdn.example.com:8443"}, a.AllowedOrigins)
	assert.Equal(t, Duration(2*time.Minute), a.CardTTL)
	assert.Equal(t, Duration(30*time.Second), a.Timeout)

	// Logged, an agent shows neither header values nor the URL's password.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("agent", "agent", a)
	assert.NotContains(t, buf.String(), secretToken)
	assert.NotContains(t, buf.String(), "p4ssw0rd")
	assert.Contains(t, buf.String(), "Authorization")
}

func TestAgentCardTTLDefault(t *testing.T) {
	c, err := loadYAML(t, "agents:\n  - {name: a, url: http://127.0.0.1:1}\n", env{})
	require.NoError(t, err)
	assert.Equal(t, DefaultAgentCardTTL, c.Agents[0].CardTTL)
}

func TestAgentKeysRejected(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, key string
	}{
		{"unset header variable", "agents:\n  - {name: a, url: http://h, headers: {Authorization: \"Bearer ${NOPE}\"}}\n", "agents[0].headers.Authorization"},
		{"bad card url", "agents:\n  - {name: a, url: http://h, card_url: /card.json}\n", "agents[0].card_url"},
		{"origin with a path", "agents:\n  - {name: a, url: http://h, allowed_origins: [\"http://x/a2a\"]}\n", "agents[0].allowed_origins[0]"},
		{"origin not http", "agents:\n  - {name: a, url: http://h, allowed_origins: [\"ftp://x\"]}\n", "agents[0].allowed_origins[0]"},
		{"negative ttl", "agents:\n  - {name: a, url: http://h, card_ttl: -1s}\n", "agents[0].card_ttl"},
		{"bad header name", "agents:\n  - {name: a, url: http://h, headers: {\"X Bad\": v}}\n", "agents[0].headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadYAML(t, tc.yaml, env{})
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.key, fe.Key)
		})
	}
}
