package main

import (
	"context"
	"encoding/json"
	"github.com/baton-dev/baton/internal/testutil"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm/openai"
)

const probeKey = "sk-probe-3c1f9e"

// fakeModels is an OpenAI-compatible server's models endpoint: status (200: the list of
// ids), after checking the bearer key.
func fakeModels(t *testing.T, status int, ids ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK || r.Header.Get("Authorization") != "Bearer "+probeKey {
			w.WriteHeader(http.StatusUnauthorized)
			// As OpenAI does: the message quotes (part of) the key it was sent.
			sent := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + sent + `","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return
		}
		data := []map[string]any{}
		for _, id := range ids {
			data = append(data, map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "test"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// deadURL is the base URL of a port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/v1"
}

// TestModelProbe: the probe tells a model that works from a key the provider refuses, a
// server that is down and a model the provider does not list; /readyz's reason names which,
// and the log line carries the URL and the cause, never the key.
func TestModelProbe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		base      string
		key       string
		want      string // "" = ready
		logs      []string
		notInLogs []string
	}{
		{name: "ready", base: fakeModels(t, 200, "gpt-4.1-mini", "other").URL + "/v1", key: probeKey},
		{name: "unauthorised", base: fakeModels(t, 401).URL + "/v1", key: "sk-wrong-key-77",
			want: "unauthorised: the provider refused the API key (HTTP 401)",
			logs: []string{"/v1/models", "HTTP 401 Unauthorized"}, notInLogs: []string{"sk-wrong-key-77", probeKey, "Incorrect API key"}},
		{name: "unreachable", base: deadURL(t), key: probeKey,
			want: "unreachable: the model provider could not be reached",
			logs: []string{"/v1/models", "connection refused"}, notInLogs: []string{probeKey}},
		{name: "unknown model", base: fakeModels(t, 200, "gpt-4o", "o3").URL + "/v1", key: probeKey,
			want: `unknown model: the provider does not serve "gpt-4.1-mini" (llm.model)`,
			logs: []string{`\"gpt-4.1-mini\" is not among the 2 models`, "/v1/models"}, notInLogs: []string{probeKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := openai.New(openai.Config{BaseURL: tt.base, Model: "gpt-4.1-mini", APIKey: tt.key})
			require.NoError(t, err)
			var logs testutil.SyncBuffer
			p := newModelProbe(m, "gpt-4.1-mini", slog.New(slog.NewTextHandler(&logs, nil)))
			require.ErrorIs(t, p.Ready(), errModelChecking, "nothing is claimed before the first probe")

			p.check(context.Background())
			if tt.want == "" {
				require.NoError(t, p.Ready())
				assert.Contains(t, logs.String(), "model provider ready")
				return
			}
			require.Error(t, p.Ready())
			assert.Contains(t, p.Ready().Error(), tt.want)
			assert.NotContains(t, p.Ready().Error(), "127.0.0.1", "the URL is for the log, not /readyz")
			for _, s := range append(tt.logs, "model provider not ready", strings.TrimSuffix(tt.base, "/v1")+"/v1/models") {
				assert.Contains(t, logs.String(), s)
			}
			for _, s := range tt.notInLogs {
				assert.NotContains(t, logs.String(), s)
			}
			// Logged once per change, not at every probe.
			p.check(context.Background())
			assert.Equal(t, 1, strings.Count(logs.String(), "model provider not ready"))
		})
	}
}

// TestModelProbeService: Start probes at once and Stop ends the loop, also while a probe
// hangs on a server that never answers (it is cancelled).
func TestModelProbeService(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", APIKey: probeKey})
	require.NoError(t, err)
	p := newModelProbe(m, "m", slog.New(slog.DiscardHandler))
	p.timeout = time.Hour
	p.Start(t.Context())
	require.NoError(t, p.Stop(t.Context()))
	require.ErrorIs(t, p.Ready(), errModelChecking, "a probe cut short by Stop records nothing")
	require.NoError(t, p.Stop(t.Context()), "idempotent")
}

// TestReadyzNamesModelReason: a coordinator whose key the provider refuses says so in
// /readyz (degraded, model down: unauthorised) once its first probe has answered.
func TestReadyzNamesModelReason(t *testing.T) {
	llmURL := fakeModels(t, 401).URL + "/v1"
	t.Setenv("PROBE_TEST_KEY", "sk-refused-5e1")
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nstore: \"memory:\"\nllm: {provider: openai, base_url: \""+llmURL+"\", model: gpt-4.1-mini, api_key_env: PROBE_TEST_KEY}\n"), 0o600))
	url, stderr, done := startRun(t, []string{"--config", cfg})

	var model map[string]any
	require.Eventually(t, func() bool {
		_, body := getJSON(t, url+"/readyz")
		model, _ = body["checks"].(map[string]any)["model"].(map[string]any)
		return model != nil && !strings.HasPrefix(model["error"].(string), "checking")
	}, 30*time.Second, 20*time.Millisecond, "the first probe answers")
	assert.Equal(t, "down", model["status"])
	assert.Contains(t, model["error"], "unauthorised")
	code, body := getJSON(t, url+"/readyz")
	assert.Equal(t, http.StatusOK, code, "a model that is down degrades, it does not fail readiness")
	assert.Equal(t, "degraded", body["status"])
	assert.Contains(t, stderr.String(), "url="+llmURL+"/models")
	assert.NotContains(t, stderr.String(), "sk-refused-5e1")

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	assert.Equal(t, 0, <-done)
}
