package config

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// designExample is the example of DESIGN §4.
const designExample = `
listen: 127.0.0.1:8080
server:
  auth_tokens_env: BATON_AUTH_TOKENS  # comma-separated bearer tokens; unset = no auth
  allowed_origins: []         # extra Origins allowed to POST when auth is off
  max_body_bytes: 1048576
  max_active_runs: 1000
  shutdown_grace: 10s
llm:
  provider: openai            # openai | anthropic | scripted
  base_url: https://api.openai.com/v1
  model: gpt-4.1-mini
  api_key_env: OPENAI_API_KEY # the name of the variable, never the key itself
agents:                       # A2A sub-agents
  - name: research            # the LLM tool name (see section 5)
    url: http://127.0.0.1:41241   # base URL; the card is read from /.well-known/agent-card.json
    timeout: 120s             # active time, not counting time spent waiting for the user
    input_required: ask_user  # ask_user (default): input-required and auth-required raise an AG-UI interrupt at once
                              # model: the LLM gets the [INPUT_REQUIRED…]/[AUTH_REQUIRED…] tag and decides
mcp_servers:
  - name: files
    command: ["npx", "mcp-server-everything"]   # stdio
  - name: deploy
    url: http://127.0.0.1:3901/mcp              # streamable HTTP
    headers: {Authorization: "Bearer ${DEPLOY_TOKEN}"}
    on_tool_error: retry      # retry (default) | fail | error (section 6)
limits:
  max_iterations: 25
  max_run_seconds: 600        # active time
  tool_timeout: 120s
store: sqlite:./data/baton.db # or memory:
`

const secretToken = "s3cr3t-t0ken"

// env is a fixed environment for load.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// loadYAML writes text to baton.yaml in a fresh directory and loads it from there, so
// that messages carry the plain file name.
func loadYAML(t *testing.T, text string, e env) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "baton.yaml"), []byte(text), 0o600))
	t.Chdir(dir)
	return load("baton.yaml", e.get)
}

func TestLoadDesignExample(t *testing.T) {
	c, err := loadYAML(t, designExample, env{"DEPLOY_TOKEN": secretToken})
	require.NoError(t, err)

	assert.Equal(t, "baton.yaml", c.Source)
	assert.Equal(t, "127.0.0.1:8080", c.Listen)
	assert.Equal(t, Server{AuthTokensEnv: "BATON_AUTH_TOKENS", MaxBodyBytes: 1048576, ShutdownGrace: Duration(10 * time.Second), AllowedOrigins: []string{}, MaxActiveRuns: 1000, EventRetention: DefaultEventRetention, ReconnectGrace: DefaultReconnectGrace}, c.Server)
	assert.Equal(t, Replication{Heartbeat: DefaultHeartbeat, Lease: DefaultLease}, c.Replication)
	assert.Equal(t, LLM{Provider: "openai", BaseURL: "https://api.openai.com/v1", Model: "gpt-4.1-mini", APIKeyEnv: "OPENAI_API_KEY"}, c.LLM)
	assert.Equal(t, []Agent{{Name: "research", URL: "http://127.0.0.1:41241", Timeout: Duration(120 * time.Second), CardTTL: DefaultAgentCardTTL, InputRequired: "ask_user"}}, c.Agents)
	assert.Equal(t, []MCPServer{
		{Name: "files", Command: []string{"npx", "mcp-server-everything"}, OnToolError: "retry"},
		{Name: "deploy", URL: "http://127.0.0.1:3901/mcp", Headers: map[string]string{"Authorization": "Bearer " + secretToken}, OnToolError: "retry"},
	}, c.MCPServers)
	assert.Equal(t, Limits{MaxIterations: 25, MaxRunSeconds: 600, ToolTimeout: Duration(120 * time.Second), CancelHorizon: DefaultCancelHorizon}, c.Limits)
	assert.Equal(t, Default().Policy, c.Policy, "no policy: everything is allowed")
	assert.Equal(t, Loop{SoftThreshold: 2, HardThreshold: 3, StallTurns: 3}, c.Loop)
	assert.Equal(t, "sqlite:./data/baton.db", c.Store)
	assert.Equal(t, "./data/baton.db", c.StorePath())
}

func TestLoadAppliesDefaults(t *testing.T) {
	c, err := loadYAML(t, `
agents:
  - name: travel
    url: http://127.0.0.1:41250
mcp_servers:
  - name: demo
    url: http://127.0.0.1:3901/mcp
limits:
  max_iterations: 5
server: ~
`, nil)
	require.NoError(t, err)
	want := Default()
	want.Source = "baton.yaml"
	want.Agents = []Agent{{Name: "travel", URL: "http://127.0.0.1:41250", Timeout: DefaultAgentTimeout, CardTTL: DefaultAgentCardTTL, InputRequired: InputRequiredAskUser}}
	want.MCPServers = []MCPServer{{Name: "demo", URL: "http://127.0.0.1:3901/mcp", OnToolError: OnToolErrorRetry}}
	want.Limits.MaxIterations = 5
	assert.Equal(t, want, c)
}

