package config

import (
	"fmt"
)

// UsesExchange reports whether any agent or MCP server of c is called with the user's
// exchanged token (auth mode exchange). A function, not a method: Config's method set is
// kept small.
func UsesExchange(c *Config) bool {
	for _, a := range c.Agents {
		if a.Auth.Mode == AuthExchange {
			return true
		}
	}
	for _, m := range c.MCPServers {
		if m.Auth.Mode == AuthExchange {
			return true
		}
	}
	return false
}

// exchangeAuth is the part of an auth block that mode exchange reads.
type exchangeAuth struct {
	tokenURL, audience, clientID, clientSecretEnv string
	scopes                                        []string
}

// validateExchange checks an auth block in mode exchange (RFC 8693) of a peer at peerURL
// (key is its auth key, such as agents[0].auth). The user's identity comes from
// server.oidc, the subject tokens are kept sealed with server.secrets_key_env, and every
// URL that carries a token must be https (http only on loopback).
func validateExchange(c *Config, key, peerURL string, headers map[string]string, a exchangeAuth) error {
	switch {
	case c.Server.OIDC == nil:
		return c.fieldErr(key+".mode", "%s exchanges the user's OpenID Connect token: it needs server.oidc (users signed in with an identity provider)", AuthExchange)
	case c.Server.SecretsKeyEnv == "":
		return c.fieldErr("server.secrets_key_env", "required with auth mode %s: the users' tokens are kept encrypted with this key so that parked and taken-over runs can exchange them (32 random bytes, base64; e.g. openssl rand -base64 32)", AuthExchange)
	case peerURL == "":
		return c.fieldErr(key+".mode", "%s needs a peer reached over HTTP (url); a stdio server gets its credentials through env", AuthExchange)
	case !oauthURL(peerURL):
		return c.fieldErr(key+".mode", "%s sends the user's token to the peer: its url must be https, or http only on a loopback host (got %s)", AuthExchange, redactURL(peerURL))
	case hasHeader(headers, "Authorization"):
		return c.fieldErr(key+".mode", "%s sets the Authorization header itself; remove it from headers", AuthExchange)
	case a.tokenURL == "":
		return c.fieldErr(key+".token_url", "required with mode %s: the authorization server's token endpoint, such as https://idp.example.com/token", AuthExchange)
	case !oauthURL(a.tokenURL):
		return c.fieldErr(key+".token_url", "must be an https URL (http only on a loopback host) (got %s)", redactURL(a.tokenURL))
	case a.audience == "":
		return c.fieldErr(key+".audience", "required with mode %s: the audience the peer's tokens must carry", AuthExchange)
	case a.clientID == "" || a.clientSecretEnv == "":
		return c.fieldErr(key, "mode %s needs client_id and client_secret_env (Baton authenticates itself to the authorization server)", AuthExchange)
	case !isEnvName(a.clientSecretEnv):
		return c.fieldErr(key+".client_secret_env", "must be the name of an environment variable, not the secret itself")
	}
	for i, sc := range a.scopes {
		if !isScopeToken(sc) {
			return c.fieldErr(fmt.Sprintf("%s.scopes[%d]", key, i), "not an OAuth scope token (printable ASCII without spaces, quotes or backslashes; got %q)", sc)
		}
	}
	return nil
}
