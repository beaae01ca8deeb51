package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/config"
)

// fencedSh finds the ```sh blocks of a Markdown file.
var fencedSh = regexp.MustCompile("(?s)```sh\n(.*?)```")

// readmeAddr is the address the README's examples use (the demo's default listen).
const readmeAddr = "http://127.0.0.1:8080"

// TestREADMECurlExamples runs the README's curl examples, as written, against the demo
// stack (`go run ./cmd/coordinator`), in order: a plain run, an A2A question answered on
// the same thread, an MCP elicitation answered with the payload shape the README shows, an
// approval answered with edited arguments, and a reconnect to the answered run.
func TestREADMECurlExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is required for the README examples (CI is set)")
		}
		t.Skip("curl not found; the README's curl examples were not run")
	}
	b := readDocs(t, filepath.Join("..", ".."))
	var examples []string
	for _, m := range fencedSh.FindAllStringSubmatch(b, -1) {
		if strings.Contains(m[1], readmeAddr+"/agui") {
			examples = append(examples, m[1])
		}
	}
	require.Len(t, examples, 5, "the README's curl examples: a run, a resumed A2A question, a resumed MCP elicitation, an approval, a reconnect")

	t.Setenv("BATON_LISTEN", "127.0.0.1:0")
	t.Setenv("BATON_STORE", "sqlite:"+filepath.Join(t.TempDir(), "baton.db")) // the demo's, in a fresh file
	url, _, done := startRun(t, nil)
	defer func() {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		<-done
	}()

	want := []struct {
		name     string
		contains []string
	}{
		{"a run", []string{`"type":"RUN_FINISHED"`, `[COMPLETED]`}},
		{"the travel agent's question, answered on its thread", []string{`"threadId":"trip"`, `"runId":"r2"`, `12-19 May`, `"type":"SUBAGENT_FINISHED"`, `"type":"RUN_FINISHED"`}},
		{"the deploy tool's question, answered with its payload shape", []string{`"threadId":"ship"`, `to staging`, `"type":"RUN_FINISHED"`}},
		{"an approval with edited arguments", []string{`"threadId":"t3"`, `Would delete release v1.2.4 of web`, `"type":"RUN_FINISHED"`}},
		{"a reconnect replays the trip's second run", []string{"id: 4\n", `"type":"RUN_STARTED"`, `12-19 May`, `"type":"RUN_FINISHED"`}},
	}
	for i, ex := range examples {
		t.Run(want[i].name, func(t *testing.T) {
			script := strings.ReplaceAll(ex, readmeAddr, url)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "sh", "-e", "-c", script).CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, s := range want[i].contains {
				assert.Contains(t, string(out), s)
			}
			assert.NotContains(t, string(out), `"type":"RUN_ERROR"`)
			assert.NotContains(t, string(out), `"outcome":{"type":"interrupt"`, "every question was answered")
		})
	}
}

// TestExampleConfigsLoad: every example config the README points at (examples/*.yaml, the
// compose stack's deploy/baton.yaml and the replicas stack's) loads and validates with the
// loader the coordinator uses, with the variables it names set; the compose config asks
// for the approval the README's approval example answers.
func TestExampleConfigsLoad(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2, "examples/openai.yaml and examples/anthropic.yaml")
	files = append(files, filepath.Join(root, "deploy", "baton.yaml"), filepath.Join(root, "deploy", "replicas", "baton.yaml"))
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`).FindAllStringSubmatch(string(b), -1) {
				t.Setenv(m[1], "set-for-the-test")
			}
			cfg, err := config.Load(f)
			require.NoError(t, err)
			if cfg.LLM.Provider != config.ProviderScripted {
				assert.NotEmpty(t, cfg.LLM.APIKeyEnv, "a real-model example names its key variable")
			}
			if strings.HasSuffix(f, filepath.Join("deploy", "baton.yaml")) {
				assert.Contains(t, cfg.Approvals.Tools, "demo__delete_release", "the README's approval example runs against the compose stack")
			}
		})
	}
}

// TestQuickStartMatchesExamples: the quick start's standalone demo agents and MCP server
// listen where examples/openai.yaml and examples/anthropic.yaml look for them, so that the
// commands and configs work together as written.
func TestQuickStartMatchesExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	b := readDocs(t, root)
	want := map[string]string{} // name in the configs -> URL the README's command serves
	for _, m := range regexp.MustCompile(`go run ./cmd/demo-agent --agent (\w+) --listen ([\w.:\[\]-]+)`).FindAllStringSubmatch(b, -1) {
		want[m[1]] = "http://" + m[2]
	}
	for _, m := range regexp.MustCompile(`go run ./cmd/demo-mcp http --listen ([\w.:\[\]-]+)`).FindAllStringSubmatch(b, -1) {
		want["demo"] = "http://" + m[1] + "/mcp"
	}
	require.Len(t, want, 3, "the README starts travel, research and the demo MCP server")
	for _, name := range []string{"openai.yaml", "anthropic.yaml"} {
		cfg, err := config.Load(filepath.Join(root, "examples", name))
		require.NoError(t, err)
		got := map[string]string{}
		for _, a := range cfg.Agents {
			got[a.Name] = a.URL
		}
		for _, m := range cfg.MCPServers {
			got[m.Name] = m.URL
		}
		assert.Equal(t, want, got, name)
	}
}

// composeImage finds the images a compose file names, dockerFrom a Dockerfile's base
// images.
var (
	composeImage = regexp.MustCompile(`(?m)^\s+image:\s*(\S+)`)
	dockerFrom   = regexp.MustCompile(`(?m)^FROM\s+(\S+)`)
)

// TestREADMEDockerImages: the README's Docker prerequisites name every image the stacks
// pull: the Dockerfile's build stage, the tracing profile's and the replicas stack's.
func TestREADMEDockerImages(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "docs", "docker.md"))
	require.NoError(t, err)
	var images []string
	for _, f := range []string{"docker-compose.yml", filepath.Join("deploy", "replicas", "compose.yml")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, m := range composeImage.FindAllStringSubmatch(string(b), -1) {
			if !strings.HasPrefix(m[1], "baton:") { // built here
				images = append(images, m[1])
			}
		}
	}
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)`).FindSubmatch(df)
	require.NotNil(t, goVersion, "the Dockerfile pins GO_VERSION")
	for _, m := range dockerFrom.FindAllStringSubmatch(string(df), -1) {
		if m[1] != "scratch" {
			images = append(images, strings.ReplaceAll(m[1], "${GO_VERSION}", string(goVersion[1])))
		}
	}
	require.GreaterOrEqual(t, len(images), 4, "golang, jaeger, postgres, nginx")
	section := string(readme)
	start := strings.Index(section, "\n## Prerequisites")
	require.GreaterOrEqual(t, start, 0, "docs/docker.md has a Prerequisites section")
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for _, img := range images {
		assert.Contains(t, section, "`"+img+"`", "docs/docker.md's prerequisites do not list an image a stack pulls")
	}
	assert.Contains(t, section, "docker compose", "compose v2")
}
