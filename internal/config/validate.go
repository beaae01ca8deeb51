package config

import (
	"fmt"
	"github.com/baton-dev/baton/internal/toolname"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Validate checks the whole configuration and returns the first problem found, in file
// order, as a *FieldError wrapping ErrInvalid.
func (c *Config) Validate() error {
	checks := []func() error{c.validateListen, c.validateServer, c.validateLLM, c.validateAgents, c.validateMCPServers, c.validateNames, c.validateLimits, c.validatePolicy, c.validateApprovals, c.validateLoop, c.validateTelemetry, c.validateA2AServer, c.validateStore, c.validateReplication,
		func() error { return validateSpend(c) }, func() error { return validateHistory(c) }, func() error { return validateMCPServe(c) }}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateListen() error {
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return c.fieldErr("listen", "must be host:port (got %q)", c.Listen)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return c.fieldErr("listen", "port must be a number from 0 to 65535 (got %q)", port)
	}
	return nil
}

func (c *Config) validateServer() error {
	s := c.Server
	switch {
	case s.AuthTokensEnv != "" && !isEnvName(s.AuthTokensEnv):
		// Not quoted: people paste the tokens themselves here.
		return c.fieldErr("server.auth_tokens_env", "must be the name of an environment variable, not the tokens themselves")
	case s.MaxBodyBytes <= 0:
		return c.fieldErr("server.max_body_bytes", "must be positive (got %d)", s.MaxBodyBytes)
	case s.ShutdownGrace < 0:
		return c.fieldErr("server.shutdown_grace", "must not be negative (got %s)", s.ShutdownGrace)
	case s.MaxActiveRuns <= 0:
		return c.fieldErr("server.max_active_runs", "must be positive (got %d)", s.MaxActiveRuns)
	case s.EventRetention <= 0:
		return c.fieldErr("server.event_retention", "must be positive (got %s)", s.EventRetention)
	}
	for i, o := range s.AllowedOrigins {
		if !isOrigin(o) {
			return c.fieldErr(fmt.Sprintf("server.allowed_origins[%d]", i), "must be an http(s) origin such as https://app.example.com, without path (got %q)", o)
		}
	}
	if err := c.validateOIDC(); err != nil {
		return err
	}
	return c.validateStream()
}

// validateStream checks the per-client stream limits, server.on_disconnect and
// validateOIDC checks server.oidc.
func (c *Config) validateOIDC() error {
	o := c.Server.OIDC
	if o == nil {
		return nil
	}
	switch {
	case !isIssuerURL(o.Issuer):
		return c.fieldErr("server.oidc.issuer", "must be an https URL (http only to loopback), such as https://idp.example.com (got %q)", o.Issuer)
	case o.Audience == "":
		return c.fieldErr("server.oidc.audience", "is required: the aud value Baton's access tokens carry, such as baton")
	case o.JWKSURL != "" && !isIssuerURL(o.JWKSURL):
		return c.fieldErr("server.oidc.jwks_url", "must be an https URL (http only to loopback) (got %q)", o.JWKSURL)
	case o.ClockSkew < 0 || o.ClockSkew > MaxOIDCClockSkew:
		return c.fieldErr("server.oidc.clock_skew", "must be between 0s and %s (got %s)", MaxOIDCClockSkew, o.ClockSkew)
	case o.MaxTokenLifetime < 0:
		return c.fieldErr("server.oidc.max_token_lifetime", "must not be negative (got %s); 0 means %s", o.MaxTokenLifetime, DefaultOIDCMaxTokenLifetime)
	}
	for _, a := range o.AllowedAlgs {
		if !slices.Contains(asymmetricAlgs, a) {
			return c.fieldErr("server.oidc.allowed_algs", "may name only asymmetric JWS algorithms (%v); got %q", asymmetricAlgs, a)
		}
	}
	return nil
}

// server.on_shutdown.
func (c *Config) validateStream() error {
	s := c.Server
	switch {
	case s.OnShutdown != "" && s.OnShutdown != OnShutdownCancel && s.OnShutdown != OnShutdownHandoff:
		return c.fieldErr("server.on_shutdown", "must be %s or %s (got %q)", OnShutdownHandoff, OnShutdownCancel, s.OnShutdown)
	case s.SecretsKeyEnv != "" && !isEnvName(s.SecretsKeyEnv):
		return c.fieldErr("server.secrets_key_env", "must be the name of an environment variable, not its value (got a value that is not a variable name)")
	case s.PublicURL != "" && !isPublicURL(s.PublicURL):
		return c.fieldErr("server.public_url", "must be an absolute http(s) URL without query or fragment, such as https://baton.example.com (got %q)", s.PublicURL)
	case s.OnDisconnect != "" && s.OnDisconnect != OnDisconnectCancel && s.OnDisconnect != OnDisconnectDetach:
		return c.fieldErr("server.on_disconnect", "must be %s or %s (got %q)", OnDisconnectCancel, OnDisconnectDetach, s.OnDisconnect)
	case s.ReconnectGrace <= 0:
		return c.fieldErr("server.reconnect_grace", "must be positive (got %s)", s.ReconnectGrace)
	case s.StreamBufferBytes < 0:
		return c.fieldErr("server.stream_buffer_bytes", "must not be negative (got %d)", s.StreamBufferBytes)
	case s.StreamWriteTimeout < 0:
		return c.fieldErr("server.stream_write_timeout", "must not be negative (got %s)", s.StreamWriteTimeout)
	case s.MaxFollowersPerRun < 0:
		return c.fieldErr("server.max_followers_per_run", "must not be negative (got %d)", s.MaxFollowersPerRun)
	case s.MaxEventsPerRun < 0:
		return c.fieldErr("server.max_events_per_run", "must not be negative (got %d)", s.MaxEventsPerRun)
	case s.ThreadRetention < 0:
		return c.fieldErr("server.thread_retention", "must not be negative (got %s)", s.ThreadRetention)
	case s.MaxThreadsPerPrincipal < 0:
		return c.fieldErr("server.max_threads_per_principal", "must not be negative (got %d)", s.MaxThreadsPerPrincipal)
	case s.MaxFollowersPerPrincipal < 0:
		return c.fieldErr("server.max_followers_per_principal", "must not be negative (got %d)", s.MaxFollowersPerPrincipal)
	case s.MaxDepth < 0:
		return c.fieldErr("server.max_depth", "must not be negative (got %d); 0 means %d", s.MaxDepth, DefaultMaxDepth)
	}
	return nil
}

func (c *Config) validateReplication() error {
	r := c.Replication
	switch {
	case r.Heartbeat <= 0:
		return c.fieldErr("replication.heartbeat", "must be positive (got %s)", r.Heartbeat)
	case r.Lease < 2*r.Heartbeat:
		return c.fieldErr("replication.lease", "must be at least twice replication.heartbeat (got %s with a heartbeat of %s)", r.Lease, r.Heartbeat)
	case r.AdvertiseURL != "" && !isHTTPURL(r.AdvertiseURL):
		return c.fieldErr("replication.advertise_url", "must be an http or https URL")
	}
	return nil
}

// isOrigin reports whether s is scheme://host[:port] with an http(s) scheme and nothing else.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery
}