func TestLoadMergeKeys(t *testing.T) {
	_, err := loadYAML(t, `
x-agent: &agent
  timeout: 30s
  input_required: model
agents:
  - <<: *agent
    name: research
    url: http://127.0.0.1:41241
`, nil)
	require.Error(t, err, "x-agent is not a known key")
	assert.Equal(t, "baton.yaml: x-agent: unknown key (line 2)", err.Error())

	c, err := loadYAML(t, `
agents:
  - &agent
    name: research
    url: http://127.0.0.1:41241
    timeout: 30s
  - <<: *agent
    name: research2
`, nil)
	require.NoError(t, err)
	require.Len(t, c.Agents, 2)
	assert.Equal(t, Agent{Name: "research2", URL: "http://127.0.0.1:41241", Timeout: Duration(30 * time.Second), CardTTL: DefaultAgentCardTTL, InputRequired: "ask_user"}, c.Agents[1])
}

func TestLoadEmptyFileIsDefaults(t *testing.T) {
	c, err := loadYAML(t, "# nothing here\n", nil)
	require.NoError(t, err)
	want := Default()
	want.Source = "baton.yaml"
	assert.Equal(t, want, c)
}

func TestDurationForms(t *testing.T) {
	tests := []struct {
		yaml string
		want time.Duration
	}{
		{"30", 30 * time.Second},
		{`"45"`, 45 * time.Second},
		{"1m30s", 90 * time.Second},
		{"250ms", 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			c, err := loadYAML(t, "limits:\n  tool_timeout: "+tt.yaml+"\n", nil)
			require.NoError(t, err)
			assert.Equal(t, Duration(tt.want), c.Limits.ToolTimeout)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	const agent0 = "agents:\n  - name: research\n    url: http://127.0.0.1:41241\n"
	const mcp0 = "mcp_servers:\n  - name: demo\n    url: http://127.0.0.1:3901/mcp\n"
	tests := []struct {
		name string
		yaml string
		env  env
		want string
	}{
		{"unknown provider", "llm:\n  provider: gpt\n", nil,
			`baton.yaml: llm.provider: must be one of openai, anthropic, scripted (got "gpt")`},
		{"model required", "llm:\n  provider: anthropic\n", nil,
			`baton.yaml: llm.model: required for provider anthropic`},
		{"llm base url", "llm:\n  base_url: api.openai.com\n", nil,
			`baton.yaml: llm.base_url: not an absolute http(s) URL`},
		{"api key instead of its variable", "llm:\n  api_key_env: sk-" + secretToken + "\n", nil,
			`baton.yaml: llm.api_key_env: must be the name of an environment variable, not the key itself`},
		{"on_disconnect unknown", "server:\n  on_disconnect: keep\n", nil,
			`baton.yaml: server.on_disconnect: must be cancel or detach (got "keep")`},
		{"reconnect grace zero", "server:\n  on_disconnect: detach\n  reconnect_grace: 0s\n", nil,
			`baton.yaml: server.reconnect_grace: must be positive (got 0s)`},
		{"stream buffer negative", "server:\n  stream_buffer_bytes: -1\n", nil,
			`baton.yaml: server.stream_buffer_bytes: must not be negative (got -1)`},
		{"llm idle timeout negative", "llm:\n  idle_timeout: -1s\n", nil,
			`baton.yaml: llm.idle_timeout: must not be negative (got -1s)`},
		{"agent url", agent0 + "  - name: travel\n    url: 127.0.0.1:41250\n", nil,
			`baton.yaml: agents[1].url: not an absolute http(s) URL`},
		{"agent url missing", "agents:\n  - name: travel\n", nil,
			`baton.yaml: agents[0].url: required`},
		{"agent name missing", "agents:\n  - url: http://x\n", nil,
			`baton.yaml: agents[0].name: required`},
		{"duplicate agent", agent0 + "  - name: research\n    url: http://127.0.0.1:41242\n", nil,
			`baton.yaml: agents[1].name: duplicate of agents[0] (both are the tool "research")`},
		{"duplicate agent after sanitising", "agents:\n  - name: deep research\n    url: http://a\n  - name: deep_research\n    url: http://b\n", nil,
			`baton.yaml: agents[1].name: duplicate of agents[0] (both are the tool "deep_research")`},
		{"agent named ask_user", "agents:\n  - name: ask_user\n    url: http://a\n", nil,
			`baton.yaml: agents[0].name: "ask_user" is reserved for the built-in ask_user tool`},
		{"agent collides with mcp tool", "agents:\n  - name: files__read\n    url: http://a\nmcp_servers:\n  - name: files\n    command: [srv]\n", nil,
			`baton.yaml: agents[0].name: "files__read" collides with the tools of mcp server "files" (named files__<tool>)`},
		{"input_required unknown", agent0 + "    input_required: always\n", nil,
			`baton.yaml: agents[0].input_required: must be one of ask_user, model (got "always")`},
		{"agent timeout bad", agent0 + "    timeout: soon\n", nil,
			`baton.yaml: agents[0].timeout: must be a duration such as "120s" or a number of seconds (got "soon") (line 4)`},
		{"agent timeout negative", agent0 + "    timeout: -5s\n", nil,
			`baton.yaml: agents[0].timeout: must not be negative (got -5s)`},
		{"duplicate mcp server", "mcp_servers:\n  - name: files\n    command: [a]\n  - name: files\n    command: [b]\n", nil,
			`baton.yaml: mcp_servers[1].name: duplicate of mcp_servers[0] (both are "files")`},
		{"mcp name with separator", "mcp_servers:\n  - name: my__files\n    command: [a]\n", nil,
			`baton.yaml: mcp_servers[0].name: must not contain "__" (it separates server and tool in tool names)`},
		{"mcp both command and url", "mcp_servers:\n  - name: files\n    command: [a]\n    url: http://x/mcp\n", nil,
			`baton.yaml: mcp_servers[0]: set either command (stdio) or url (streamable HTTP), not both`},
		{"mcp neither command nor url", "mcp_servers:\n  - name: files\n", nil,
			`baton.yaml: mcp_servers[0]: set command (stdio) or url (streamable HTTP)`},
		{"mcp empty program", "mcp_servers:\n  - name: files\n    command: [\"\", x]\n", nil,
			`baton.yaml: mcp_servers[0].command: the program (first element) must not be empty`},
		{"mcp url", "mcp_servers:\n  - name: files\n    url: ftp://x\n", nil,
			`baton.yaml: mcp_servers[0].url: not an absolute http(s) URL`},
		{"mcp headers with command", "mcp_servers:\n  - name: files\n    command: [a]\n    headers: {X-Key: " + secretToken + "}\n", nil,
			`baton.yaml: mcp_servers[0].headers: only used with url`},
		{"mcp header variable unset", "mcp_servers:\n  - name: deploy\n    url: http://x/mcp\n    headers: {Authorization: \"Bearer ${DEPLOY_TOKEN}\"}\n", nil,
			`baton.yaml: mcp_servers[0].headers.Authorization: environment variable DEPLOY_TOKEN is not set`},
		{"on_tool_error unknown", "mcp_servers:\n  - name: files\n    command: [a]\n    on_tool_error: ignore\n", nil,
			`baton.yaml: mcp_servers[0].on_tool_error: must be one of retry, fail, error (got "ignore")`},
		{"negative max_iterations", "limits:\n  max_iterations: -1\n", nil,
			`baton.yaml: limits.max_iterations: must be positive (got -1)`},
		{"zero max_run_seconds", "limits:\n  max_run_seconds: 0\n", nil,
			`baton.yaml: limits.max_run_seconds: must be positive (got 0)`},
		{"negative tool_timeout", "limits:\n  tool_timeout: -3s\n", nil,
			`baton.yaml: limits.tool_timeout: must be positive (got -3s)`},
		{"zero interrupt ttl", "interrupts:\n  ttl: 0s\n", nil,
			`baton.yaml: interrupts.ttl: must be positive (got 0s)`},
		{"bad tool_timeout", "limits:\n  tool_timeout: 3 minutes\n", nil,
			`baton.yaml: limits.tool_timeout: must be a duration such as "120s" or a number of seconds (got "3 minutes") (line 2)`},
		{"non-integer limit", "limits:\n  max_iterations: many\n", nil,
			`baton.yaml: limits.max_iterations: must be an integer (got "many") (line 2)`},
		{"zero max_body_bytes", "server:\n  max_body_bytes: 0\n", nil,
			`baton.yaml: server.max_body_bytes: must be positive (got 0)`},
		{"negative shutdown_grace", "server:\n  shutdown_grace: -1s\n", nil,
			`baton.yaml: server.shutdown_grace: must not be negative (got -1s)`},
		{"auth tokens instead of variable", "server:\n  auth_tokens_env: " + secretToken + "\n", nil,
			`baton.yaml: server.auth_tokens_env: must be the name of an environment variable, not the tokens themselves`},
		{"listen without port", "listen: localhost\n", nil,
			`baton.yaml: listen: must be host:port (got "localhost")`},
		{"listen bad port", "listen: localhost:http\n", nil,
			`baton.yaml: listen: port must be a number from 0 to 65535 (got "http")`},
		{"unknown top-level key", "listen: 127.0.0.1:8080\nagent:\n  - name: x\n", nil,
			`baton.yaml: agent: unknown key (line 2)`},
		{"unknown nested key", "server:\n  max_body: 5\n", nil,
			`baton.yaml: server.max_body: unknown key (line 2)`},
		{"unknown key in list entry", agent0 + "    timout: 5s\n", nil,
			`baton.yaml: agents[0].timout: unknown key (line 4)`},
		{"duplicate key", "llm:\n  model: a\n  model: b\n", nil,
			`baton.yaml: llm.model: duplicate key (line 3)`},
		{"list expected", "agents:\n  name: x\n", nil,
			`baton.yaml: agents: must be a list (line 2)`},
		{"mapping expected", "llm: openai\n", nil,
			`baton.yaml: llm: must be a mapping (line 1)`},
		{"string expected", "llm:\n  model: [a, b]\n", nil,
			`baton.yaml: llm.model: must be a string (line 2)`},
		{"store scheme", "store: mysql://user:" + secretToken + "@db/baton\n", nil,
			`baton.yaml: store: must be "memory:", "sqlite:<path>" or "postgres://…" (got "mysql:…")`},
		{"store postgres without host", "store: postgres://\n", nil,
			`baton.yaml: store: a PostgreSQL store needs a URL with a host, e.g. "postgres://baton@db:5432/baton"`},
		{"store postgres bad url", "store: \"postgres://user:" + secretToken + "@db:port/baton\"\n", nil,
			`baton.yaml: store: a PostgreSQL store needs a URL with a host, e.g. "postgres://baton@db:5432/baton"`},
		{"event_retention zero", "server:\n  event_retention: 0s\n", nil,
			`baton.yaml: server.event_retention: must be positive (got 0s)`},
		{"lease shorter than two heartbeats", "replication:\n  heartbeat: 2s\n  lease: 3s\n", nil,
			`baton.yaml: replication.lease: must be at least twice replication.heartbeat (got 3s with a heartbeat of 2s)`},
		{"heartbeat zero", "replication:\n  heartbeat: 0s\n", nil,
			`baton.yaml: replication.heartbeat: must be positive (got 0s)`},
		{"store without scheme", "store: ./baton.db\n", nil,
			`baton.yaml: store: must be "memory:", "sqlite:<path>" or "postgres://…"`},
		{"store sqlite without path", "store: \"sqlite:\"\n", nil,
			`baton.yaml: store: sqlite needs a path, e.g. "sqlite:./data/baton.db"`},
		{"invalid yaml", "llm:\n  model: a\n   b: c\n", nil,
			`baton.yaml: invalid YAML: line 3: mapping values are not allowed in this context; check the indentation, and quote a value that contains ": " or ends with ":", e.g. store: "memory:"`},
		{"two documents", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", nil,
			`baton.yaml: the file must hold a single YAML document`},
		{"policy agent unknown", agent0 + "policy:\n  agents: {deny: [reserch]}\n", nil,
			`baton.yaml: policy.agents.deny[0]: "reserch" matches no configured agent`},
		{"policy agent pattern matching nothing", agent0 + "policy:\n  agents: {allow: [\"t*\"]}\n", nil,
			`baton.yaml: policy.agents.allow[0]: "t*" matches no configured agent`},
		{"policy agent bad pattern", agent0 + "policy:\n  agents: {allow: [\"[\"]}\n", nil,
			`baton.yaml: policy.agents.allow[0]: bad pattern "["`},
		{"policy tool without server", mcp0 + "policy:\n  tools: {deny: [divide]}\n", nil,
			`baton.yaml: policy.tools.deny[0]: must be <server>__<tool>, as the model sees MCP tools (got "divide")`},
		{"policy tool of an unknown server", mcp0 + "policy:\n  tools: {deny: [files__read]}\n", nil,
			`baton.yaml: policy.tools.deny[0]: "files__read" names no configured mcp server ("files")`},
		{"policy tool in both lists", mcp0 + "policy:\n  tools: {allow: [demo__divide], deny: [demo__divide]}\n", nil,
			`baton.yaml: policy.tools.deny[0]: "demo__divide" is also in policy.tools.allow; list it in one of them`},
		{"policy tools not a mapping", mcp0 + "policy:\n  tools: [demo__divide]\n", nil,
			`baton.yaml: policy.tools: must be a mapping (line 5)`},
		{"policy unknown key", "policy:\n  budgets: {}\n", nil,
			`baton.yaml: policy.budgets: unknown key (line 2)`},
		{"rate limit without tool", "policy:\n  rate_limits: [{max_calls: 1, per: 1m}]\n", nil,
			`baton.yaml: policy.rate_limits[0].tool: required`},
		{"rate limit pattern", mcp0 + "policy:\n  rate_limits: [{tool: \"demo__*\", max_calls: 1, per: 1m}]\n", nil,
			`baton.yaml: policy.rate_limits[0].tool: must name one tool, not a pattern (got "demo__*")`},
		{"rate limit unknown tool", mcp0 + "policy:\n  rate_limits: [{tool: research, max_calls: 1, per: 1m}]\n", nil,
			`baton.yaml: policy.rate_limits[0].tool: must be <server>__<tool>, as the model sees MCP tools (got "research")`},
		{"rate limit zero calls", mcp0 + "policy:\n  rate_limits: [{tool: demo__divide, per: 1m}]\n", nil,
			`baton.yaml: policy.rate_limits[0].max_calls: must be positive (got 0)`},
		{"rate limit no window", mcp0 + "policy:\n  rate_limits: [{tool: demo__divide, max_calls: 5}]\n", nil,
			`baton.yaml: policy.rate_limits[0].per: must be positive (got 0s)`},
		{"rate limit bad window", mcp0 + "policy:\n  rate_limits: [{tool: demo__divide, max_calls: 5, per: soon}]\n", nil,
			`baton.yaml: policy.rate_limits[0].per: must be a duration such as "120s" or a number of seconds (got "soon") (line 5)`},
		{"rate limit duplicate", agent0 + "policy:\n  rate_limits: [{tool: research, max_calls: 1, per: 1m}, {tool: research, max_calls: 2, per: 1h}]\n", nil,
			`baton.yaml: policy.rate_limits[1].tool: duplicate of policy.rate_limits[0] (both limit "research")`},
		{"negative tool-call budget", "policy:\n  budget: {max_tool_calls: -1}\n", nil,
			`baton.yaml: policy.budget.max_tool_calls: must not be negative (got -1); 0 means no limit`},
		{"negative token budget", "policy:\n  budget: {max_tokens: -5}\n", nil,
			`baton.yaml: policy.budget.max_tokens: must not be negative (got -5); 0 means no limit`},
		{"approval agent unknown", agent0 + "approvals:\n  agents: [reserch]\n", nil,
			`baton.yaml: approvals.agents[0]: "reserch" matches no configured agent`},
		{"approval agent bad pattern", agent0 + "approvals:\n  agents: [\"[\"]\n", nil,
			`baton.yaml: approvals.agents[0]: bad pattern "["`},
		{"approval tool bad pattern", mcp0 + "approvals:\n  tools: [\"demo__[\"]\n", nil,
			`baton.yaml: approvals.tools[0]: bad pattern "demo__["`},
		{"approval tool of an unknown server", mcp0 + "approvals:\n  tools: [files__delete]\n", nil,
			`baton.yaml: approvals.tools[0]: "files__delete" names no configured mcp server ("files")`},
		{"approval tool neither agent nor mcp tool", mcp0 + "approvals:\n  tools: [delete_release]\n", nil,
			`baton.yaml: approvals.tools[0]: "delete_release" names no configured agent, and an MCP tool must be <server>__<tool>, as the model sees it`},
		{"approval destructive not a bool", "approvals:\n  destructive: sometimes\n", nil,
			`baton.yaml: approvals.destructive: must be a boolean (got "sometimes") (line 2)`},
		{"approval unknown key", "approvals:\n  tool: []\n", nil,
			`baton.yaml: approvals.tool: unknown key (line 2)`},
		{"loop soft zero", "loop:\n  soft_threshold: 0\n", nil,
			`baton.yaml: loop.soft_threshold: must be at least 1 (got 0)`},
		{"loop hard not above soft", "loop:\n  soft_threshold: 3\n  hard_threshold: 3\n", nil,
			`baton.yaml: loop.hard_threshold: must be greater than loop.soft_threshold (3) (got 3)`},
		{"loop negative stall", "loop:\n  stall_turns: -1\n", nil,
			`baton.yaml: loop.stall_turns: must not be negative (got -1); 0 turns stall detection off`},
		{"loop env attributed", "", env{"BATON_LOOP_HARD_THRESHOLD": "1"},
			`BATON_LOOP_HARD_THRESHOLD: loop.hard_threshold: must be greater than loop.soft_threshold (2) (got 1)`},
		{"env value attributed to its variable", "llm:\n  provider: openai\n  model: m\n", env{"BATON_LLM_PROVIDER": "gpt"},
			`BATON_LLM_PROVIDER: llm.provider: must be one of openai, anthropic, scripted (got "gpt")`},
		{"env parse error", "", env{"BATON_LIMITS_MAX_ITERATIONS": "lots"},
			`BATON_LIMITS_MAX_ITERATIONS: limits.max_iterations: must be an integer (got "lots")`},
		{"env duration error", "", env{"BATON_SERVER_SHUTDOWN_GRACE": "later"},
			`BATON_SERVER_SHUTDOWN_GRACE: server.shutdown_grace: must be a duration such as "120s" or a number of seconds (got "later")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadYAML(t, tt.yaml, tt.env)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Equal(t, tt.want, err.Error())
			assert.NotContains(t, err.Error(), secretToken, "a secret leaked into the message")
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	c, err := loadYAML(t, `
agents:
  - name: research
    url: http://127.0.0.1:41241
  - name: deep research
    url: http://127.0.0.1:41242
mcp_servers:
  - name: demo
    url: http://127.0.0.1:3901/mcp
policy:
  agents: {allow: [research, "deep*"], deny: [deep_research]}
  tools: {deny: ["demo__*"], allow: [demo__divide]}
  rate_limits:
    - {tool: demo__divide, max_calls: 5, per: 1m}
    - {tool: research, max_calls: 10, per: 3600}
  budget: {max_tool_calls: 50, max_tokens: 200000}
loop: {soft_threshold: 1, hard_threshold: 4, stall_turns: 0}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, Policy{
		Agents: AccessList{Allow: []string{"research", "deep*"}, Deny: []string{"deep_research"}},
		Tools:  AccessList{Allow: []string{"demo__divide"}, Deny: []string{"demo__*"}},
		RateLimits: []RateLimit{
			{Tool: "demo__divide", MaxCalls: 5, Per: Duration(time.Minute)},
			{Tool: "research", MaxCalls: 10, Per: Duration(time.Hour)},
		},
		Budget: Budget{MaxToolCalls: 50, MaxTokens: 200000, WarnAt: DefaultBudgetWarnAt}, PrincipalBudget: PrincipalBudget{WarnAt: DefaultBudgetWarnAt},
	}, c.Policy)
	assert.Equal(t, Loop{SoftThreshold: 1, HardThreshold: 4, StallTurns: 0}, c.Loop)
}

func TestLoadApprovals(t *testing.T) {
	c, err := loadYAML(t, `
agents:
  - name: research
    url: http://127.0.0.1:41241
mcp_servers:
  - name: demo
    url: http://127.0.0.1:3901/mcp
approvals:
  tools: [demo__delete_release, "demo__dep*", research]
  agents: ["res*"]
  destructive: true
`, nil)
	require.NoError(t, err)
	assert.Equal(t, Approvals{Tools: []string{"demo__delete_release", "demo__dep*", "research"}, Agents: []string{"res*"}, Destructive: true}, c.Approvals)
	assert.False(t, c.Approvals.Empty())

	c, err = loadYAML(t, "", nil)
	require.NoError(t, err)
	assert.True(t, c.Approvals.Empty(), "no config: no approvals")
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, ErrInvalid)
}

func TestLoadUsesProcessEnvironment(t *testing.T) {
	t.Setenv("DEPLOY_TOKEN", secretToken)
	t.Setenv("BATON_STORE", "memory:")
	dir := t.TempDir()
	path := filepath.Join(dir, "baton.yaml")
	require.NoError(t, os.WriteFile(path, []byte(designExample), 0o600))
	c, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, path, c.Source)
	assert.Equal(t, "memory:", c.Store)
	assert.Equal(t, "", c.StorePath())
	assert.Equal(t, "Bearer "+secretToken, c.MCPServers[1].Headers["Authorization"])
}

func TestApplyEnvOverridesEveryScalarKey(t *testing.T) {
	e := env{
		"BATON_LISTEN":                           "0.0.0.0:9090",
		"BATON_LLM_PROVIDER":                     "anthropic",
		"BATON_LLM_BASE_URL":                     "http://127.0.0.1:5000/v1",
		"BATON_LLM_MODEL":                        "claude-x",
		"BATON_LLM_API_KEY_ENV":                  "MY_KEY",
		"BATON_SERVER_MAX_BODY_BYTES":            "2048",
		"BATON_SERVER_SHUTDOWN_GRACE":            "3",
		"BATON_SERVER_MAX_ACTIVE_RUNS":           "12",
		"BATON_SERVER_AUTH_TOKENS_ENV":           "MY_TOKENS",
		"BATON_LIMITS_MAX_ITERATIONS":            "7",
		"BATON_LIMITS_MAX_RUN_SECONDS":           "60",
		"BATON_LIMITS_TOOL_TIMEOUT":              "90s",
		"BATON_LIMITS_CANCEL_HORIZON":            "45s",
		"BATON_POLICY_BUDGET_MAX_TOOL_CALLS":     "40",
		"BATON_POLICY_BUDGET_MAX_TOKENS":         "100000",
		"BATON_LOOP_SOFT_THRESHOLD":              "3",
		"BATON_LOOP_HARD_THRESHOLD":              "5",
		"BATON_LOOP_STALL_TURNS":                 "0",
		"BATON_INTERRUPTS_TTL":                   "5m",
		"BATON_STORE":                            "memory:",
		"BATON_LLM_TIMEOUT":                      "45s",
		"BATON_LLM_IDLE_TIMEOUT":                 "20s",
		"BATON_LLM_SYSTEM_PROMPT":                "Be brief.",
		"BATON_LLM_SYSTEM_PROMPT_FILE":           "prompt.md",
		"BATON_SERVER_ON_DISCONNECT":             "detach",
		"BATON_SERVER_RECONNECT_GRACE":           "45s",
		"BATON_SERVER_STREAM_BUFFER_BYTES":       "65536",
		"BATON_SERVER_STREAM_WRITE_TIMEOUT":      "5s",
		"BATON_SERVER_EVENT_RETENTION":           "1h",
		"BATON_SERVER_ON_SHUTDOWN":               "cancel",
		"BATON_SERVER_SECRETS_KEY_ENV":           "MY_SECRETS_KEY",
		"BATON_SERVER_PUBLIC_URL":                "https://baton.example.com",
		"BATON_REPLICATION_HEARTBEAT":            "1s",
		"BATON_REPLICATION_LEASE":                "5s",
		"BATON_REPLICATION_ADVERTISE_URL":        "http://replica-1:8080",
		"BATON_A2A_SERVER_ENABLED":               "true",
		"BATON_A2A_SERVER_NAME":                  "outer",
		"BATON_A2A_SERVER_DESCRIPTION":           "Coordinates the team's agents",
		"BATON_SERVER_MAX_FOLLOWERS_PER_RUN":     "7",
		"BATON_SERVER_MAX_EVENTS_PER_RUN":        "5000",
		"BATON_SERVER_THREAD_RETENTION":          "720h",
		"BATON_SERVER_MAX_THREADS_PER_PRINCIPAL": "50",
		"BATON_MCP_SERVER_ENABLED":               "true",
		"BATON_MCP_SERVER_NAME":                  "baton-mcp",
		"BATON_MCP_SERVER_COORDINATOR_TOOL":      "coordinate",
	}
	require.ElementsMatch(t, EnvVarNames(), keysOf(e), "the test covers every variable")

	c := Default()
	require.NoError(t, c.ApplyEnv(e.get))
	require.NoError(t, c.Validate())
	want := &Config{
		Listen: "0.0.0.0:9090",
		Server: Server{AuthTokensEnv: "MY_TOKENS", MaxBodyBytes: 2048, ShutdownGrace: Duration(3 * time.Second), MaxActiveRuns: 12, EventRetention: Duration(time.Hour),
			OnDisconnect: "detach", ReconnectGrace: Duration(45 * time.Second), StreamBufferBytes: 65536, StreamWriteTimeout: Duration(5 * time.Second),
			MaxFollowersPerRun: 7, MaxEventsPerRun: 5000, ThreadRetention: Duration(720 * time.Hour), MaxThreadsPerPrincipal: 50,
			OnShutdown: "cancel", SecretsKeyEnv: "MY_SECRETS_KEY", PublicURL: "https://baton.example.com"},
		LLM: LLM{Provider: "anthropic", BaseURL: "http://127.0.0.1:5000/v1", Model: "claude-x", APIKeyEnv: "MY_KEY",
			Timeout: Duration(45 * time.Second), IdleTimeout: Duration(20 * time.Second),
			SystemPrompt: "Be brief.", SystemPromptFile: "prompt.md"},
		Limits:      Limits{MaxIterations: 7, MaxRunSeconds: 60, ToolTimeout: Duration(90 * time.Second), CancelHorizon: Duration(45 * time.Second)},
		Policy:      Policy{Budget: Budget{MaxToolCalls: 40, MaxTokens: 100000, WarnAt: DefaultBudgetWarnAt}, PrincipalBudget: PrincipalBudget{WarnAt: DefaultBudgetWarnAt}},
		History:     Default().History,
		MCPServe:    MCPServe{Enabled: true, Name: "baton-mcp", Agents: Default().MCPServe.Agents, CoordinatorTool: "coordinate", TaskTTL: Default().MCPServe.TaskTTL},
		Loop:        Loop{SoftThreshold: 3, HardThreshold: 5, StallTurns: 0},
		Interrupts:  Interrupts{TTL: Duration(5 * time.Minute)},
		Replication: Replication{Heartbeat: Duration(time.Second), Lease: Duration(5 * time.Second), AdvertiseURL: "http://replica-1:8080"},
		Telemetry:   Telemetry{OTLPProtocol: DefaultOTLPProtocol, ServiceName: DefaultTelemetryService},
		A2AServer:   A2AServer{Enabled: true, Name: "outer", Description: "Coordinates the team's agents"},
		Store:       "memory:",
	}
	c.fromEnv = nil
	assert.Equal(t, want, c)
}

func TestApplyEnvOverridesFile(t *testing.T) {
	c, err := loadYAML(t, designExample, env{
		"DEPLOY_TOKEN":       secretToken,
		"BATON_LLM_MODEL":    "gpt-5",
		"BATON_LLM_BASE_URL": "",
	})
	require.NoError(t, err)
	assert.Equal(t, "gpt-5", c.LLM.Model)
	assert.Equal(t, "https://api.openai.com/v1", c.LLM.BaseURL, "an empty variable counts as unset")
}

func keysOf(e env) []string {
	out := make([]string, 0, len(e))
	for k := range e {
		out = append(out, k)
	}
	return out
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, "127.0.0.1:8080", c.Listen)
	assert.Equal(t, int64(1<<20), c.Server.MaxBodyBytes)
	assert.Equal(t, Duration(10*time.Second), c.Server.ShutdownGrace)
	assert.Equal(t, "scripted", c.LLM.Provider)
	assert.Equal(t, 25, c.Limits.MaxIterations)
	assert.Equal(t, 600, c.Limits.MaxRunSeconds)
	assert.Equal(t, Duration(120*time.Second), c.Limits.ToolTimeout)
	assert.Equal(t, "sqlite:./data/baton.db", c.Store)
	assert.Empty(t, c.Agents)
	assert.Empty(t, c.Source)
}

