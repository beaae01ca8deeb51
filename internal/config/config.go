// Package config loads, defaults and validates Baton's configuration (DESIGN §4).
//
// A configuration comes from a YAML file (strict: an unknown key is an error), is laid
// over the defaults, then overridden key by key from BATON_* environment variables, and
// finally validated as a whole. Every problem is reported as one message that names the
// file (or the environment variable) and the key, e.g.
//
//	baton.yaml: agents[1].url: not an absolute http(s) URL
//
// and wraps ErrInvalid. Messages never quote secrets: header values, URLs and store paths
// are named, not echoed.
//
// Design note: yaml.v3's strict mode reports unknown fields by Go type name and line, not
// by key path, so the file is first parsed into a node tree and walked against the Go
// types (via reflection on the yaml tags) to report unknown keys and type mismatches with
// their full path (llm.provider, mcp_servers[0].headers). The strict decoder then runs as
// a safety net.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// ErrInvalid is wrapped by every error that reports a bad configuration.
var ErrInvalid = errors.New("invalid configuration")

// Defaults.
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultStore         = "sqlite:./data/baton.db"
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxActiveRuns = 1000
	DefaultShutdownGrace = Duration(10 * time.Second)
	// DefaultEventRetention keeps event logs for a day.
	DefaultEventRetention = Duration(24 * time.Hour)
	// DefaultReconnectGrace is how long a detached run waits for a reconnect (DESIGN §4).
	DefaultReconnectGrace = Duration(30 * time.Second)
	// DefaultHeartbeat and DefaultLease are the run lease timings of DESIGN §4.
	DefaultHeartbeat     = Duration(2 * time.Second)
	DefaultLease         = Duration(10 * time.Second)
	DefaultAgentTimeout  = Duration(120 * time.Second)
	DefaultAgentCardTTL  = Duration(10 * time.Minute)
	DefaultMaxIterations = 25
	DefaultMaxRunSeconds = 600
	DefaultToolTimeout   = Duration(120 * time.Second)
	// DefaultCancelHorizon is the default of limits.cancel_horizon.
	DefaultCancelHorizon = Duration(2 * time.Minute)
	DefaultProvider      = ProviderScripted
	DefaultLoopSoft      = 2
	DefaultLoopHard      = 3
	DefaultStallTurns    = 3
)

// LLM providers.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderScripted  = "scripted"
)

// Values of Agent.InputRequired.
const (
	InputRequiredAskUser = "ask_user"
	InputRequiredModel   = "model"
)

// Values of MCPServer.OnToolError.
const (
	OnToolErrorRetry = "retry"
	OnToolErrorFail  = "fail"
	OnToolErrorError = "error"
)

// AskUserTool is the name of the built-in tool no agent may take.
const AskUserTool = "ask_user"

// Config is Baton's whole configuration.
type Config struct {
	// Listen is the HTTP listen address (host:port).
	Listen     string      `yaml:"listen"`
	Server     Server      `yaml:"server"`
	LLM        LLM         `yaml:"llm"`
	Agents     []Agent     `yaml:"agents"`
	MCPServers []MCPServer `yaml:"mcp_servers"`
	Limits     Limits      `yaml:"limits"`
	Policy     Policy      `yaml:"policy"`
	Loop       Loop        `yaml:"loop"`
	Interrupts Interrupts  `yaml:"interrupts"`
	Telemetry  Telemetry   `yaml:"telemetry"`
	Approvals  Approvals   `yaml:"approvals"`
	// Replication holds the run leases (replication.heartbeat, replication.lease).
	Replication Replication `yaml:"replication"`
	// A2AServer serves Baton itself as an A2A agent (a2a_server.*).
	A2AServer A2AServer `yaml:"a2a_server"`
	// History bounds what the model is sent of a long thread (history.*).
	History History `yaml:"history"`
	// MCPServe serves Baton itself as an MCP server (mcp_server.*); not to be confused
	// with MCPServers, the MCP servers Baton calls.
	MCPServe MCPServe `yaml:"mcp_server"`
	// Store is "memory:", "sqlite:<path>" or "postgres://…" (the DSN may hold a password:
	// never log it).
	Store string `yaml:"store"`

	// Source is the file the configuration came from ("" for defaults only).
	Source string `yaml:"-"`

	// fromEnv maps a key path to the environment variable that last set it, so that a
	// validation error names the variable instead of the file.
	fromEnv map[string]string
	// refVars are the variables named by ${VAR} in the file, before expansion.
	refVars []string
}

