package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadyzListsEveryModel: with llm.fallback, /readyz lists the primary and each
// fallback by name under checks.models, each with its own state.
func TestReadyzListsEveryModel(t *testing.T) {
	llmURL := fakeModels(t, http.StatusOK, "gpt-4.1-mini").URL + "/v1"
	t.Setenv("PROBE_TEST_KEY", probeKey)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`listen: 127.0.0.1:0
store: "memory:"
llm:
  provider: openai
  base_url: "`+llmURL+`"
  model: gpt-4.1-mini
  api_key_env: PROBE_TEST_KEY
  fallback:
    - {provider: anthropic, model: claude-sonnet-4-5, api_key_env: FALLBACK_TEST_KEY_UNSET}
    - {provider: scripted}
`), 0o600))
	url, _, done := startRun(t, []string{"--config", cfg})

	var models map[string]any
	require.Eventually(t, func() bool {
		_, body := getJSON(t, url+"/readyz")
		models, _ = body["checks"].(map[string]any)["models"].(map[string]any)
		p, _ := models["gpt-4.1-mini"].(map[string]any)
		return p != nil && p["status"] == "up"
	}, 30*time.Second, 20*time.Millisecond, "the primary's first probe answers")
	require.Len(t, models, 3)
	claude := models["claude-sonnet-4-5"].(map[string]any)
	assert.Equal(t, "down", claude["status"])
	assert.True(t, strings.Contains(claude["error"].(string), "FALLBACK_TEST_KEY_UNSET"), claude["error"])
	assert.Equal(t, "up", models["scripted"].(map[string]any)["status"])

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	assert.Equal(t, 0, <-done)
}