func (c *Config) validateLLM() error {
	l := c.LLM
	switch l.Provider {
	case ProviderOpenAI, ProviderAnthropic, ProviderScripted:
	default:
		return c.fieldErr("llm.provider", "must be one of %s, %s, %s (got %q)", ProviderOpenAI, ProviderAnthropic, ProviderScripted, l.Provider)
	}
	if l.BaseURL != "" && !isHTTPURL(l.BaseURL) {
		return c.fieldErr("llm.base_url", "not an absolute http(s) URL")
	}
	if l.Model == "" && l.Provider != ProviderScripted {
		return c.fieldErr("llm.model", "required for provider %s", l.Provider)
	}
	if l.APIKeyEnv != "" && !isEnvName(l.APIKeyEnv) {
		return c.fieldErr("llm.api_key_env", "must be the name of an environment variable, not the key itself")
	}
	if l.Timeout < 0 {
		return c.fieldErr("llm.timeout", "must not be negative (got %s)", l.Timeout)
	}
	if l.IdleTimeout < 0 {
		return c.fieldErr("llm.idle_timeout", "must not be negative (got %s)", l.IdleTimeout)
	}
	return nil
}

func (c *Config) validateAgents() error {
	seen := map[string]int{}
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		if a.Name == "" {
			return c.fieldErr(key+".name", "required")
		}
		tool := ToolName(a.Name)
		if tool == AskUserTool {
			return c.fieldErr(key+".name", "%q is reserved for the built-in %s tool", a.Name, AskUserTool)
		}
		if j, dup := seen[tool]; dup {
			return c.fieldErr(key+".name", "duplicate of agents[%d] (both are the tool %q)", j, tool)
		}
		seen[tool] = i
		if a.URL == "" {
			return c.fieldErr(key+".url", "required")
		}
		if !isHTTPURL(a.URL) {
			return c.fieldErr(key+".url", "not an absolute http(s) URL")
		}
		if a.Timeout < 0 {
			return c.fieldErr(key+".timeout", "must not be negative (got %s)", a.Timeout)
		}
		if err := c.validateAgentOrigins(key, a); err != nil {
			return err
		}
		switch a.InputRequired {
		case "", InputRequiredAskUser, InputRequiredModel:
		default:
			return c.fieldErr(key+".input_required", "must be one of %s, %s (got %q)", InputRequiredAskUser, InputRequiredModel, a.InputRequired)
		}
		switch a.Auth.Mode {
		case "", MCPAuthNone:
			if a.Auth.TokenURL != "" || a.Auth.Audience != "" || a.Auth.ClientID != "" || a.Auth.ClientSecretEnv != "" || len(a.Auth.Scopes) > 0 {
				return c.fieldErr(key+".auth", "token_url, audience, scopes, client_id and client_secret_env need mode %s", AuthExchange)
			}
		case AuthExchange:
			if err := validateExchange(c, key+".auth", a.URL, a.Headers, exchangeAuth{a.Auth.TokenURL, a.Auth.Audience, a.Auth.ClientID, a.Auth.ClientSecretEnv, a.Auth.Scopes}); err != nil {
				return err
			}
		default:
			return c.fieldErr(key+".auth.mode", "must be %s or %s (got %q)", MCPAuthNone, AuthExchange, a.Auth.Mode)
		}
	}
	return nil
}