// Server holds the HTTP server settings.
type Server struct {
	// AuthTokensEnv names the variable holding comma-separated bearer tokens; unset
	// means no auth.
	AuthTokensEnv string `yaml:"auth_tokens_env"`
	// MaxBodyBytes caps request bodies.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ShutdownGrace is how long active runs may finish at shutdown.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// OnShutdown is what happens to runs still active after ShutdownGrace: cancel them
	// (OnShutdownCancel) or hand them to other replicas (OnShutdownHandoff), which take
	// them over from their checkpoints. Empty: ShutdownMode decides by the store.
	OnShutdown string `yaml:"on_shutdown"`
	// SecretsKeyEnv names the variable holding the key that encrypts stored OAuth tokens.
	// Required with an MCP server in auth mode user; see SignIn.
	SecretsKeyEnv string `yaml:"secrets_key_env"`
	// PublicURL is how browsers reach Baton (scheme://host[:port][/prefix]), for the OAuth
	// callback and client metadata URLs that sign-in hands to authorization servers. Empty:
	// derived from the listen address (http://localhost:<port> for an unspecified host).
	PublicURL string `yaml:"public_url"`
	// AllowedOrigins are extra Origins (scheme://host[:port]) allowed to POST when auth
	// is off; the request's own origin is always allowed.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MaxActiveRuns caps concurrent runs; beyond it POST /agui answers 503.
	MaxActiveRuns int `yaml:"max_active_runs"`
	// EventRetention is how long a run's event log is kept for reconnects.
	EventRetention Duration `yaml:"event_retention"`

	// Stream settings: what a client that does not keep up may cost.

	// OnDisconnect is what a run does when its client goes away or is dropped for not
	// reading: OnDisconnectCancel ("" means the same) cancels the run, OnDisconnectDetach
	// lets it go on for ReconnectGrace, waiting for a reconnect.
	OnDisconnect string `yaml:"on_disconnect"`
	// ReconnectGrace is how long a detached run waits for a reconnect before it is
	// cancelled (on_disconnect: detach). Default DefaultReconnectGrace.
	ReconnectGrace Duration `yaml:"reconnect_grace"`
	// StreamBufferBytes bounds the events held in memory for one client; a client further
	// behind continues from the run's event log. 0 means DefaultStreamBufferBytes.
	StreamBufferBytes int64 `yaml:"stream_buffer_bytes"`
	// StreamWriteTimeout is how long a client may take nothing before it is dropped (at an
	// event boundary). 0 means DefaultStreamWriteTimeout.
	StreamWriteTimeout Duration `yaml:"stream_write_timeout"`
	// MaxFollowersPerRun caps the reconnect streams following one run on one replica;
	// beyond it GET …/events answers 429 TOO_MANY_FOLLOWERS. 0 means
	// DefaultMaxFollowersPerRun.
	MaxFollowersPerRun int `yaml:"max_followers_per_run"`
	// MaxEventsPerRun caps the events of one run; beyond it the run's work is cancelled and
	// it ends with RUN_ERROR EVENT_LIMIT. 0 means DefaultMaxEventsPerRun.
	MaxEventsPerRun int `yaml:"max_events_per_run"`
	// ThreadRetention: threads untouched this long are deleted with their messages, event
	// logs and journal. 0 (the default) keeps them.
	ThreadRetention Duration `yaml:"thread_retention"`
	// MaxThreadsPerPrincipal caps the threads of one principal; a new thread beyond it gets
	// 429 TOO_MANY_THREADS. 0 means DefaultMaxThreadsPerPrincipal.
	MaxThreadsPerPrincipal int `yaml:"max_threads_per_principal"`
	// MaxFollowersPerPrincipal caps the streams one principal follows across its runs;
	// beyond it a follow answers 429 TOO_MANY_FOLLOWERS. 0 means
	// DefaultMaxFollowersPerPrincipal.
	MaxFollowersPerPrincipal int `yaml:"max_followers_per_principal"`
	// MaxDepth bounds nesting: a run started by another Baton carries its depth, and a call
	// that would start a run deeper than this is refused ([REFUSED:max_depth]). 0 means
	// DefaultMaxDepth.
	MaxDepth int `yaml:"max_depth"`
	// OIDC, when set, accepts JWTs of users signed in with an OpenID provider beside the
	// static tokens (see OIDC).
	OIDC *OIDC `yaml:"oidc"`
}

