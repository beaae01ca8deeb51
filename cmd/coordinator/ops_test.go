package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
)

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"-help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, 0, run(args, &out, &errOut))
			assert.Contains(t, out.String(), "Usage:")
			assert.Contains(t, out.String(), "-config")
			assert.Contains(t, out.String(), "coordinator --config baton.yaml")
			assert.Contains(t, out.String(), "-mcp-stdio")
			assert.Empty(t, errOut.String())
		})
	}
}

func TestBadArguments(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "coordinator: unexpected argument \"serve\" (see coordinator --help)\n"},
		{[]string{"--config", "x.yaml", "extra"}, "coordinator: unexpected argument \"extra\" (see coordinator --help)\n"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, run(tt.args, &out, &errOut))
		assert.Equal(t, tt.want, errOut.String(), "one message, not doubled")
		assert.Empty(t, out.String())
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"--bogus"}, &out, &errOut))
	assert.Equal(t, 1, strings.Count(errOut.String(), "flag provided but not defined"))
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 0, run([]string{"--version"}, &out, &errOut))
	bi, ok := debug.ReadBuildInfo()
	assert.Equal(t, "coordinator "+versionString(version, bi, ok)+"\n", out.String())
	assert.NotEqual(t, "coordinator dev\n", out.String())
}

func TestVersionString(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"pseudo-version from a clone", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123052120-b225b98ec718"}, Settings: vcs("b225b98ec7181234567890", "false")},
			true, "v0.0.0-20261123052120-b225b98ec718"},
		{"tagged", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: vcs("b225b98ec7181234567890", "false")},
			true, "v1.2.0 b225b98ec718"},
		{"local changes", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("b225b98ec7181234567890", "true")},
			true, "(devel) b225b98ec718+dirty"},
		{"no vcs (go run)", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)"},
		{"stamped with -X", "v2.0.0", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "v2.0.0"},
		{"no build info", "dev", nil, false, "(devel)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, versionString(tt.stamped, tt.bi, tt.ok))
		})
	}
}

func TestDisplayURL(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"[::]:8080", "http://localhost:8080"},
		{"0.0.0.0:8080", "http://localhost:8080"},
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"[::1]:9000", "http://[::1]:9000"},
		{"10.1.2.3:80", "http://10.1.2.3:80"},
	}
	for _, tt := range tests {
		a, err := net.ResolveTCPAddr("tcp", tt.addr)
		require.NoError(t, err)
		assert.Equal(t, tt.want, displayURL(a), tt.addr)
	}
}

func TestStoreErrorNotDoubled(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	cfg := filepath.Join(dir, "baton.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nstore: \"sqlite:"+blocker+"/sub/x.db\"\n"), 0o600))
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"--config", cfg, "--log-level", "error"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "coordinator: store: ")
	assert.NotContains(t, errOut.String(), "store: store:")
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// startRun runs the coordinator in-process and returns its URL once it listens.
func startRun(t *testing.T, args []string) (url string, stderr *testutil.SyncBuffer, done chan int) {
	t.Helper()
	var stdout testutil.SyncBuffer
	stderr = &testutil.SyncBuffer{}
	done = make(chan int, 1)
	go func() { done <- run(args, &stdout, stderr) }()
	require.Eventually(t, func() bool {
		select {
		case code := <-done:
			done <- code
			return true
		default:
		}
		return listenRE.MatchString(stdout.String())
	}, 60*time.Second, 10*time.Millisecond)
	m := listenRE.FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "the coordinator did not start: %s", stderr.String())
	return m[1], stderr, done
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

// A coordinator whose MCP server never answers initialize and whose model key is unset
// serves at once: /healthz answers while the MCP server's first connection attempt (30 s)
// is still running, and /readyz says degraded, naming each dependency.
func TestStartsDegraded(t *testing.T) {
	t.Setenv("BATON_LLM_MODLE", "typo")
	t.Setenv("OPS_TEST_UNSET_KEY", "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "baton.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`listen: 127.0.0.1:0
store: "memory:"
llm: {provider: openai, model: gpt-4.1-mini, api_key_env: OPS_TEST_UNSET_KEY}
mcp_servers:
  - name: mute
    command: [sleep, "300"]
`), 0o600))
	url, stderr, done := startRun(t, []string{"--config", cfg})

	resp, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	code, body := getJSON(t, url+"/readyz")
	assert.Equal(t, http.StatusOK, code, "only the store or a drain make it 503")
	assert.Equal(t, "degraded", body["status"])
	checks := body["checks"].(map[string]any)
	assert.Equal(t, map[string]any{"status": "up"}, checks["store"])
	assert.Equal(t, map[string]any{"status": "down", "error": "the API key variable OPS_TEST_UNSET_KEY (llm.api_key_env) is not set"}, checks["model"])
	assert.Equal(t, map[string]any{"mute": map[string]any{"status": "down", "error": "connecting"}}, checks["mcp"],
		"the listener opened while the MCP server's first attempt was still running")
	code, _ = getJSON(t, url+"/readyz?strict=1")
	assert.Equal(t, http.StatusServiceUnavailable, code)

	logs := stderr.String()
	assert.Contains(t, logs, "did you mean BATON_LLM_MODEL?")
	assert.Contains(t, logs, "name=BATON_LLM_MODLE")
	assert.NotContains(t, logs, "typo", "values of unknown variables are not logged")
	assert.Contains(t, logs, "OPS_TEST_UNSET_KEY (llm.api_key_env) is not set")

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	assert.Equal(t, 0, <-done)
}

// SIGTERM turns /readyz to 503 "draining" at once, while an active run still holds the
// process in its grace period.
func TestSIGTERMDrains(t *testing.T) {
	t.Setenv("BATON_LISTEN", "127.0.0.1:0")
	t.Setenv("BATON_STORE", "sqlite:"+filepath.Join(t.TempDir(), "baton.db"))
	url, _, done := startRun(t, nil) // the demo stack

	code, body := getJSON(t, url+"/readyz")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready", body["status"], "%v", body)
	// The demo stack's suggestions are the demo's.
	_, sugg := getJSON(t, url+"/suggestions.json")
	assert.Contains(t, sugg["suggestions"], "count slowly to 60")

	// A run that lasts (one number a second) holds the drain.
	req, err := http.NewRequest(http.MethodPost, url+"/agui", strings.NewReader(
		`{"threadId":"drain","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"count slowly to 60"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"ACTIVITY_SNAPSHOT"`) {
			break // counting is under way
		}
	}
	require.NoError(t, sc.Err())

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	require.Eventually(t, func() bool {
		r, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		return r.StatusCode == http.StatusServiceUnavailable && b["status"] == "draining"
	}, 10*time.Second, 5*time.Millisecond, "/readyz did not report draining")
	select {
	case <-done:
		t.Fatal("the process ended before its active run")
	default:
	}
	stop, err := http.Post(url+"/agui/threads/drain/runs/r1/stop", "application/json", nil)
	require.NoError(t, err)
	stop.Body.Close()
	assert.Equal(t, 0, <-done)
}
