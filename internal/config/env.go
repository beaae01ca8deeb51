package config

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/internal/editdist"
	"github.com/baton-dev/baton/internal/seal"
)

// envVar binds one BATON_* variable to one scalar key.
type envVar struct {
	name string
	key  string
	set  func(c *Config, v string) error
}

func setString(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func setInt(p func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("must be an integer (got %q)", v)
		}
		*p(c) = n
		return nil
	}
}

func setFloat(p func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return fmt.Errorf("must be a number (got %q)", v)
		}
		*p(c) = f
		return nil
	}
}

func setBool(p func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("must be true or false (got %q)", v)
		}
		*p(c) = b
		return nil
	}
}

func setDuration(p func(*Config) *Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		*p(c) = d
		return nil
	}
}

// envVars lists every scalar key that the environment can set. Lists (agents,
// mcp_servers, policy lists and rate limits) only come from the file.
var envVars = []envVar{
	{"BATON_LISTEN", "listen", setString(func(c *Config) *string { return &c.Listen })},
	{"BATON_SERVER_AUTH_TOKENS_ENV", "server.auth_tokens_env", setString(func(c *Config) *string { return &c.Server.AuthTokensEnv })},
	{"BATON_SERVER_MAX_BODY_BYTES", "server.max_body_bytes", func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("must be an integer (got %q)", v)
		}
		c.Server.MaxBodyBytes = n
		return nil
	}},
	{"BATON_SERVER_MAX_ACTIVE_RUNS", "server.max_active_runs", setInt(func(c *Config) *int { return &c.Server.MaxActiveRuns })},
	{"BATON_SERVER_SHUTDOWN_GRACE", "server.shutdown_grace", setDuration(func(c *Config) *Duration { return &c.Server.ShutdownGrace })},
	{"BATON_SERVER_ON_SHUTDOWN", "server.on_shutdown", setString(func(c *Config) *string { return &c.Server.OnShutdown })},
	{"BATON_SERVER_SECRETS_KEY_ENV", "server.secrets_key_env", setString(func(c *Config) *string { return &c.Server.SecretsKeyEnv })},
	{"BATON_SERVER_PUBLIC_URL", "server.public_url", setString(func(c *Config) *string { return &c.Server.PublicURL })},
	{"BATON_SERVER_EVENT_RETENTION", "server.event_retention", setDuration(func(c *Config) *Duration { return &c.Server.EventRetention })},
	{"BATON_REPLICATION_HEARTBEAT", "replication.heartbeat", setDuration(func(c *Config) *Duration { return &c.Replication.Heartbeat })},
	{"BATON_REPLICATION_LEASE", "replication.lease", setDuration(func(c *Config) *Duration { return &c.Replication.Lease })},
	{"BATON_REPLICATION_ADVERTISE_URL", "replication.advertise_url", setString(func(c *Config) *string { return &c.Replication.AdvertiseURL })},
	{"BATON_A2A_SERVER_ENABLED", "a2a_server.enabled", func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("must be true or false (got %q)", v)
		}
		c.A2AServer.Enabled = b
		return nil
	}},
	{"BATON_A2A_SERVER_NAME", "a2a_server.name", setString(func(c *Config) *string { return &c.A2AServer.Name })},
	{"BATON_A2A_SERVER_DESCRIPTION", "a2a_server.description", setString(func(c *Config) *string { return &c.A2AServer.Description })},
	{"BATON_LLM_PROVIDER", "llm.provider", setString(func(c *Config) *string { return &c.LLM.Provider })},
	{"BATON_LLM_BASE_URL", "llm.base_url", setString(func(c *Config) *string { return &c.LLM.BaseURL })},
	{"BATON_LLM_MODEL", "llm.model", setString(func(c *Config) *string { return &c.LLM.Model })},
	{"BATON_LLM_API_KEY_ENV", "llm.api_key_env", setString(func(c *Config) *string { return &c.LLM.APIKeyEnv })},
	{"BATON_LLM_TIMEOUT", "llm.timeout", setDuration(func(c *Config) *Duration { return &c.LLM.Timeout })},
	{"BATON_LLM_IDLE_TIMEOUT", "llm.idle_timeout", setDuration(func(c *Config) *Duration { return &c.LLM.IdleTimeout })},
	{"BATON_LLM_SYSTEM_PROMPT", "llm.system_prompt", setString(func(c *Config) *string { return &c.LLM.SystemPrompt })},
	{"BATON_LLM_SYSTEM_PROMPT_FILE", "llm.system_prompt_file", setString(func(c *Config) *string { return &c.LLM.SystemPromptFile })},
	{"BATON_SERVER_ON_DISCONNECT", "server.on_disconnect", setString(func(c *Config) *string { return &c.Server.OnDisconnect })},
	{"BATON_SERVER_RECONNECT_GRACE", "server.reconnect_grace", setDuration(func(c *Config) *Duration { return &c.Server.ReconnectGrace })},
	{"BATON_SERVER_STREAM_BUFFER_BYTES", "server.stream_buffer_bytes", func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("must be an integer (got %q)", v)
		}
		c.Server.StreamBufferBytes = n
		return nil
	}},
	{"BATON_SERVER_STREAM_WRITE_TIMEOUT", "server.stream_write_timeout", setDuration(func(c *Config) *Duration { return &c.Server.StreamWriteTimeout })},
	{"BATON_SERVER_MAX_FOLLOWERS_PER_RUN", "server.max_followers_per_run", setInt(func(c *Config) *int { return &c.Server.MaxFollowersPerRun })},
	{"BATON_SERVER_MAX_EVENTS_PER_RUN", "server.max_events_per_run", setInt(func(c *Config) *int { return &c.Server.MaxEventsPerRun })},
	{"BATON_SERVER_THREAD_RETENTION", "server.thread_retention", setDuration(func(c *Config) *Duration { return &c.Server.ThreadRetention })},
	{"BATON_SERVER_MAX_THREADS_PER_PRINCIPAL", "server.max_threads_per_principal", setInt(func(c *Config) *int { return &c.Server.MaxThreadsPerPrincipal })},
	{"BATON_LIMITS_MAX_ITERATIONS", "limits.max_iterations", setInt(func(c *Config) *int { return &c.Limits.MaxIterations })},
	{"BATON_LIMITS_MAX_RUN_SECONDS", "limits.max_run_seconds", setInt(func(c *Config) *int { return &c.Limits.MaxRunSeconds })},
	{"BATON_LIMITS_TOOL_TIMEOUT", "limits.tool_timeout", setDuration(func(c *Config) *Duration { return &c.Limits.ToolTimeout })},
	{"BATON_LIMITS_CANCEL_HORIZON", "limits.cancel_horizon", setDuration(func(c *Config) *Duration { return &c.Limits.CancelHorizon })},
	{"BATON_POLICY_BUDGET_MAX_TOOL_CALLS", "policy.budget.max_tool_calls", setInt(func(c *Config) *int { return &c.Policy.Budget.MaxToolCalls })},
	{"BATON_POLICY_BUDGET_MAX_TOKENS", "policy.budget.max_tokens", setInt(func(c *Config) *int { return &c.Policy.Budget.MaxTokens })},
	{"BATON_LOOP_SOFT_THRESHOLD", "loop.soft_threshold", setInt(func(c *Config) *int { return &c.Loop.SoftThreshold })},
	{"BATON_LOOP_HARD_THRESHOLD", "loop.hard_threshold", setInt(func(c *Config) *int { return &c.Loop.HardThreshold })},
	{"BATON_LOOP_STALL_TURNS", "loop.stall_turns", setInt(func(c *Config) *int { return &c.Loop.StallTurns })},
	{"BATON_INTERRUPTS_TTL", "interrupts.ttl", setDuration(func(c *Config) *Duration { return &c.Interrupts.TTL })},
	{"BATON_STORE", "store", setString(func(c *Config) *string { return &c.Store })},
	{"BATON_SERVER_MAX_FOLLOWERS_PER_PRINCIPAL", "server.max_followers_per_principal", setInt(func(c *Config) *int { return &c.Server.MaxFollowersPerPrincipal })},
	{"BATON_SERVER_MAX_DEPTH", "server.max_depth", setInt(func(c *Config) *int { return &c.Server.MaxDepth })},
	{"BATON_LLM_CONTEXT_WINDOW", "llm.context_window", setInt(func(c *Config) *int { return &c.LLM.ContextWindow })},
	{"BATON_LLM_PRICES_INPUT_PER_MTOK", "llm.prices.input_per_mtok", setFloat(func(c *Config) *float64 { return &c.LLM.Prices.InputPerMTok })},
	{"BATON_LLM_PRICES_OUTPUT_PER_MTOK", "llm.prices.output_per_mtok", setFloat(func(c *Config) *float64 { return &c.LLM.Prices.OutputPerMTok })},
	{"BATON_HISTORY_COMPACT_AT", "history.compact_at", setFloat(func(c *Config) *float64 { return &c.History.CompactAt })},
	{"BATON_HISTORY_KEEP_RECENT_TURNS", "history.keep_recent_turns", setInt(func(c *Config) *int { return &c.History.KeepRecentTurns })},
	{"BATON_HISTORY_MAX_TOOL_RESULT_BYTES", "history.max_tool_result_bytes", setInt(func(c *Config) *int { return &c.History.MaxToolResultBytes })},
	{"BATON_POLICY_BUDGET_MAX_COST_USD", "policy.budget.max_cost_usd", setFloat(func(c *Config) *float64 { return &c.Policy.Budget.MaxCostUSD })},
	{"BATON_POLICY_BUDGET_WARN_AT", "policy.budget.warn_at", setFloat(func(c *Config) *float64 { return &c.Policy.Budget.WarnAt })},
	{"BATON_POLICY_PRINCIPAL_BUDGET_DAILY_TOKENS", "policy.principal_budget.daily_tokens", func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("must be an integer (got %q)", v)
		}
		c.Policy.PrincipalBudget.DailyTokens = n
		return nil
	}},
	{"BATON_POLICY_PRINCIPAL_BUDGET_DAILY_COST_USD", "policy.principal_budget.daily_cost_usd", setFloat(func(c *Config) *float64 { return &c.Policy.PrincipalBudget.DailyCostUSD })},
	{"BATON_POLICY_PRINCIPAL_BUDGET_WARN_AT", "policy.principal_budget.warn_at", setFloat(func(c *Config) *float64 { return &c.Policy.PrincipalBudget.WarnAt })},
	{"BATON_MCP_SERVER_ENABLED", "mcp_server.enabled", setBool(func(c *Config) *bool { return &c.MCPServe.Enabled })},
	{"BATON_MCP_SERVER_NAME", "mcp_server.name", setString(func(c *Config) *string { return &c.MCPServe.Name })},
	{"BATON_MCP_SERVER_COORDINATOR_TOOL", "mcp_server.coordinator_tool", setString(func(c *Config) *string { return &c.MCPServe.CoordinatorTool })},
	{"BATON_MCP_SERVER_TASK_TTL", "mcp_server.task_ttl", setDuration(func(c *Config) *Duration { return &c.MCPServe.TaskTTL })},
}

