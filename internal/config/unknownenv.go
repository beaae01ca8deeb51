package config

import (
	"sort"
	"strings"

	"github.com/baton-dev/baton/internal/editdist"
)

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