// validateAgentOrigins checks the keys that decide where an agent's requests may go.
func (c *Config) validateAgentOrigins(key string, a Agent) error {
	if a.CardURL != "" && !isHTTPURL(a.CardURL) {
		return c.fieldErr(key+".card_url", "not an absolute http(s) URL")
	}
	if a.CardTTL < 0 {
		return c.fieldErr(key+".card_ttl", "must not be negative (got %s)", a.CardTTL)
	}
	for j, o := range a.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || !isHTTPURL(o) || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return c.fieldErr(fmt.Sprintf("%s.allowed_origins[%d]", key, j), "must be an origin such as https://agents.example.com:8443 (got %q)", o)
		}
	}
	for name := range a.Headers {
		if !validHeaderName(name) {
			return c.fieldErr(key+".headers", "%q is not a valid header name", name)
		}
	}
	return nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

func (c *Config) validateMCPServers() error {
	seen := map[string]int{}
	for i, m := range c.MCPServers {
		key := fmt.Sprintf("mcp_servers[%d]", i)
		if m.Name == "" {
			return c.fieldErr(key+".name", "required")
		}
		tool := ToolName(m.Name)
		if strings.Contains(tool, "__") {
			return c.fieldErr(key+".name", `must not contain "__" (it separates server and tool in tool names)`)
		}
		if j, dup := seen[tool]; dup {
			return c.fieldErr(key+".name", "duplicate of mcp_servers[%d] (both are %q)", j, tool)
		}
		seen[tool] = i
		switch {
		case len(m.Command) > 0 && m.URL != "":
			return c.fieldErr(key, "set either command (stdio) or url (streamable HTTP), not both")
		case len(m.Command) == 0 && m.URL == "":
			return c.fieldErr(key, "set command (stdio) or url (streamable HTTP)")
		case len(m.Command) > 0 && strings.TrimSpace(m.Command[0]) == "":
			return c.fieldErr(key+".command", "the program (first element) must not be empty")
		case m.URL != "" && !isHTTPURL(m.URL):
			return c.fieldErr(key+".url", "not an absolute http(s) URL")
		case len(m.Headers) > 0 && m.URL == "":
			return c.fieldErr(key+".headers", "only used with url")
		case len(m.Env) > 0 && len(m.Command) == 0:
			return c.fieldErr(key+".env", "only used with command (stdio)")
		}
		for _, name := range sortedKeys(m.Env) {
			if !isEnvName(name) {
				return c.fieldErr(key+".env", "%q is not a valid environment variable name", name)
			}
		}
		switch m.OnToolError {
		case "", OnToolErrorRetry, OnToolErrorFail, OnToolErrorError:
		default:
			return c.fieldErr(key+".on_tool_error", "must be one of %s, %s, %s (got %q)", OnToolErrorRetry, OnToolErrorFail, OnToolErrorError, m.OnToolError)
		}
		if err := c.validateMCPAuth(key+".auth", m); err != nil {
			return err
		}
	}
	return nil
}

