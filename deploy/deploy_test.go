// Package deploy holds the container deployment's configuration (baton.yaml, mounted by
// docker-compose.yml) and the tests that keep the Dockerfile, the compose file and the
// coordinator config consistent with each other and with the code.
//
// Design note: `docker compose config` needs the compose plugin, which CI machines often
// lack. The compose file is therefore validated against the Compose Specification's JSON
// schema (testdata/compose-spec.json, the schema that compose's own loader uses), and the
// real `docker compose config` runs as well when the plugin is installed.
package deploy

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/baton-dev/baton/internal/config"
)

const composePath = "../docker-compose.yml"

// compose is the part of a compose file these tests read.
type compose struct {
	Services map[string]service `yaml:"services"`
	Networks map[string]any     `yaml:"networks"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       map[string]any    `yaml:"build"`
	Command     []string          `yaml:"command"`
	Ports       []string          `yaml:"ports"`
	Expose      []string          `yaml:"expose"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Networks    []string          `yaml:"networks"`
	DependsOn   []string          `yaml:"depends_on"`
	User        string            `yaml:"user"`
	// Profiles mark an optional service (the tracing backend), started only on request.
	Profiles []string `yaml:"profiles"`
}

func readCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile(composePath)
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(b, &c))
	return c
}

// composeSchema resolves the Compose Specification schema.
func composeSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	b, err := os.ReadFile("testdata/compose-spec.json")
	require.NoError(t, err)
	var s jsonschema.Schema
	require.NoError(t, json.Unmarshal(b, &s))
	abs, err := filepath.Abs("testdata")
	require.NoError(t, err)
	// The schema's $id is relative; it needs an absolute base. Nothing is fetched.
	rs, err := s.Resolve(&jsonschema.ResolveOptions{BaseURI: "file://" + filepath.ToSlash(abs) + "/"})
	require.NoError(t, err)
	return rs
}