// ErrNoAuthTokens is wrapped by the error of AuthTokens when the configured variable
// holds no token: auth was asked for, so the server must not start without it.
var ErrNoAuthTokens = errors.New("no auth tokens")

// AuthTokens returns the bearer tokens from the variable named by AuthTokensEnv: nil when
// no variable is configured (auth off), and an error naming the variable (never its value)
// when it is configured but unset, empty or holds only separators. Never log the tokens.
func (s Server) AuthTokens(getenv func(string) string) ([]string, error) {
	if s.AuthTokensEnv == "" {
		return nil, nil
	}
	var out []string
	for _, t := range strings.Split(getenv(s.AuthTokensEnv), ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("server.auth_tokens_env names %s, but that environment variable is unset or empty; set it to comma-separated bearer tokens, or remove server.auth_tokens_env to run without auth: %w", s.AuthTokensEnv, ErrNoAuthTokens)
	}
	return out, nil
}

// Stream defaults and the values of Server.OnDisconnect.
const (
	DefaultStreamBufferBytes  = 4 << 20
	DefaultStreamWriteTimeout = Duration(30 * time.Second)
	// DefaultMaxFollowersPerRun is server.max_followers_per_run's default.
	DefaultMaxFollowersPerRun = 100
	// DefaultMaxEventsPerRun is server.max_events_per_run's default.
	DefaultMaxEventsPerRun = 100000
	// DefaultMaxThreadsPerPrincipal is server.max_threads_per_principal's default.
	DefaultMaxThreadsPerPrincipal = 10000
	// DefaultMaxFollowersPerPrincipal is server.max_followers_per_principal's default.
	DefaultMaxFollowersPerPrincipal = 500
	// DefaultMaxDepth is server.max_depth's default.
	DefaultMaxDepth    = 4
	OnDisconnectCancel = "cancel"
	OnDisconnectDetach = "detach"
)

// Values of Server.OnShutdown.
const (
	OnShutdownCancel  = "cancel"
	OnShutdownHandoff = "handoff"
)

// ShutdownMode is server.on_shutdown as it applies: the configured value, else handoff
// with a PostgreSQL store (other replicas may take the runs over) and cancel otherwise.
func (c *Config) ShutdownMode() string {
	if c.Server.OnShutdown != "" {
		return c.Server.OnShutdown
	}
	if c.SharedStore() {
		return OnShutdownHandoff
	}
	return OnShutdownCancel
}

// SharedStore reports whether the store is shared by replicas (PostgreSQL). Otherwise
// (SQLite, memory) the process is the only replica of its store.
func (c *Config) SharedStore() bool {
	return strings.HasPrefix(c.Store, "postgres://") || strings.HasPrefix(c.Store, "postgresql://")
}

// Replication configures the run leases that replicas sharing a PostgreSQL store use (a
// single process keeps them too, so that a restart finds its runs' threads free).
type Replication struct {
	// Heartbeat is how often a replica renews the leases of its runs.
	Heartbeat Duration `yaml:"heartbeat"`
	// Lease is how long a run holds its thread without a heartbeat.
	Lease Duration `yaml:"lease"`
	// AdvertiseURL is how other replicas reach this one.
	AdvertiseURL string `yaml:"advertise_url"`
}

// LLM selects and configures the model provider.
type LLM struct {
	// Provider is openai, anthropic or scripted.
	Provider string `yaml:"provider"`
	// BaseURL overrides the provider's API endpoint ("" = the provider's default).
	BaseURL string `yaml:"base_url"`
	Model   string `yaml:"model"`
	// APIKeyEnv is the name of the variable that holds the key, never the key itself.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds the wait for the first byte of a model response; 0 means 60 s.
	Timeout Duration `yaml:"timeout"`
	// IdleTimeout bounds the silence inside a streamed response; 0 means 30 s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// SystemPrompt is the operator's own instructions, appended to Baton's system prompt
	// (prompts/system.tmpl). After ResolveSystemPrompt it also holds the text of
	// SystemPromptFile.
	SystemPrompt string `yaml:"system_prompt"`
	// SystemPromptFile names a file whose text is SystemPrompt (read at start; relative
	// paths are relative to the working directory, as the store's path is). Not both.
	SystemPromptFile string `yaml:"system_prompt_file"`
	// ContextWindow is how many tokens the model accepts; 0: from the provider's model
	// list or a built-in table of well-known models.
	ContextWindow int `yaml:"context_window"`
	// Prices are the model's prices, for cost budgets (never fetched).
	Prices Prices `yaml:"prices"`
	// Fallback lists the models tried in order when this one fails with
	// transient_provider after its retries, or refuses a request as too long for its
	// context (then only models with a larger window).
	Fallback []FallbackModel `yaml:"fallback"`
}