// EnvVarNames returns the names of the environment variables ApplyEnv reads.
func EnvVarNames() []string {
	out := make([]string, len(envVars))
	for i, e := range envVars {
		out[i] = e.name
	}
	return out
}

// ApplyEnv overrides scalar keys from the environment: BATON_LISTEN, BATON_LLM_PROVIDER,
// BATON_LLM_BASE_URL, BATON_LLM_MODEL, BATON_LLM_API_KEY_ENV, BATON_SERVER_MAX_BODY_BYTES,
// BATON_SERVER_SHUTDOWN_GRACE, BATON_SERVER_AUTH_TOKENS_ENV, BATON_SERVER_MAX_ACTIVE_RUNS, BATON_LIMITS_MAX_ITERATIONS,
// BATON_LIMITS_MAX_RUN_SECONDS, BATON_LIMITS_TOOL_TIMEOUT, BATON_POLICY_BUDGET_MAX_TOOL_CALLS,
// BATON_POLICY_BUDGET_MAX_TOKENS, BATON_LOOP_SOFT_THRESHOLD, BATON_LOOP_HARD_THRESHOLD,
// BATON_LOOP_STALL_TURNS and BATON_STORE. An empty
// variable counts as unset. Later validation errors about these keys name the variable.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	for _, e := range envVars {
		v := getenv(e.name)
		if v == "" {
			continue
		}
		if err := e.set(c, v); err != nil {
			return &FieldError{Where: e.name, Key: e.key, Message: err.Error()}
		}
		if c.fromEnv == nil {
			c.fromEnv = make(map[string]string)
		}
		c.fromEnv[e.key] = e.name
	}
	return nil
}

