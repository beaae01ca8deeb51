package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/baton-dev/baton/internal/config"
)

// Defaults of the request guards.
const (
	// DefaultBodyReadTimeout bounds the time a client may take to send a request body, so
	// that trickling bodies cannot hold connections and goroutines indefinitely.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultMaxActiveRuns caps concurrent runs (server.max_active_runs).
	DefaultMaxActiveRuns = config.DefaultMaxActiveRuns
	// ReadHeaderTimeout bounds the time to read a request's headers; for http.Server.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes keep-alive connections that carry no request for this long; for
	// http.Server.
	IdleTimeout = 30 * time.Second
	// retryAfterBusy is the Retry-After, in seconds, sent when max_active_runs is reached.
	retryAfterBusy = "5"
	// retryAfterStore is the Retry-After, in seconds, of 503 STORE_UNAVAILABLE.
	retryAfterStore = "2"
)

// IsLoopbackListen reports whether a listen address (host:port) binds only a loopback
// interface. Such a listener gets the DNS-rebinding guard of DESIGN §3.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a Host header names the loopback interface: localhost,
// 127.0.0.1 or [::1], with or without a port. Other names that happen to resolve to
// 127.0.0.1 are exactly what a DNS-rebinding page uses, so they are refused.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// guard applies the checks that do not depend on the route: the DNS-rebinding guard of a
// loopback listener, the body read timeout, and, without auth, the CSRF checks on POST
// (Content-Type and Origin). Each refusal is a JSON error and changes nothing.
type guard struct {
	auth            *authn
	loopback        bool
	origins         map[string]struct{} // normalised (normOrigin) server.allowed_origins
	bodyReadTimeout time.Duration
}

// newGuard builds the guard of a listener at listenAddr; allowed are the Origins, besides
// a request's own, that may POST when auth is off.
func newGuard(auth *authn, listenAddr string, allowed []string, bodyReadTimeout time.Duration) *guard {
	g := &guard{auth: auth, loopback: IsLoopbackListen(listenAddr), origins: map[string]struct{}{}, bodyReadTimeout: bodyReadTimeout}
	for _, o := range allowed {
		if n, ok := normOrigin(o); ok {
			g.origins[n] = struct{}{}
		}
	}
	return g
}

// wrap is the guard as middleware in front of every route.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.loopback && !loopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, "FORBIDDEN_HOST", "This server only answers requests addressed to localhost, 127.0.0.1 or [::1].")
			return
		}
		if r.Method == http.MethodPost && !g.auth.on() {
			// A body-less POST of the A2A HTTP+JSON binding (CancelTask, SubscribeToTask)
			// has no Content-Type; the Origin check below still refuses a cross-site one.
			if !jsonContentType(r) && !bodylessA2A(r) {
				writeError(w, http.StatusForbidden, "FORBIDDEN", "A POST must have Content-Type: application/json.")
				return
			}
			if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o, r) {
				writeError(w, http.StatusForbidden, "FORBIDDEN_ORIGIN", "Requests from this origin are not allowed.")
				return
			}
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			// A per-request deadline rather than http.Server.ReadTimeout, so that it only
			// applies to requests with a body; it is lifted once the body is read.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.bodyReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// bodylessA2A reports a POST without a body to the A2A routes.
func bodylessA2A(r *http.Request) bool {
	return r.ContentLength == 0 && strings.HasPrefix(r.URL.Path, A2APath+"/")
}

// bodyRead lifts the body read deadline set by guard once the handler has read the body.
// net/http also lifts it when it starts the background read that notices a client going
// away (after the body's EOF); lifting it here keeps a long stream safe even when the body
// was not read to EOF.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// jsonContentType reports whether the request body is declared as JSON. A browser cannot
// send that cross-origin without a CORS preflight, which Baton never grants.
func jsonContentType(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// originAllowed reports whether an Origin may POST: the request's own origin (same host and
// port as its Host header) or one listed in server.allowed_origins.
func (g *guard) originAllowed(origin string, r *http.Request) bool {
	o, ok := normOrigin(origin)
	if !ok {
		return false // "null" and other opaque origins
	}
	if _, ok := g.origins[o]; ok {
		return true
	}
	u, _ := url.Parse(o)
	return strings.EqualFold(u.Host, withDefaultPort(r.Host, u.Scheme))
}

// normOrigin returns an origin as scheme://host:port in lower case, with the scheme's
// default port made explicit, or false when it is not an http(s) origin.
func normOrigin(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	return scheme + "://" + strings.ToLower(withDefaultPort(u.Host, scheme)), true
}

// withDefaultPort adds the scheme's default port to a host that has none.
func withDefaultPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}