func TestValidateWithoutFileNamesNoFile(t *testing.T) {
	c := Default()
	c.Limits.MaxIterations = -2
	assert.EqualError(t, c.Validate(), "limits.max_iterations: must be positive (got -2)")
}

func TestAPIKeyReadsNamedVariable(t *testing.T) {
	t.Setenv("BATON_TEST_KEY", secretToken)
	assert.Equal(t, secretToken, LLM{APIKeyEnv: "BATON_TEST_KEY"}.APIKey())
	assert.Equal(t, "", LLM{}.APIKey())
}

func TestMCPServerLogValueHidesHeaderValues(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	logger.Info("mcp", "server", MCPServer{Name: "deploy", URL: "http://x/mcp", Headers: map[string]string{"Authorization": "Bearer " + secretToken}})
	assert.Contains(t, buf.String(), "Authorization")
	assert.NotContains(t, buf.String(), secretToken)
}

func TestToolName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"research", "research"},
		{"deep research", "deep_research"},
		{"café-bot", "caf_-bot"},
		// Over 64 characters: cut, with a stable hash so that two long names stay apart.
		{string(bytes.Repeat([]byte("a"), 70)), string(bytes.Repeat([]byte("a"), 55)) + "_5904740b"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ToolName(tt.in), tt.in)
	}
}