// otherBatonVars are BATON_* variables read by something other than ApplyEnv: the
// coordinator's flags, the compose file, the test suites and the demo stack. They are
// not typos.
var otherBatonVars = []string{
	"BATON_CONFIG", "BATON_LOG_FORMAT", "BATON_LOG_LEVEL", // cmd/coordinator flags
	"BATON_AUTH_TOKENS", "BATON_SECRETS_KEY", // the conventional variables of *_env keys
	"BATON_BIND", "BATON_PORT", "BATON_VERSION", // docker-compose.yml
	"BATON_URL", "BATON_TOKEN", "BATON_CHROMIUM", "BATON_ARTIFACTS_DIR", "BATON_TEST_POSTGRES_URL", // tests
}

// UnknownEnv returns the BATON_* variables of environ ("KEY=value" entries, as from
// os.Environ) that nothing reads: a misspelled override (BATON_LLM_MODLE) would
// otherwise be ignored silently. Variables the configuration names (api_key_env,
// auth_tokens_env, ${VAR} in headers and env) count as read. Each name comes with the
// closest known name when one is close, for the warning; values are never returned.
func (c *Config) UnknownEnv(environ []string) []UnknownVar {
	known := map[string]bool{}
	for _, e := range envVars {
		known[e.name] = true
	}
	for _, n := range otherBatonVars {
		known[n] = true
	}
	for _, n := range c.referencedVars() {
		known[n] = true
	}
	candidates := make([]string, 0, len(known))
	for n := range known {
		candidates = append(candidates, n)
	}
	sort.Strings(candidates)
	var out []UnknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "BATON_") || known[name] {
			continue
		}
		out = append(out, UnknownVar{Name: name, Suggest: closest(name, candidates)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UnknownVar is a BATON_* variable that nothing reads.
type UnknownVar struct {
	Name string
	// Suggest is the known variable closest to Name, "" when none is close.
	Suggest string
}

// referencedVars are the variables the configuration names.
func (c *Config) referencedVars() []string {
	out := append([]string{c.LLM.APIKeyEnv, c.Server.AuthTokensEnv, c.Server.SecretsKeyEnv}, c.refVars...)
	for _, m := range c.MCPServers {
		out = append(out, m.Auth.ClientSecretEnv)
	}
	for _, a := range c.Agents {
		out = append(out, a.Auth.ClientSecretEnv)
	}
	return out
}

// closest returns the candidate within a small edit distance of name, or "".
func closest(name string, candidates []string) string {
	best, bestD := "", 4 // at most 3 edits
	for _, c := range candidates {
		if d := editdist.Levenshtein(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// UnreadAuthTokens returns the bearer-token variables of environ ("KEY=value" entries) that
// are set but that no configuration reads: BATON_AUTH_TOKENS, and any BATON_*AUTH_TOKENS*
// variable (the documented naming of server.auth_tokens_env), other than the one
// server.auth_tokens_env names. Someone who set one expects auth to be on, and without a
// config naming it auth is off: the start warns. Values are never returned.
func (c *Config) UnreadAuthTokens(environ []string) []string {
	overrides := map[string]bool{}
	for _, e := range envVars {
		overrides[e.name] = true
	}
	var out []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.TrimSpace(value) == "" || overrides[name] || name == c.Server.AuthTokensEnv {
			continue
		}
		if strings.HasPrefix(name, "BATON_") && strings.Contains(name, "AUTH_TOKENS") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Secrets returns every secret value the configuration gives the process, for log
// redaction: the model API key, the bearer tokens, agent and MCP header values, and passwords in
// configured URLs. The values themselves must never be logged; add new secret-bearing
// keys here.
func (c *Config) Secrets(getenv func(string) string) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if c.LLM.APIKeyEnv != "" {
		add(getenv(c.LLM.APIKeyEnv))
	}
	if c.Server.AuthTokensEnv != "" {
		for _, t := range strings.Split(getenv(c.Server.AuthTokensEnv), ",") {
			add(t)
		}
	}
	if c.Server.SecretsKeyEnv != "" {
		for _, k := range strings.Split(getenv(c.Server.SecretsKeyEnv), ",") {
			add(k)
			if _, key, ok := strings.Cut(k, ":"); ok {
				add(key)
			}
		}
	}
	for _, m := range c.MCPServers {
		if m.Auth.ClientSecretEnv != "" {
			add(getenv(m.Auth.ClientSecretEnv))
		}
	}
	for _, a := range c.Agents {
		if a.Auth.ClientSecretEnv != "" {
			add(getenv(a.Auth.ClientSecretEnv))
		}
	}
	urls := []string{c.LLM.BaseURL}
	for _, a := range c.Agents {
		urls = append(urls, a.URL, a.CardURL)
		for _, v := range a.Headers {
			add(v)
		}
	}
	for _, m := range c.MCPServers {
		urls = append(urls, m.URL)
		for _, v := range m.Headers {
			add(v)
		}
	}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				add(p)
				add(url.QueryEscape(p))
			}
			add(u.User.String())
		}
	}
	return out
}

// ErrSignInEnv is wrapped by SignIn's error when a variable that OAuth needs is unset,
// empty or unusable.
var ErrSignInEnv = errors.New("oauth settings incomplete")

// SignInEnv is what OAuth for MCP servers takes from the environment at start.
type SignInEnv struct {
	// Ring seals stored grants and pending sign-ins (server.secrets_key_env); nil when no
	// server uses mode user and no key is configured.
	Ring *seal.Ring
	// ClientSecrets holds the client secret of each server (by name) that names one.
	ClientSecrets map[string]string
	// AgentClientSecrets holds the client secret of each agent (by name) in auth mode
	// exchange.
	AgentClientSecrets map[string]string
}

// UsesSignIn reports whether any MCP server signs users in (mode user).
func (c *Config) UsesSignIn() bool {
	for _, m := range c.MCPServers {
		if m.Auth.Mode == MCPAuthUser {
			return true
		}
	}
	return false
}

// SignIn reads what OAuth needs from the environment and refuses to start without it:
// with a mode user server, server.secrets_key_env must name a variable holding a valid key
// (a stored token must never be written in clear); every client_secret_env must name a
// set variable. Errors name the key and the variable, never a value.
func (c *Config) SignIn(getenv func(string) string) (*SignInEnv, error) {
	out := &SignInEnv{ClientSecrets: map[string]string{}, AgentClientSecrets: map[string]string{}}
	if name := c.Server.SecretsKeyEnv; name != "" {
		spec := strings.TrimSpace(getenv(name))
		switch {
		case spec == "" && c.UsesSignIn():
			return nil, fmt.Errorf("%w: server.secrets_key_env names %s, but that environment variable is unset or empty; mcp servers in mode user store OAuth tokens encrypted with it: set it to a key (32 random bytes, base64; e.g. openssl rand -base64 32)", ErrSignInEnv, name)
		case spec == "" && UsesExchange(c):
			return nil, fmt.Errorf("%w: server.secrets_key_env names %s, but that environment variable is unset or empty; auth mode exchange keeps the users' tokens encrypted with it: set it to a key (32 random bytes, base64; e.g. openssl rand -base64 32)", ErrSignInEnv, name)
		case spec != "":
			ring, err := seal.New(spec)
			if err != nil {
				return nil, fmt.Errorf("%w: server.secrets_key_env: the key in %s cannot be used: %w", ErrSignInEnv, name, err)
			}
			out.Ring = ring
		}
	} else if c.UsesSignIn() || UsesExchange(c) {
		return nil, fmt.Errorf("%w: server.secrets_key_env is required with mcp servers in mode user and with auth mode exchange", ErrSignInEnv)
	}
	for i, a := range c.Agents {
		name := a.Auth.ClientSecretEnv
		if name == "" {
			continue
		}
		v := getenv(name)
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%w: agents[%d].auth.client_secret_env names %s, but that environment variable is unset or empty", ErrSignInEnv, i, name)
		}
		out.AgentClientSecrets[a.Name] = v
	}
	for i, m := range c.MCPServers {
		name := m.Auth.ClientSecretEnv
		if name == "" {
			continue
		}
		v := getenv(name)
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%w: mcp_servers[%d].auth.client_secret_env names %s, but that environment variable is unset or empty", ErrSignInEnv, i, name)
		}
		out.ClientSecrets[m.Name] = v
	}
	return out, nil
}
