package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/baton-dev/baton/internal/principal"
)

// MCP paths (DESIGN §3): the streamable HTTP endpoint and its RFC 9728 metadata.
const (
	MCPPath         = "/mcp"
	MCPMetadataPath = "/.well-known/oauth-protected-resource/mcp"
)

// routeMCP mounts the MCP handler behind the same guards as /agui: the DNS-rebinding and
// CSRF checks (guard), the bearer token (401 with an RFC 6750 challenge that, with OIDC,
// names the protected-resource metadata, as the MCP authorization spec asks), the body cap
// and read deadline. With OIDC, the metadata is served at MCPMetadataPath (public, as
// discovery expects). A nil h mounts nothing.
func routeMCP(r chi.Router, h http.Handler, issuer string, auth *authn, maxBody int64) {
	if h == nil {
		return
	}
	r.Handle(MCPPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveMCP(w, r, h, issuer, auth, maxBody) }))
	if issuer != "" {
		meta := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
				Resource:               baseURL(r) + MCPPath,
				AuthorizationServers:   []string{issuer},
				BearerMethodsSupported: []string{"header"},
				ResourceName:           "Baton",
			}).ServeHTTP(w, r)
		})
		r.Method(http.MethodGet, MCPMetadataPath, meta)
		r.Method(http.MethodOptions, MCPMetadataPath, meta)
	}
}

// serveMCP authenticates a request to /mcp and hands it to h with its principal, its body
// read (bounded by mcpBodyLimit of maxBody).
func serveMCP(w http.ResponseWriter, r *http.Request, h http.Handler, issuer string, auth *authn, maxBody int64) {
	who, ok := auth.principal(r)
	if !ok {
		extra := ""
		if issuer != "" {
			extra = `resource_metadata="` + quoteSafe(baseURL(r)+MCPMetadataPath) + `"`
		}
		auth.unauthorizedWith(w, r, extra)
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// Read here, bounded, so that the body's read deadline (guard) is lifted before a
		// streamed answer starts. The bound leaves room for a prompt of max_body_bytes, so
		// that a larger prompt gets an MCP error from the tool rather than a 413.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpBodyLimit(maxBody)))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", "The request body is too large.")
				return
			}
			writeError(w, http.StatusBadRequest, "INVALID_INPUT", "The request body could not be read.")
			return
		}
		bodyRead(w)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h.ServeHTTP(w, r.WithContext(principal.With(r.Context(), who)))
}

// mcpBodyLimit is the body cap of /mcp: a prompt of max_body_bytes plus its JSON-RPC
// envelope (a prompt's escaping can at most double it, plus room for the rest).
func mcpBodyLimit(maxBody int64) int64 { return 2*maxBody + 64<<10 }

// MCPBodyLimit is the body cap that /mcp applies for a server.max_body_bytes, for the MCP
// handler's own cap (mcpserver.HTTPOptions).
func MCPBodyLimit(maxBody int64) int64 {
	if maxBody <= 0 {
		maxBody = 1 << 20
	}
	return mcpBodyLimit(maxBody)
}

// baseURL is the scheme and host a request was addressed to.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
