package config

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSignInEnv(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	userYAML := "server: {secrets_key_env: BATON_SECRETS_KEY}\nmcp_servers: [{name: m, url: \"http://127.0.0.1:1/mcp\", auth: {mode: user}}]\n"
	serviceYAML := "mcp_servers: [{name: svc, url: \"http://127.0.0.1:1/mcp\", auth: {mode: service, client_id: baton, client_secret_env: SVC_SECRET}}]\n"
	for _, tc := range []struct {
		name, yaml string
		env        env
		wantErr    string
	}{
		{"user with key", userYAML, env{"BATON_SECRETS_KEY": key}, ""},
		{"user key unset", userYAML, env{}, "server.secrets_key_env names BATON_SECRETS_KEY, but that environment variable is unset or empty"},
		{"user key too short", userYAML, env{"BATON_SECRETS_KEY": base64.StdEncoding.EncodeToString([]byte("short"))}, "the key in BATON_SECRETS_KEY cannot be used"},
		{"user key not base64", userYAML, env{"BATON_SECRETS_KEY": "not a key!"}, "cannot be used"},
		{"service with secret", serviceYAML, env{"SVC_SECRET": "s3cr3t"}, ""},
		{"service secret unset", serviceYAML, env{}, "mcp_servers[0].auth.client_secret_env names SVC_SECRET, but that environment variable is unset or empty"},
		{"no oauth, key named but unset", "server: {secrets_key_env: BATON_SECRETS_KEY}\n", env{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadYAML(t, tc.yaml, tc.env)
			require.NoError(t, err)
			got, err := c.SignIn(tc.env.get)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrSignInEnv))
				assert.Contains(t, err.Error(), tc.wantErr)
				for _, v := range tc.env {
					assert.NotContains(t, err.Error(), v, "the error never echoes a value")
				}
				return
			}
			require.NoError(t, err)
			if strings.Contains(tc.yaml, "mode: user") {
				require.NotNil(t, got.Ring)
				sealed := got.Ring.Seal([]byte("tok"), []byte("aad"))
				pt, _, err := got.Ring.Open(sealed, []byte("aad"))
				require.NoError(t, err)
				assert.Equal(t, "tok", string(pt))
			}
			if strings.Contains(tc.yaml, "mode: service") {
				assert.Equal(t, "s3cr3t", got.ClientSecrets["svc"])
				assert.Contains(t, c.Secrets(tc.env.get), "s3cr3t", "the client secret is redacted from logs")
			}
		})
	}
}