// asJSON turns a YAML document into the value encoding/json would produce (merge keys
// resolved), which is what the schema validates.
func asJSON(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(doc, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func TestComposeFileMatchesTheComposeSpec(t *testing.T) {
	rs := composeSchema(t)
	valid, err := os.ReadFile(composePath)
	require.NoError(t, err)
	tests := []struct {
		name  string
		doc   string
		valid bool
	}{
		{"docker-compose.yml", string(valid), true},
		// The validator must be able to say no.
		{"unknown service key", "services:\n  a:\n    image: x\n    comand: [x]\n", false},
		{"ports of the wrong type", "services:\n  a:\n    image: x\n    ports: {http: 80}\n", false},
		{"unknown top-level key", "servces:\n  a:\n    image: x\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rs.Validate(asJSON(t, []byte(tt.doc)))
			if tt.valid {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// TestDockerComposeConfig runs the real `docker compose config` when the compose plugin is
// installed.
func TestDockerComposeConfig(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker is not installed; the compose file is checked against the Compose schema instead")
	}
	if out, err := exec.Command(docker, "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("the docker compose plugin is not installed (%s); the compose file is checked against the Compose schema instead", strings.TrimSpace(string(out)))
	}
	out, err := exec.Command(docker, "compose", "-f", composePath, "config", "--quiet").CombinedOutput()
	assert.NoError(t, err, "docker compose config:\n%s", out)
}

var listenFlag = regexp.MustCompile(`^0\.0\.0\.0:(\d+)$`)

// flag returns the value after name in args ("" when absent).
func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestComposeStackIsWiredToTheConfig(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		if len(s.Profiles) > 0 {
			// Optional third-party services (the tracing profile's Jaeger) are not Baton's.
			assert.Equal(t, []string{"tracing"}, s.Profiles, name)
			assert.Equal(t, []string{"baton"}, s.Networks, "%s is on the baton network", name)
			delete(c.Services, name)
		}
	}
	require.ElementsMatch(t, []string{"coordinator", "travel", "research", "demo-mcp"}, keys(c.Services))
	require.Contains(t, c.Networks, "baton")

	commands, err := filepath.Glob("../cmd/*")
	require.NoError(t, err)
	binaries := map[string]bool{}
	for _, p := range commands {
		binaries[filepath.Base(p)] = true
	}
	image := c.Services["coordinator"].Image
	for name, s := range c.Services {
		assert.Equal(t, []string{"baton"}, s.Networks, "%s is on the baton network", name)
		assert.Equal(t, image, s.Image, "%s runs the one Baton image", name)
		assert.NotEmpty(t, s.Build, "%s can build the image", name)
		require.NotEmpty(t, s.Command, name)
		assert.True(t, binaries[s.Command[0]], "%s runs %s, which is not a command under cmd/", name, s.Command[0])
		assert.NotContains(t, []string{"root", "0", "0:0"}, s.User, "%s runs as root", name)
	}

	// The coordinator reads the mounted deploy/baton.yaml.
	coord := c.Services["coordinator"]
	cfgPath := flag(coord.Command, "--config")
	require.NotEmpty(t, cfgPath)
	assert.Contains(t, coord.Volumes, "./deploy/baton.yaml:"+cfgPath+":ro")
	assert.ElementsMatch(t, []string{"travel", "research", "demo-mcp"}, coord.DependsOn)
	for _, env := range []string{"BATON_LLM_PROVIDER", "BATON_LLM_BASE_URL", "BATON_LLM_MODEL", "OPENAI_API_KEY"} {
		assert.Contains(t, coord.Environment, env, "the LLM is switchable through %s", env)
	}
	cfg := loadConfig(t, nil)
	require.Len(t, coord.Ports, 1)
	_, port, err := net.SplitHostPort(cfg.Listen)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(coord.Ports[0], ":"+port), "the published port %s reaches listen %s", coord.Ports[0], cfg.Listen)
	assert.Equal(t, "0.0.0.0", strings.Split(cfg.Listen, ":")[0], "the coordinator listens on all interfaces of its container")

	// Every agent and MCP server of the config is a compose service listening where the
	// config looks for it, and the agents publish the same URL in their cards.
	for _, a := range cfg.Agents {
		s, ok := c.Services[a.Name]
		require.True(t, ok, "agent %s has no service", a.Name)
		u, err := url.Parse(a.URL)
		require.NoError(t, err)
		assert.Equal(t, a.Name, u.Hostname(), "agent %s is reached by its service name", a.Name)
		m := listenFlag.FindStringSubmatch(flag(s.Command, "--listen"))
		require.NotNil(t, m, "%s listens on 0.0.0.0:<port>", a.Name)
		assert.Equal(t, m[1], u.Port(), "agent %s port", a.Name)
		assert.Equal(t, a.Name, flag(s.Command, "--agent"))
		assert.Equal(t, a.URL, flag(s.Command, "--public-url"), "the card of %s names the URL the coordinator uses", a.Name)
		assert.Contains(t, s.Expose, m[1])
	}
	require.Len(t, cfg.MCPServers, 1)
	u, err := url.Parse(cfg.MCPServers[0].URL)
	require.NoError(t, err)
	mcp, ok := c.Services[u.Hostname()]
	require.True(t, ok, "the MCP server %s has no service", u.Hostname())
	m := listenFlag.FindStringSubmatch(flag(mcp.Command, "--listen"))
	require.NotNil(t, m)
	assert.Equal(t, m[1], u.Port())
	assert.Equal(t, "/mcp", u.Path)
	assert.Equal(t, "http", mcp.Command[1])

	// The store lives on the named volume.
	assert.Equal(t, "sqlite:/data/baton.db", cfg.Store)
	assert.Contains(t, coord.Volumes, "baton-data:/data")
	assert.Contains(t, c.Volumes, "baton-data")
}

// loadConfig loads baton.yaml through the coordinator's own loader with env (and nothing
// else) in the BATON_* environment.
func loadConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	for _, name := range append(config.EnvVarNames(), "OPENAI_API_KEY") {
		t.Setenv(name, env[name])
	}
	cfg, err := config.Load("baton.yaml")
	require.NoError(t, err)
	return cfg
}

func TestConfigLLMIsSwitchableFromTheEnvironment(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		provider string
		model    string
		baseURL  string
	}{
		{"offline demo model by default", nil, config.ProviderScripted, "gpt-4.1-mini", ""},
		{"openai", map[string]string{"BATON_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-test"}, config.ProviderOpenAI, "gpt-4.1-mini", ""},
		{"an openai-compatible server", map[string]string{
			"BATON_LLM_PROVIDER": "openai", "BATON_LLM_BASE_URL": "http://ollama:11434/v1", "BATON_LLM_MODEL": "llama3.1",
		}, config.ProviderOpenAI, "llama3.1", "http://ollama:11434/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadConfig(t, tt.env)
			assert.Equal(t, tt.provider, cfg.LLM.Provider)
			assert.Equal(t, tt.model, cfg.LLM.Model)
			assert.Equal(t, tt.baseURL, cfg.LLM.BaseURL)
			assert.Equal(t, "OPENAI_API_KEY", cfg.LLM.APIKeyEnv)
			assert.Equal(t, tt.env["OPENAI_API_KEY"], cfg.LLM.APIKey())
		})
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	var from, user []string
	var last string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			from = append(from, f[1])
			user = nil // USER applies per stage
		case "USER":
			user = append(user, f[1])
		case "CMD":
			last = line
		}
	}
	assert.GreaterOrEqual(t, len(from), 2, "multi-stage build")
	require.NotEmpty(t, user, "the runtime stage sets USER")
	final := user[len(user)-1]
	assert.NotContains(t, []string{"root", "0", "0:0"}, final, "the runtime user is not root")
	assert.Contains(t, string(b), "./cmd/coordinator ./cmd/demo-agent ./cmd/demo-mcp", "the image holds every binary the compose services run")
	c := readCompose(t)
	assert.Contains(t, last, flag(c.Services["coordinator"].Command, "--config"), "the default command reads the config where compose mounts it")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
