// Package signin signs Baton in to MCP servers (and A2A agents) on a principal's behalf with
// OAuth 2.1, as the MCP authorization specification (2025-11-25 and 2026-07-28) defines it:
// 401 with WWW-Authenticate, protected resource metadata (RFC 9728), authorization server
// metadata (RFC 8414, OpenID discovery), client identification (Client ID Metadata
// Document, pre-registration, dynamic registration), authorization code with PKCE and the
// resource parameter (RFC 8707), refresh and scope step-up; client_credentials for service
// accounts.
//
// Unlike go-sdk's AuthorizationCodeHandler, which keeps the PKCE verifier and state as locals
// of one blocking Authorize call, a [Handler] never blocks for the user: the first 401 writes
// a [Pending] sign-in to the [Store] and returns a [*NeedsSignIn] error carrying the
// authorization URL. The engine parks the call and raises an interrupt; the browser returns
// to Baton's callback, which calls [Complete] (on any replica, after any restart), and the
// parked call is retried with the stored grant.
//
// Usage:
//
//	h := signin.NewHandler(signin.HandlerConfig{Store: st, Principal: p, Server: "docs", ...})
//	transport := &mcp.StreamableClientTransport{Endpoint: url, OAuthHandler: h}
//	_, err := session.CallTool(ctx, params)
//	var ns *signin.NeedsSignIn
//	if errors.As(err, &ns) { /* park the call, interrupt with ns.URL */ }
//
// This package is a protocol package: it never imports the engine.
package signin