func TestExpandVars(t *testing.T) {
	lookup := env{"A": "1", "B_2": "two"}.get
	tests := []struct{ in, want string }{
		{"Bearer ${A}", "Bearer 1"},
		{"${A}${B_2}", "1two"},
		{"pa$$word", "pa$$word"},
		{"$A stays", "$A stays"},
		{"${not closed", "${not closed"},
		{"${1BAD}", "${1BAD}"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, expandVars(tt.in, lookup), tt.in)
	}
}

func TestAuthTokensFailClosed(t *testing.T) {
	s := Server{}
	toks, err := s.AuthTokens(env{}.get)
	require.NoError(t, err)
	assert.Nil(t, toks, "no variable configured: auth off")

	s.AuthTokensEnv = "MY_TOKENS"
	for name, val := range map[string]string{"unset": "", "blank": "   ", "only commas": " , ,"} {
		e := env{}
		if val != "" {
			e["MY_TOKENS"] = val
		}
		_, err := s.AuthTokens(e.get)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrNoAuthTokens, name)
		assert.Contains(t, err.Error(), "MY_TOKENS", name)
	}
	toks, err = s.AuthTokens(env{"MY_TOKENS": " alpha, beta ,,"}.get)
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "beta"}, toks)
}

func TestServerGuardKeysValidated(t *testing.T) {
	for _, tt := range []struct{ yaml, key string }{
		{"server:\n  max_active_runs: 0\n", "server.max_active_runs"},
		{"server:\n  allowed_origins: [\"app.example.com\"]\n", "server.allowed_origins[0]"},
		{"server:\n  allowed_origins: [\"https://app.example.com/path\"]\n", "server.allowed_origins[0]"},
		{"server:\n  allowed_origins: [\"javascript://x\"]\n", "server.allowed_origins[0]"},
	} {
		_, err := loadYAML(t, tt.yaml, env{})
		require.Error(t, err, tt.yaml)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "baton.yaml: "+tt.key+":", tt.yaml)
	}
	c, err := loadYAML(t, "server:\n  allowed_origins: [\"https://app.example.com\", \"http://localhost:3000\"]\n  max_active_runs: 5\n", env{})
	require.NoError(t, err)
	assert.Equal(t, []string{"https://app.example.com", "http://localhost:3000"}, c.Server.AllowedOrigins)
	assert.Equal(t, 5, c.Server.MaxActiveRuns)
}

