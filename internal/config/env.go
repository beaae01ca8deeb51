package config

import (
	"fmt"
	"strconv"
	"strings"
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
	{"BATON_MCP_SERVER_ENABLED", "mcp_server.enabled", func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("must be true or false (got %q)", v)
		}
		c.MCPServe.Enabled = b
		return nil
	}},
	{"BATON_MCP_SERVER_NAME", "mcp_server.name", setString(func(c *Config) *string { return &c.MCPServe.Name })},
	{"BATON_MCP_SERVER_COORDINATOR_TOOL", "mcp_server.coordinator_tool", setString(func(c *Config) *string { return &c.MCPServe.CoordinatorTool })},
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
