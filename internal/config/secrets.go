package config

import (
	"net/url"
	"strings"
)

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
