package config

import (
	"fmt"
	"path"
)

// validateSpend checks (a function, not a method: Config's methods are kept few) llm.context_window, llm.prices, llm.fallback and the budgets.
func validateSpend(c *Config) error {
	l := c.LLM
	if l.ContextWindow < 0 {
		return c.fieldErr("llm.context_window", "must not be negative (got %d); 0 means from the provider or a built-in table", l.ContextWindow)
	}
	if err := validatePrices(c, "llm.prices", l.Prices); err != nil {
		return err
	}
	for i, f := range l.Fallback {
		key := fmt.Sprintf("llm.fallback[%d]", i)
		switch f.Provider {
		case ProviderOpenAI, ProviderAnthropic, ProviderScripted:
		default:
			return c.fieldErr(key+".provider", "must be one of %s, %s, %s (got %q)", ProviderOpenAI, ProviderAnthropic, ProviderScripted, f.Provider)
		}
		switch {
		case f.BaseURL != "" && !isHTTPURL(f.BaseURL):
			return c.fieldErr(key+".base_url", "not an absolute http(s) URL")
		case f.Model == "" && f.Provider != ProviderScripted:
			return c.fieldErr(key+".model", "required for provider %s", f.Provider)
		case f.APIKeyEnv != "" && !isEnvName(f.APIKeyEnv):
			return c.fieldErr(key+".api_key_env", "must be the name of an environment variable, not the key itself")
		case f.ContextWindow < 0:
			return c.fieldErr(key+".context_window", "must not be negative (got %d)", f.ContextWindow)
		}
		if err := validatePrices(c, key+".prices", f.Prices); err != nil {
			return err
		}
	}
	b, pb := c.Policy.Budget, c.Policy.PrincipalBudget
	switch {
	case b.MaxCostUSD < 0:
		return c.fieldErr("policy.budget.max_cost_usd", "must not be negative (got %g); 0 means no limit", b.MaxCostUSD)
	case b.WarnAt < 0 || b.WarnAt >= 1:
		return c.fieldErr("policy.budget.warn_at", "must be a share from 0 (no warning) to below 1 (got %g)", b.WarnAt)
	case pb.DailyTokens < 0:
		return c.fieldErr("policy.principal_budget.daily_tokens", "must not be negative (got %d); 0 means no limit", pb.DailyTokens)
	case pb.DailyCostUSD < 0:
		return c.fieldErr("policy.principal_budget.daily_cost_usd", "must not be negative (got %g); 0 means no limit", pb.DailyCostUSD)
	case pb.WarnAt < 0 || pb.WarnAt >= 1:
		return c.fieldErr("policy.principal_budget.warn_at", "must be a share from 0 (no warning) to below 1 (got %g)", pb.WarnAt)
	}
	return nil
}

func validatePrices(c *Config, key string, p Prices) error {
	switch {
	case p.InputPerMTok < 0:
		return c.fieldErr(key+".input_per_mtok", "must not be negative (got %g)", p.InputPerMTok)
	case p.OutputPerMTok < 0:
		return c.fieldErr(key+".output_per_mtok", "must not be negative (got %g)", p.OutputPerMTok)
	}
	return nil
}

// validateHistory checks the history section.
func validateHistory(c *Config) error {
	h := c.History
	switch {
	case h.CompactAt <= 0 || h.CompactAt > 1:
		return c.fieldErr("history.compact_at", "must be a share of the context window above 0 and at most 1 (got %g)", h.CompactAt)
	case h.KeepRecentTurns < 0:
		return c.fieldErr("history.keep_recent_turns", "must not be negative (got %d)", h.KeepRecentTurns)
	case h.MaxToolResultBytes < 256:
		return c.fieldErr("history.max_tool_result_bytes", "must be at least 256 (got %d)", h.MaxToolResultBytes)
	}
	return nil
}

// validateMCPServe checks the mcp_server section.
func validateMCPServe(c *Config) error {
	m := c.MCPServe
	if m.Name == "" {
		return c.fieldErr("mcp_server.name", "must not be empty")
	}
	if m.TaskTTL <= 0 {
		return c.fieldErr("mcp_server.task_ttl", "must be positive (got %s)", m.TaskTTL)
	}
	for i, p := range m.Agents {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return c.fieldErr(fmt.Sprintf("mcp_server.agents[%d]", i), "not a name or * pattern (got %q)", p)
		}
	}
	if m.CoordinatorTool != "" {
		for _, a := range c.Agents {
			if a.Name == m.CoordinatorTool {
				return c.fieldErr("mcp_server.coordinator_tool", "%q is also an agent's name; choose another name for the coordinator tool", m.CoordinatorTool)
			}
		}
	}
	return nil
}

// MaxDepthOrDefault is server.max_depth as it applies.
func (s Server) MaxDepthOrDefault() int {
	if s.MaxDepth > 0 {
		return s.MaxDepth
	}
	return DefaultMaxDepth
}

// MaxFollowersPerPrincipalOrDefault is server.max_followers_per_principal as it applies.
func (s Server) MaxFollowersPerPrincipalOrDefault() int {
	if s.MaxFollowersPerPrincipal > 0 {
		return s.MaxFollowersPerPrincipal
	}
	return DefaultMaxFollowersPerPrincipal
}