// Prices are a model's prices in USD per million tokens.
type Prices struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
}

// Cost returns the price in USD of in input and out output tokens.
func (p Prices) Cost(in, out int64) float64 {
	return (float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok) / 1e6
}

// FallbackModel is one entry of llm.fallback: a model of any provider, with its own key,
// window and prices.
type FallbackModel struct {
	// Provider is openai, anthropic or scripted.
	Provider string `yaml:"provider"`
	// BaseURL overrides the provider's API endpoint ("" = the provider's default).
	BaseURL string `yaml:"base_url"`
	Model   string `yaml:"model"`
	// APIKeyEnv is the name of the variable that holds the key, never the key itself.
	APIKeyEnv     string `yaml:"api_key_env"`
	ContextWindow int    `yaml:"context_window"`
	Prices        Prices `yaml:"prices"`
}

// APIKey returns the key from the environment variable named by APIKeyEnv ("" when
// unset). Never log it.
func (f FallbackModel) APIKey() string {
	if f.APIKeyEnv == "" {
		return ""
	}
	return os.Getenv(f.APIKeyEnv)
}

// History is the history section: what the model is sent of a long thread. The thread
// itself keeps every message.
type History struct {
	// CompactAt is the share of the context window past which older turns are summarised.
	CompactAt float64 `yaml:"compact_at"`
	// KeepRecentTurns are the turns never summarised.
	KeepRecentTurns int `yaml:"keep_recent_turns"`
	// MaxToolResultBytes: larger tool results reach the model cut, ending with
	// [TRUNCATED:bytes=N].
	MaxToolResultBytes int `yaml:"max_tool_result_bytes"`
}

// History defaults.
const (
	DefaultCompactAt          = 0.8
	DefaultKeepRecentTurns    = 4
	DefaultMaxToolResultBytes = 65536
)

// MCPServe is the mcp_server section: Baton as an MCP server (DESIGN §9d).
type MCPServe struct {
	// Enabled serves MCP at /mcp.
	Enabled bool `yaml:"enabled"`
	// Name is the server's name in its initialize result.
	Name string `yaml:"name"`
	// Agents are the configured agents offered as tools (names or * patterns).
	Agents Patterns `yaml:"agents"`
	// CoordinatorTool names the tool that runs the whole coordinator; "" for none.
	CoordinatorTool string `yaml:"coordinator_tool"`
	// TaskTTL is how long a finished MCP task stays readable.
	TaskTTL Duration `yaml:"task_ttl"`
}

// MCP server defaults.
const (
	DefaultMCPServeName         = "baton"
	DefaultMCPCoordinatorTool   = "ask"
	DefaultMCPTaskTTL           = Duration(24 * time.Hour)
	DefaultBudgetWarnAt         = 0.8
	DefaultOIDCMaxTokenLifetime = Duration(24 * time.Hour)
)

// Patterns is a list of names or * patterns (path.Match syntax), written in YAML as a
// list or as one string.
type Patterns []string

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Patterns) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		*p = Patterns{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(Patterns, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return errors.New("must be a name, a pattern or a list of them")
			}
			out = append(out, e.Value)
		}
		*p = out
		return nil
	}
	return errors.New("must be a name, a pattern or a list of them")
}

// MaxSystemPromptBytes caps llm.system_prompt (and the file's text): it is sent with every
// model call.
const MaxSystemPromptBytes = 64 << 10

