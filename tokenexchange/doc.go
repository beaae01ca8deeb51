// Package tokenexchange obtains, per call, a token for a downstream agent or MCP server
// that carries the calling user's identity: the user's inbound OpenID Connect access token
// is exchanged at an authorization server for one with the peer's audience (RFC 8693).
//
// The request goes through golang.org/x/oauth2's clientcredentials package (client
// authentication, form encoding, error parsing) with the grant type overridden; no OAuth
// code of our own. Results are cached in memory per (principal, token endpoint, audience,
// scopes) until shortly before they expire, bounded, and never shared between principals.
// The subject tokens are read from a Subjects store (package tokenstore keeps them sealed),
// so that a parked run, or one another replica took over, can exchange again. See
// design/token-exchange.md.
package tokenexchange