// validateMCPAuth checks the auth section of an MCP server (DESIGN §4). What needs the
// environment (the secrets key, the client secret) is checked at start by SignIn.
func (c *Config) validateMCPAuth(key string, m MCPServer) error {
	a := m.Auth
	switch a.Mode {
	case "", MCPAuthNone:
		if a.ClientSecretEnv != "" {
			return c.fieldErr(key+".client_secret_env", "is used only with mode %s or %s (mode is %s)", MCPAuthUser, MCPAuthService, MCPAuthNone)
		}
		if a.ClientID != "" || len(a.Scopes) > 0 {
			return c.fieldErr(key, "client_id, client_secret_env and scopes need mode %s or %s", MCPAuthUser, MCPAuthService)
		}
		if a.TokenURL != "" || a.Audience != "" {
			return c.fieldErr(key, "token_url and audience need mode %s", AuthExchange)
		}
		return nil
	case MCPAuthUser, MCPAuthService:
		if a.TokenURL != "" || a.Audience != "" {
			return c.fieldErr(key, "token_url and audience need mode %s", AuthExchange)
		}
	case AuthExchange:
		return validateExchange(c, key, m.URL, m.Headers, exchangeAuth{a.TokenURL, a.Audience, a.ClientID, a.ClientSecretEnv, a.Scopes})
	default:
		return c.fieldErr(key+".mode", "must be one of %s, %s, %s, %s (got %q)", MCPAuthNone, MCPAuthUser, MCPAuthService, AuthExchange, a.Mode)
	}
	switch {
	case m.URL == "":
		return c.fieldErr(key+".mode", "%s (OAuth) needs a streamable HTTP server (url); a stdio server gets its credentials through env", a.Mode)
	case !oauthURL(m.URL):
		return c.fieldErr(key+".mode", "%s (OAuth) needs an https url, or http only on a loopback host (127.0.0.1, [::1], localhost): tokens must not cross the network in clear (got %s)", a.Mode, redactURL(m.URL))
	case hasHeader(m.Headers, "Authorization"):
		return c.fieldErr(key+".mode", "%s (OAuth) sets the Authorization header itself; remove it from headers, or use mode %s", a.Mode, MCPAuthNone)
	case a.ClientSecretEnv != "" && !isEnvName(a.ClientSecretEnv):
		return c.fieldErr(key+".client_secret_env", "must be the name of an environment variable, not the secret itself")
	case a.ClientSecretEnv != "" && a.ClientID == "":
		return c.fieldErr(key+".client_id", "required with client_secret_env (the secret belongs to a pre-registered client)")
	case a.Mode == MCPAuthService && (a.ClientID == "" || a.ClientSecretEnv == ""):
		return c.fieldErr(key, "mode %s (client credentials) needs client_id and client_secret_env", MCPAuthService)
	case a.Mode == MCPAuthUser && c.Server.SecretsKeyEnv == "":
		return c.fieldErr("server.secrets_key_env", "required with mcp server %q in mode %s: stored OAuth tokens are encrypted with this key (32 random bytes, base64; e.g. openssl rand -base64 32)", m.Name, MCPAuthUser)
	}
	for i, sc := range a.Scopes {
		if !isScopeToken(sc) {
			return c.fieldErr(fmt.Sprintf("%s.scopes[%d]", key, i), "not an OAuth scope token (printable ASCII without spaces, quotes or backslashes; got %q)", sc)
		}
	}
	return nil
}