// ResolveSystemPrompt reads llm.system_prompt_file into llm.system_prompt. Load calls it;
// a configuration built from Default and ApplyEnv calls it itself. Errors name the key.
func (c *Config) ResolveSystemPrompt() error {
	l := &c.LLM
	if l.SystemPromptFile == "" {
		if len(l.SystemPrompt) > MaxSystemPromptBytes {
			return c.fieldErr("llm.system_prompt", "longer than %d bytes", MaxSystemPromptBytes)
		}
		return nil
	}
	if l.SystemPrompt != "" {
		return c.fieldErr("llm.system_prompt_file", "set llm.system_prompt or llm.system_prompt_file, not both")
	}
	f, err := os.Open(l.SystemPromptFile)
	if err != nil {
		return c.fieldErr("llm.system_prompt_file", "cannot be read: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSystemPromptBytes+1))
	if err != nil {
		return c.fieldErr("llm.system_prompt_file", "cannot be read: %v", err)
	}
	if len(data) > MaxSystemPromptBytes {
		return c.fieldErr("llm.system_prompt_file", "longer than %d bytes", MaxSystemPromptBytes)
	}
	if !utf8.Valid(data) {
		return c.fieldErr("llm.system_prompt_file", "is not UTF-8 text")
	}
	l.SystemPrompt = string(data)
	return nil
}

// APIKey returns the key from the environment variable named by APIKeyEnv ("" when
// unset). Never log it.
func (l LLM) APIKey() string {
	if l.APIKeyEnv == "" {
		return ""
	}
	return os.Getenv(l.APIKeyEnv)
}

// Agent is one A2A sub-agent, offered to the model as a tool named Name.
type Agent struct {
	Name string `yaml:"name"`
	// URL is the agent's base URL; the card is read from /.well-known/agent-card.json.
	URL string `yaml:"url"`
	// CardURL is the card's full URL, for agents that publish it elsewhere than under URL.
	CardURL string `yaml:"card_url"`
	// Headers are sent with every request to the agent's own origin (never to another);
	// ${VAR} is expanded from the environment at load time, so values may hold secrets.
	Headers map[string]string `yaml:"headers"`
	// AllowedOrigins are the origins besides the configured one that the card may point
	// the client to (scheme://host[:port]). Default: none.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Timeout bounds active time, not time spent waiting for the user.
	Timeout Duration `yaml:"timeout"`
	// CardTTL is how long a card is used before it is read again (it is also read again
	// after a protocol error).
	CardTTL Duration `yaml:"card_ttl"`
	// InputRequired is ask_user (default: raise an interrupt at once) or model (the model
	// sees the tag and decides).
	InputRequired string `yaml:"input_required"`
	// Auth is how Baton authenticates to the agent as the user: none (the default) or
	// exchange (RFC 8693: the caller's OIDC token exchanged per call for one with the
	// agent's audience).
	Auth AgentAuth `yaml:"auth"`
}

// AgentAuth is an agent's auth block (contract section 4).
type AgentAuth struct {
	// Mode is none (the default) or exchange.
	Mode            string   `yaml:"mode"`
	TokenURL        string   `yaml:"token_url"`
	Audience        string   `yaml:"audience"`
	Scopes          []string `yaml:"scopes"`
	ClientID        string   `yaml:"client_id"`
	ClientSecretEnv string   `yaml:"client_secret_env"`
}

// AuthExchange is the RFC 8693 token-exchange mode of agents and MCP servers: the
// caller's OIDC access token is exchanged at token_url for one with audience.
const AuthExchange = "exchange"

// LogValue implements slog.LogValuer: header values are secrets and are left out, and so
// is any userinfo in the URLs.
func (a Agent) LogValue() slog.Value {
	names := make([]string, 0, len(a.Headers))
	for k := range a.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return slog.GroupValue(
		slog.String("name", a.Name),
		slog.String("url", redactURL(a.URL)),
		slog.String("card_url", redactURL(a.CardURL)),
		slog.Any("header_names", names),
		slog.Any("allowed_origins", a.AllowedOrigins),
		slog.String("timeout", a.Timeout.String()),
		slog.String("card_ttl", a.CardTTL.String()),
		slog.String("input_required", a.InputRequired),
	)
}

// redactURL hides the password of a URL's userinfo.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// MCPServer is one MCP server: Command (stdio) or URL (streamable HTTP), never both.
type MCPServer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	URL     string   `yaml:"url"`
	// Headers are sent with every HTTP request; ${VAR} is expanded from the environment
	// at load time, so values may hold secrets.
	Headers map[string]string `yaml:"headers"`
	// Env holds the stdio child's only variables besides the few it inherits (PATH, HOME,
	// ...); ${VAR} is expanded from the environment at load time, so values may hold
	// secrets. Only with command.
	Env map[string]string `yaml:"env"`
	// OnToolError is retry (default), fail or error (DESIGN §6).
	OnToolError string `yaml:"on_tool_error"`
	// Auth is how Baton authorises itself to the server (DESIGN §4): none, user (OAuth
	// per principal, signed in through the chat) or service (client credentials).
	Auth MCPAuth `yaml:"auth"`
}

// MCPAuth is an MCP server's authorization settings.
type MCPAuth struct {
	// Mode is none (the default), user (OAuth per principal), service (client
	// credentials) or exchange (RFC 8693, as for agents).
	Mode            string   `yaml:"mode"`
	ClientID        string   `yaml:"client_id"`
	ClientSecretEnv string   `yaml:"client_secret_env"`
	Scopes          []string `yaml:"scopes"`
	// TokenURL and Audience are mode exchange's: the authorization server's token
	// endpoint and the audience the server's tokens must carry.
	TokenURL string `yaml:"token_url"`
	Audience string `yaml:"audience"`
}

// Values of MCPAuth.Mode.
const (
	MCPAuthNone    = "none"
	MCPAuthUser    = "user"
	MCPAuthService = "service"
)

// LogValue implements slog.LogValuer: header and env values are secrets and are left out.
func (m MCPServer) LogValue() slog.Value {
	names := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		names = append(names, k)
	}
	envNames := make([]string, 0, len(m.Env))
	for k := range m.Env {
		envNames = append(envNames, k)
	}
	sort.Strings(names)
	sort.Strings(envNames)
	return slog.GroupValue(
		slog.String("name", m.Name),
		slog.Any("command", m.Command),
		slog.String("url", m.URL),
		slog.Any("header_names", names),
		slog.Any("env_names", envNames),
		slog.String("on_tool_error", m.OnToolError),
	)
}