func TestSecretsListsEverySecretValue(t *testing.T) {
	c, err := loadYAML(t, `
server:
  auth_tokens_env: TOKS
llm:
  provider: openai
  model: m
  base_url: https://u:llm-pass@llm.example/v1
  api_key_env: KEY
agents:
  - name: a
    url: http://agent:agent-pass@127.0.0.1:1
    headers: {X-Api-Key: "${AGENT_KEY}"}
mcp_servers:
  - name: m
    url: http://127.0.0.1:2/mcp
    headers: {Authorization: "Bearer ${TOK}"}
`, env{"TOKS": "tok-one,tok-two", "KEY": "sk-key", "TOK": "mcp-tok", "AGENT_KEY": "agent-key"})
	require.NoError(t, err)
	got := c.Secrets(env{"TOKS": "tok-one,tok-two", "KEY": "sk-key"}.get)
	for _, want := range []string{"sk-key", "tok-one", "tok-two", "Bearer mcp-tok", "llm-pass", "agent-pass", "agent-key"} {
		assert.Contains(t, got, want)
	}
}

func TestShutdownModeDefaultsByStore(t *testing.T) {
	for _, tc := range []struct{ store, set, want string }{
		{"postgres://u@h/db", "", OnShutdownHandoff},
		{"postgresql://u@h/db", "", OnShutdownHandoff},
		{"sqlite:./x.db", "", OnShutdownCancel},
		{"memory:", "", OnShutdownCancel},
		{"postgres://u@h/db", OnShutdownCancel, OnShutdownCancel},
		{"sqlite:./x.db", OnShutdownHandoff, OnShutdownHandoff},
	} {
		c := Default()
		c.Store, c.Server.OnShutdown = tc.store, tc.set
		assert.Equal(t, tc.want, c.ShutdownMode(), "store %s, on_shutdown %q", tc.store, tc.set)
	}
}