// oauthURL reports whether an MCP server's URL may carry OAuth tokens: https anywhere, http
// only to a loopback host (the same rule go-sdk's discovery applies to metadata URLs).
func oauthURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return u.Host != ""
	case "http":
		h := u.Hostname()
		if strings.EqualFold(h, "localhost") {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// isScopeToken: RFC 6749 §3.3 scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
func isScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x21 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// validateNames rejects agent names that could shadow an MCP tool, which the model sees
// as <server>__<tool>.
func (c *Config) validateNames() error {
	for i, a := range c.Agents {
		tool := ToolName(a.Name)
		for _, m := range c.MCPServers {
			prefix := ToolName(m.Name) + "__"
			if strings.HasPrefix(tool, prefix) {
				return c.fieldErr(fmt.Sprintf("agents[%d].name", i), "%q collides with the tools of mcp server %q (named %s<tool>)", a.Name, m.Name, prefix)
			}
		}
	}
	return nil
}

func (c *Config) validateLimits() error {
	l := c.Limits
	switch {
	case l.MaxIterations <= 0:
		return c.fieldErr("limits.max_iterations", "must be positive (got %d)", l.MaxIterations)
	case l.MaxRunSeconds <= 0:
		return c.fieldErr("limits.max_run_seconds", "must be positive (got %d)", l.MaxRunSeconds)
	case l.ToolTimeout <= 0:
		return c.fieldErr("limits.tool_timeout", "must be positive (got %s)", l.ToolTimeout)
	case l.CancelHorizon <= 0:
		return c.fieldErr("limits.cancel_horizon", "must be positive (got %s)", l.CancelHorizon)
	case c.Interrupts.TTL <= 0:
		return c.fieldErr("interrupts.ttl", "must be positive (got %s)", c.Interrupts.TTL)
	}
	return nil
}

// validatePolicy checks that every name in the policy section names something configured
// (a typo in a deny list would otherwise deny nothing, silently).
func (c *Config) validatePolicy() error {
	p := c.Policy
	agents := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = ToolName(a.Name)
	}
	servers := make([]string, len(c.MCPServers))
	for i, m := range c.MCPServers {
		servers[i] = ToolName(m.Name)
	}
	lists := []struct {
		key   string
		list  AccessList
		check func(key, entry string) error
	}{
		{"policy.agents", p.Agents, func(key, e string) error { return c.checkAgentEntry(key, e, agents) }},
		{"policy.tools", p.Tools, func(key, e string) error { return c.checkToolEntry(key, e, servers, true) }},
	}
	for _, l := range lists {
		allowed := map[string]bool{}
		for i, e := range l.list.Allow {
			if err := l.check(fmt.Sprintf("%s.allow[%d]", l.key, i), e); err != nil {
				return err
			}
			allowed[e] = true
		}
		for i, e := range l.list.Deny {
			key := fmt.Sprintf("%s.deny[%d]", l.key, i)
			if err := l.check(key, e); err != nil {
				return err
			}
			if allowed[e] {
				return c.fieldErr(key, "%q is also in %s.allow; list it in one of them", e, l.key)
			}
		}
	}
	seen := map[string]int{}
	for i, rl := range p.RateLimits {
		key := fmt.Sprintf("policy.rate_limits[%d]", i)
		switch {
		case rl.Tool == "":
			return c.fieldErr(key+".tool", "required")
		case strings.ContainsAny(rl.Tool, "*?["):
			return c.fieldErr(key+".tool", "must name one tool, not a pattern (got %q)", rl.Tool)
		}
		if !contains(agents, rl.Tool) {
			if err := c.checkToolEntry(key+".tool", rl.Tool, servers, false); err != nil {
				return err
			}
		}
		if j, dup := seen[rl.Tool]; dup {
			return c.fieldErr(key+".tool", "duplicate of policy.rate_limits[%d] (both limit %q)", j, rl.Tool)
		}
		seen[rl.Tool] = i
		if rl.MaxCalls <= 0 {
			return c.fieldErr(key+".max_calls", "must be positive (got %d)", rl.MaxCalls)
		}
		if rl.Per <= 0 {
			return c.fieldErr(key+".per", "must be positive (got %s)", rl.Per)
		}
	}
	switch {
	case p.Budget.MaxToolCalls < 0:
		return c.fieldErr("policy.budget.max_tool_calls", "must not be negative (got %d); 0 means no limit", p.Budget.MaxToolCalls)
	case p.Budget.MaxTokens < 0:
		return c.fieldErr("policy.budget.max_tokens", "must not be negative (got %d); 0 means no limit", p.Budget.MaxTokens)
	}
	return nil
}