// Limits bounds a run.
type Limits struct {
	MaxIterations int      `yaml:"max_iterations"`
	MaxRunSeconds int      `yaml:"max_run_seconds"`
	ToolTimeout   Duration `yaml:"tool_timeout"`
	// CancelHorizon bounds how long a CancelTask that failed or timed out is retried
	// before it is logged and counted as abandoned.
	CancelHorizon Duration `yaml:"cancel_horizon"`
}

// Policy restricts what the model may call (DESIGN §7). A refused call gets a
// [RETRY:policy_deny|rate_exceeded|budget_exceeded] result. The zero value allows
// everything.
type Policy struct {
	// Agents lists sub-agents by name (the tool name the model sees).
	Agents AccessList `yaml:"agents"`
	// Tools lists MCP tools as the model sees them: <server>__<tool>.
	Tools AccessList `yaml:"tools"`
	// RateLimits bound how often a tool (or sub-agent) may be called, across all runs.
	RateLimits []RateLimit `yaml:"rate_limits"`
	// Budget bounds each run.
	Budget Budget `yaml:"budget"`
	// PrincipalBudget bounds each principal per UTC day.
	PrincipalBudget PrincipalBudget `yaml:"principal_budget"`
}

// AccessList is an allow/deny list. Entries may be patterns ("files__*", path.Match
// syntax). An empty allow list allows everything; deny wins over allow.
type AccessList struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// RateLimit allows at most MaxCalls calls of Tool in any window of Per.
type RateLimit struct {
	// Tool is a sub-agent name or an MCP tool as <server>__<tool> (no pattern).
	Tool     string   `yaml:"tool"`
	MaxCalls int      `yaml:"max_calls"`
	Per      Duration `yaml:"per"`
}

// Budget bounds one run; 0 means no limit.
type Budget struct {
	// MaxToolCalls bounds the tool calls sent (sub-agents and MCP tools).
	MaxToolCalls int `yaml:"max_tool_calls"`
	// MaxTokens bounds the LLM tokens (input and output) of the run.
	MaxTokens int `yaml:"max_tokens"`
	// MaxCostUSD bounds the run's model cost, priced with llm.prices.
	MaxCostUSD float64 `yaml:"max_cost_usd"`
	// WarnAt is the share of a limit at which the model and the user are warned once.
	WarnAt float64 `yaml:"warn_at"`
}

// PrincipalBudget bounds one principal's model use per UTC day, across runs and
// replicas; 0 means no limit.
type PrincipalBudget struct {
	DailyTokens  int64   `yaml:"daily_tokens"`
	DailyCostUSD float64 `yaml:"daily_cost_usd"`
	// WarnAt is the share of a limit at which the model and the user are warned once.
	WarnAt float64 `yaml:"warn_at"`
}

// Interrupts configures questions to the user (DESIGN §9).
type Interrupts struct {
	// TTL is how long an interrupt stays open before its parked work is cancelled.
	TTL Duration `yaml:"ttl"`
}

