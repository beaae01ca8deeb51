package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/internal/seal"
)

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