// validateApprovals checks that every approvals entry names something configured: a typo
// would otherwise let a call through without asking, silently.
func (c *Config) validateApprovals() error {
	agents := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = ToolName(a.Name)
	}
	servers := make([]string, len(c.MCPServers))
	for i, m := range c.MCPServers {
		servers[i] = ToolName(m.Name)
	}
	for i, e := range c.Approvals.Agents {
		if err := c.checkAgentEntry(fmt.Sprintf("approvals.agents[%d]", i), e, agents); err != nil {
			return err
		}
	}
	for i, e := range c.Approvals.Tools {
		key := fmt.Sprintf("approvals.tools[%d]", i)
		if _, err := path.Match(e, ""); err != nil {
			return c.fieldErr(key, "bad pattern %q", e)
		}
		if e == "" {
			return c.fieldErr(key, "must not be empty")
		}
		if !strings.Contains(e, "__") {
			// Not an MCP tool: it must be (or match) a sub-agent's tool name.
			if c.checkAgentEntry(key, e, agents) == nil {
				continue
			}
			return c.fieldErr(key, "%q names no configured agent, and an MCP tool must be <server>__<tool>, as the model sees it", e)
		}
		if err := c.checkToolEntry(key, e, servers, true); err != nil {
			return err
		}
	}
	return nil
}

// checkAgentEntry accepts a configured agent's tool name, or a pattern that matches one.
func (c *Config) checkAgentEntry(key, e string, agents []string) error {
	if _, err := path.Match(e, ""); err != nil {
		return c.fieldErr(key, "bad pattern %q", e)
	}
	for _, a := range agents {
		if ok, _ := path.Match(e, a); ok {
			return nil
		}
	}
	return c.fieldErr(key, "%q matches no configured agent", e)
}