// Approvals lists the calls the user must approve before they are sent (DESIGN §9). The
// zero value asks for nothing.
type Approvals struct {
	// Tools are tool names as the model sees them: <server>__<tool> for MCP tools or a
	// sub-agent's name; "*" patterns (path.Match syntax) as in policy.tools.
	Tools []string `yaml:"tools"`
	// Agents are A2A sub-agents by name (patterns allowed).
	Agents []string `yaml:"agents"`
	// Destructive asks before every MCP tool annotated destructiveHint: true that is not
	// also readOnlyHint.
	Destructive bool `yaml:"destructive"`
}

// Empty reports whether no approval is configured.
func (a Approvals) Empty() bool { return len(a.Tools) == 0 && len(a.Agents) == 0 && !a.Destructive }

// DefaultInterruptTTL is the interrupt lifetime of DESIGN §9.
const DefaultInterruptTTL = Duration(30 * time.Minute)

// Loop configures loop and stall detection (DESIGN §6).
type Loop struct {
	// SoftThreshold is the repetition of the same call (or error) that is logged.
	SoftThreshold int `yaml:"soft_threshold"`
	// HardThreshold is the repetition that is loop_detected; the call that would reach
	// it is not sent.
	HardThreshold int `yaml:"hard_threshold"`
	// StallTurns is the number of consecutive tool rounds without a successful call that
	// count as no_progress; 0 turns stall detection off.
	StallTurns int `yaml:"stall_turns"`
}

// Duration is a time.Duration written in YAML as a Go duration string ("120s", "1m30s")
// or as an integer number of seconds.
type Duration time.Duration

// String implements fmt.Stringer.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New(durationHint)
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

const durationHint = `must be a duration such as "120s" or a number of seconds`

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		if secs > int64(time.Duration(1<<63-1)/time.Second) || secs < -int64(time.Duration(1<<63-1)/time.Second) {
			return 0, fmt.Errorf("%s (got %q: out of range)", durationHint, s)
		}
		return Duration(time.Duration(secs) * time.Second), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s (got %q)", durationHint, s)
	}
	return Duration(d), nil
}

// Telemetry is the telemetry section: OpenTelemetry tracing over OTLP. The standard
// OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_SERVICE_NAME, ...) win over these keys.
type Telemetry struct {
	// OTLPEndpoint is the collector's base URL; empty means no tracing.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// OTLPProtocol is http/protobuf, http/json or grpc.
	OTLPProtocol string `yaml:"otlp_protocol"`
	// ServiceName is the service.name of Baton's spans.
	ServiceName string `yaml:"service_name"`
}

// A2AServer is the a2a_server section: Baton as an A2A agent (DESIGN §9c).
type A2AServer struct {
	// Enabled serves the card at /.well-known/agent-card.json and the A2A bindings under
	// /a2a; off, none of those paths exists.
	Enabled bool `yaml:"enabled"`
	// Name is the card's name.
	Name string `yaml:"name"`
	// Description is the card's description; empty: derived from the agents and tools.
	Description string `yaml:"description"`
}

// DefaultA2AServerName is a2a_server.name's default.
const DefaultA2AServerName = "baton"

// Telemetry defaults.
const (
	DefaultOTLPProtocol     = "http/protobuf"
	DefaultTelemetryService = "baton"
)

// Default returns the built-in defaults: the scripted model, no agents and no MCP servers.
func Default() *Config {
	return &Config{
		Listen: DefaultListen,
		Server: Server{
			MaxBodyBytes:   DefaultMaxBodyBytes,
			ShutdownGrace:  DefaultShutdownGrace,
			MaxActiveRuns:  DefaultMaxActiveRuns,
			EventRetention: DefaultEventRetention,
			ReconnectGrace: DefaultReconnectGrace,
		},
		Replication: Replication{Heartbeat: DefaultHeartbeat, Lease: DefaultLease},
		LLM:         LLM{Provider: DefaultProvider},
		Limits: Limits{
			MaxIterations: DefaultMaxIterations,
			MaxRunSeconds: DefaultMaxRunSeconds,
			ToolTimeout:   DefaultToolTimeout,
			CancelHorizon: DefaultCancelHorizon,
		},
		Loop: Loop{
			SoftThreshold: DefaultLoopSoft,
			HardThreshold: DefaultLoopHard,
			StallTurns:    DefaultStallTurns,
		},
		Interrupts: Interrupts{TTL: DefaultInterruptTTL},
		Telemetry:  Telemetry{OTLPProtocol: DefaultOTLPProtocol, ServiceName: DefaultTelemetryService},
		A2AServer:  A2AServer{Name: DefaultA2AServerName},
		History: History{
			CompactAt:          DefaultCompactAt,
			KeepRecentTurns:    DefaultKeepRecentTurns,
			MaxToolResultBytes: DefaultMaxToolResultBytes,
		},
		Policy: Policy{
			Budget:          Budget{WarnAt: DefaultBudgetWarnAt},
			PrincipalBudget: PrincipalBudget{WarnAt: DefaultBudgetWarnAt},
		},
		MCPServe: MCPServe{
			Name:            DefaultMCPServeName,
			Agents:          Patterns{"*"},
			CoordinatorTool: DefaultMCPCoordinatorTool,
			TaskTTL:         DefaultMCPTaskTTL,
		},
		Store: DefaultStore,
	}
}

