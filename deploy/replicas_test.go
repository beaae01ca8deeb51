package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/baton-dev/baton/internal/config"
)

// The scale-out demo (deploy/replicas): validated against the Compose schema and checked
// for its wiring (two replicas on PostgreSQL, each with its own advertised address, behind
// a round-robin balancer without stickiness that does not buffer SSE). There is no docker
// in CI: nothing here starts containers.

const replicasCompose = "replicas/compose.yml"

// replicasService is the part of a service of the scale-out compose file these tests read.
type replicasService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Networks    []string          `yaml:"networks"`
	DependsOn   any               `yaml:"depends_on"`
}

func readReplicasCompose(t *testing.T) (raw []byte, services map[string]replicasService) {
	t.Helper()
	raw, err := os.ReadFile(replicasCompose)
	require.NoError(t, err)
	var c struct {
		Services map[string]replicasService `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	return raw, c.Services
}

func TestReplicasComposeMatchesTheComposeSpec(t *testing.T) {
	raw, _ := readReplicasCompose(t)
	assert.NoError(t, composeSchema(t).Validate(asJSON(t, raw)))
}

// TestReplicasDockerComposeConfig runs the real `docker compose config` when the compose
// plugin is installed.
func TestReplicasDockerComposeConfig(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker is not installed; the compose file is checked against the Compose schema instead")
	}
	if out, err := exec.Command(docker, "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("the docker compose plugin is not installed (%s); the compose file is checked against the Compose schema instead", strings.TrimSpace(string(out)))
	}
	out, err := exec.Command(docker, "compose", "-f", replicasCompose, "config", "--quiet").CombinedOutput()
	assert.NoError(t, err, "docker compose config:\n%s", out)
}

func TestReplicasComposeIsWired(t *testing.T) {
	_, svc := readReplicasCompose(t)
	require.ElementsMatch(t, []string{"postgres", "coordinator-1", "coordinator-2", "lb", "travel", "research", "demo-mcp"}, keys(svc))

	for _, name := range []string{"coordinator-1", "coordinator-2"} {
		s := svc[name]
		assert.Equal(t, svc["travel"].Image, s.Image, "%s runs the one Baton image", name)
		assert.Equal(t, []string{"coordinator", "--config", "/etc/baton/baton.yaml"}, s.Command[:3], name)
		assert.Contains(t, s.Volumes, "./baton.yaml:/etc/baton/baton.yaml:ro", name)
		assert.True(t, strings.HasPrefix(s.Environment["BATON_STORE"], "postgres://"), "%s is on PostgreSQL", name)
		assert.Contains(t, s.Environment["BATON_STORE"], "@postgres:5432/", "%s reaches the postgres service", name)
		assert.Equal(t, "http://"+name+":8080", s.Environment["BATON_REPLICATION_ADVERTISE_URL"], "%s advertises its own address", name)
		assert.Empty(t, s.Ports, "%s is reached through the balancer only", name)
		deps, ok := s.DependsOn.(map[string]any)
		require.True(t, ok, "%s: depends_on with conditions", name)
		pg, _ := deps["postgres"].(map[string]any)
		assert.Equal(t, "service_healthy", pg["condition"], "%s waits for PostgreSQL to accept connections", name)
	}
	assert.Equal(t, svc["coordinator-1"].Environment["BATON_STORE"], svc["coordinator-2"].Environment["BATON_STORE"], "one database")

	// The balancer: published, round robin over both replicas, no stickiness, SSE unbuffered.
	lb := svc["lb"]
	require.Len(t, lb.Ports, 1)
	assert.True(t, strings.HasSuffix(lb.Ports[0], ":8080"), lb.Ports[0])
	assert.Contains(t, lb.Volumes, "./nginx.conf:/etc/nginx/conf.d/default.conf:ro")
	conf, err := os.ReadFile("replicas/nginx.conf")
	require.NoError(t, err)
	text := regexp.MustCompile(`(?m)#.*$`).ReplaceAllString(string(conf), "") // directives only
	upstream := regexp.MustCompile(`(?s)upstream baton \{(.*?)\}`).FindStringSubmatch(text)
	require.NotNil(t, upstream, "an upstream block")
	servers := regexp.MustCompile(`server (\S+);`).FindAllStringSubmatch(upstream[1], -1)
	var targets []string
	for _, m := range servers {
		targets = append(targets, m[1])
	}
	assert.ElementsMatch(t, []string{"coordinator-1:8080", "coordinator-2:8080"}, targets)
	for _, sticky := range []string{"ip_hash", "hash ", "sticky", "least_conn"} {
		assert.NotContains(t, upstream[1], sticky, "round robin without stickiness")
	}
	for _, d := range []string{"proxy_pass http://baton;", "proxy_buffering off;", "proxy_http_version 1.1;", "proxy_set_header Host $http_host;"} {
		assert.Contains(t, text, d)
	}

	// The replicas' config loads through the coordinator's loader, on PostgreSQL.
	for _, name := range config.EnvVarNames() {
		t.Setenv(name, "")
	}
	t.Setenv("BATON_STORE", composeDefaults(svc["coordinator-1"].Environment["BATON_STORE"]))
	t.Setenv("BATON_REPLICATION_ADVERTISE_URL", svc["coordinator-1"].Environment["BATON_REPLICATION_ADVERTISE_URL"])
	cfg, err := config.Load("replicas/baton.yaml")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(cfg.Store, "postgres://"))
	assert.Equal(t, "http://coordinator-1:8080", cfg.Replication.AdvertiseURL)
	assert.Equal(t, "0.0.0.0:8080", cfg.Listen)
	for _, a := range cfg.Agents {
		assert.Contains(t, svc, a.Name, "agent %s is a service", a.Name)
	}
}

var composeVar = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

// composeDefaults interpolates ${VAR:-default} as compose does with VAR unset.
func composeDefaults(s string) string { return composeVar.ReplaceAllString(s, "$1") }