// checkToolEntry accepts <server>__<tool> where <server> is a configured MCP server (or,
// with patterns, a pattern that matches one). Tool names cannot be checked: the catalog is
// only known at run time.
func (c *Config) checkToolEntry(key, e string, servers []string, patterns bool) error {
	if patterns {
		if _, err := path.Match(e, ""); err != nil {
			return c.fieldErr(key, "bad pattern %q", e)
		}
	}
	server, tool, ok := strings.Cut(e, "__")
	if !ok || server == "" || tool == "" {
		return c.fieldErr(key, "must be <server>__<tool>, as the model sees MCP tools (got %q)", e)
	}
	for _, s := range servers {
		if s == server {
			return nil
		}
		if patterns {
			if ok, _ := path.Match(server, s); ok {
				return nil
			}
		}
	}
	return c.fieldErr(key, "%q names no configured mcp server (%q)", e, server)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (c *Config) validateLoop() error {
	l := c.Loop
	switch {
	case l.SoftThreshold < 1:
		return c.fieldErr("loop.soft_threshold", "must be at least 1 (got %d)", l.SoftThreshold)
	case l.HardThreshold <= l.SoftThreshold:
		return c.fieldErr("loop.hard_threshold", "must be greater than loop.soft_threshold (%d) (got %d)", l.SoftThreshold, l.HardThreshold)
	case l.StallTurns < 0:
		return c.fieldErr("loop.stall_turns", "must not be negative (got %d); 0 turns stall detection off", l.StallTurns)
	}
	return nil
}

func (c *Config) validateStore() error {
	switch {
	case c.Store == "memory:":
		return nil
	case strings.HasPrefix(c.Store, "sqlite:"):
		if strings.TrimSpace(strings.TrimPrefix(c.Store, "sqlite:")) == "" {
			return c.fieldErr("store", `sqlite needs a path, e.g. "sqlite:./data/baton.db"`)
		}
		return nil
	case strings.HasPrefix(c.Store, "postgres://"), strings.HasPrefix(c.Store, "postgresql://"):
		// Only the shape is checked here (the store parses the rest when it connects);
		// the DSN is never quoted: it may hold a password.
		u, err := url.Parse(c.Store)
		if err != nil || u.Host == "" {
			return c.fieldErr("store", `a PostgreSQL store needs a URL with a host, e.g. "postgres://baton@db:5432/baton"`)
		}
		return nil
	}
	// Only the scheme is quoted: a DSN may hold a password.
	scheme, _, hasScheme := strings.Cut(c.Store, ":")
	if hasScheme {
		return c.fieldErr("store", `must be "memory:", "sqlite:<path>" or "postgres://…" (got %q)`, scheme+":…")
	}
	return c.fieldErr("store", `must be "memory:", "sqlite:<path>" or "postgres://…"`)
}

// StorePath returns the SQLite path of a "sqlite:<path>" store, or "" for "memory:".
func (c *Config) StorePath() string {
	p, ok := strings.CutPrefix(c.Store, "sqlite:")
	if !ok {
		return ""
	}
	return p
}

func isPublicURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && isHTTPURL(s) && u.RawQuery == "" && u.Fragment == "" && u.User == nil
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// ToolName is the tool name the model sees for a configured name (DESIGN §5); see
// package toolname, the one sanitiser shared with the catalog and the engine.
func ToolName(name string) string { return toolname.Sanitize(name) }

func (c *Config) validateA2AServer() error {
	if c.A2AServer.Enabled && strings.TrimSpace(c.A2AServer.Name) == "" {
		return c.fieldErr("a2a_server.name", "must not be empty when a2a_server.enabled is true")
	}
	return nil
}

func (c *Config) validateTelemetry() error {
	t := c.Telemetry
	switch t.OTLPProtocol {
	case "http/protobuf", "http/json", "grpc":
	default:
		return c.fieldErr("telemetry.otlp_protocol", "must be http/protobuf, http/json or grpc (got %q)", t.OTLPProtocol)
	}
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c.fieldErr("telemetry.otlp_endpoint", "must be an http:// or https:// URL")
		}
	}
	if strings.TrimSpace(t.ServiceName) == "" {
		return c.fieldErr("telemetry.service_name", "must not be empty")
	}
	return nil
}