// Load reads the YAML file at path over the defaults, applies BATON_* environment
// overrides and validates the result. Errors that describe bad configuration wrap
// ErrInvalid.
func Load(path string) (*Config, error) {
	return load(path, os.Getenv)
}

func load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := Default()
	c.Source = path
	if err := decode(c, data); err != nil {
		return nil, err
	}
	c.fillListDefaults()
	if err := c.expandHeaders(getenv); err != nil {
		return nil, err
	}
	if err := c.ApplyEnv(getenv); err != nil {
		return nil, err
	}
	if err := c.ResolveSystemPrompt(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// fillListDefaults sets the per-entry defaults that Default cannot pre-fill because the
// lists come from the file.
func (c *Config) fillListDefaults() {
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.Timeout == 0 {
			a.Timeout = DefaultAgentTimeout
		}
		if a.CardTTL == 0 {
			a.CardTTL = DefaultAgentCardTTL
		}
		if a.InputRequired == "" {
			a.InputRequired = InputRequiredAskUser
		}
	}
	for i := range c.MCPServers {
		if c.MCPServers[i].OnToolError == "" {
			c.MCPServers[i].OnToolError = OnToolErrorRetry
		}
	}
}

// expandHeaders replaces ${VAR} in agent and MCP header values and MCP env values. An
// unset or empty variable is an error: sending "Bearer " would fail later and less clearly.
func (c *Config) expandHeaders(getenv func(string) string) error {
	for i := range c.Agents {
		if err := c.expandMap(fmt.Sprintf("agents[%d].headers", i), c.Agents[i].Headers, getenv); err != nil {
			return err
		}
	}
	for i := range c.MCPServers {
		m := &c.MCPServers[i]
		if err := c.expandMap(fmt.Sprintf("mcp_servers[%d].headers", i), m.Headers, getenv); err != nil {
			return err
		}
		if err := c.expandMap(fmt.Sprintf("mcp_servers[%d].env", i), m.Env, getenv); err != nil {
			return err
		}
	}
	return nil
}

// expandMap replaces ${VAR} in the values of m in place (in key order, so the first
// error is stable); key names the map in errors. The variables named are remembered for
// UnknownEnv.
func (c *Config) expandMap(key string, m map[string]string, getenv func(string) string) error {
	for _, name := range sortedKeys(m) {
		var missing string
		expanded := expandVars(m[name], func(k string) string {
			c.refVars = append(c.refVars, k)
			val := getenv(k)
			if val == "" && missing == "" {
				missing = k
			}
			return val
		})
		if missing != "" {
			return c.fieldErr(key+"."+name, "environment variable %s is not set", missing)
		}
		m[name] = expanded
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// expandVars replaces ${NAME} only; a lone $ is kept, so values such as "pa$$word" pass
// through unchanged.
func expandVars(s string, lookup func(string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i+2:], '}')
		if j < 0 || !isEnvName(s[i+2:i+2+j]) {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(lookup(s[i+2 : i+2+j]))
		s = s[i+3+j:]
	}
}

func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// FieldError is a configuration error about one key. It wraps ErrInvalid.
type FieldError struct {
	// Where is the file, or the environment variable that set the key.
	Where string
	// Key is the key path, e.g. "agents[1].url".
	Key string
	// Message says what is wrong, without secret values.
	Message string
}

// Error implements error: "<where>: <key>: <message>".
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Where != "" {
		b.WriteString(e.Where)
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// fieldErr builds a FieldError for key, attributed to the environment variable that set
// the key if any, else to the file.
func (c *Config) fieldErr(key, format string, args ...any) error {
	where := c.Source
	if v, ok := c.fromEnv[key]; ok {
		where = v
	}
	return &FieldError{Where: where, Key: key, Message: fmt.Sprintf(format, args...)}
}
