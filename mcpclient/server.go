package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// connectTimeout bounds one connection attempt (handshake and tool list).
	connectTimeout = 30 * time.Second
	// terminateAfter is how long a stdio server gets to exit after its stdin
	// is closed, before SIGTERM (and later SIGKILL).
	terminateAfter = 2 * time.Second
	// maxLazyPause caps the pause between background reconnections.
	maxLazyPause = 30 * time.Second
)

// inheritedEnv are the variables a stdio server inherits from Baton (the
// same set the MCP TypeScript SDK passes by default, plus TMPDIR and locale).
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "TMPDIR", "LANG", "LC_ALL"}

// server is one configured MCP server and its current session.
type server struct {
	r      *Registry
	cfg    ServerConfig
	client *mcp.Client
	log    *slog.Logger

	mu         sync.Mutex
	sess       *mcp.ClientSession
	dead       chan struct{} // closed (by a watcher) when sess has ended
	broken     bool          // a call saw sess fail
	connecting chan struct{} // non-nil while a connection attempt runs; closed after it
	lastErr    error
	lazyFails  int       // consecutive failed attempts, for the background pause
	nextLazy   time.Time // no background attempt before this
	inflight   map[*call]struct{}

	// entries are the server's tools (templates without catalog names),
	// guarded by r.mu.
	entries []*entry

	// principal is whose session this is, for a server with Auth.PerPrincipal
	// (users.go); parent is then the configured server, which holds the
	// catalog and the principals' sessions (users).
	principal string
	parent    *server
	oauth     auth.OAuthHandler
	users     *userSessions

	// taskTools are the tools the server declares as needing MCP tasks (tasksupport.go);
	// taskLogged, guarded by mu, those already logged as left out.
	taskTools  taskTools
	taskLogged map[string]bool
}

// newServer makes a configured server (child false), or the session of one principal of
// a PerPrincipal server (child true; principal may be "", the anonymous principal).
func newServer(r *Registry, cfg ServerConfig, principal string, child bool) *server {
	s := &server{
		r:         r,
		cfg:       cfg,
		log:       r.log.With("mcp_server", cfg.Name),
		inflight:  map[*call]struct{}{},
		principal: principal,
	}
	if a := cfg.Auth; a != nil {
		if a.PerPrincipal && !child {
			s.users = newUserSessions()
		} else {
			s.oauth = a.Handler(principal)
		}
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "baton", Version: "0.1.0"}, &mcp.ClientOptions{
		Logger:             s.log,
		ElicitationHandler: s.handleElicit,
		Capabilities: &mcp.ClientCapabilities{
			Elicitation: &mcp.ElicitationCapabilities{
				Form: &mcp.FormElicitationCapabilities{},
				URL:  &mcp.URLElicitationCapabilities{},
			},
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			p := req.Params
			r.progress.deliver(p.ProgressToken, Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.refresh()
		},
		// Input requests come back to Call, which owns the retry (see the
		// package doc): the answer may come from a user, much later.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	if mw := r.opts.SendingMiddleware; mw != nil {
		transport := "tcp"
		if len(cfg.Command) > 0 {
			transport = "pipe"
		}
		s.client.AddSendingMiddleware(mw(cfg.Name, transport))
	}
	return s
}

// alive reports whether the current session is usable. s.mu must be held.
func (s *server) alive() bool {
	if s.sess == nil || s.broken {
		return false
	}
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

// session returns a live session, connecting (once) if there is none. When
// another goroutine is connecting, it waits for that attempt and shares its
// outcome.
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	if s.perUser() {
		return nil, errNoPrincipal
	}
	s.mu.Lock()
	if s.r.closed.Load() {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.alive() {
		sess := s.sess
		s.mu.Unlock()
		return sess, nil
	}
	if ch := s.connecting; ch != nil {
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.alive() {
			return s.sess, nil
		}
		if s.lastErr != nil {
			return nil, s.lastErr
		}
		return nil, errors.New("not connected")
	}
	ch := make(chan struct{})
	s.connecting = ch
	old := s.sess
	s.sess = nil
	s.mu.Unlock()

	if old != nil {
		// Reap the ended session (for stdio: wait for the process).
		_ = old.Close()
	}
	sess, tools, err := s.connect(ctx)

	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(ch)
	s.connecting = nil
	if err == nil && s.r.closed.Load() {
		_ = sess.Close()
		err = ErrClosed
	}
	if err != nil {
		s.lastErr = err
		s.lazyFails++
		s.nextLazy = time.Now().Add(min(s.r.backoff(s.lazyFails), maxLazyPause))
		return nil, err
	}
	dead := make(chan struct{})
	s.sess, s.dead, s.broken, s.lastErr, s.lazyFails = sess, dead, false, nil, 0
	s.r.goTracked(func() {
		_ = sess.Wait()
		close(dead)
	})
	s.r.setTools(s.catalogServer(), tools)
	s.log.Info("mcp server connected", "protocol", sess.InitializeResult().ProtocolVersion, "tools", len(tools))
	return sess, nil
}

// connect opens a session and lists the tools.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, []*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var t mcp.Transport
	var stderr *lineLogger
	if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Env = s.env()
		stderr = &lineLogger{log: s.log}
		cmd.Stderr = stderr
		t = &taskSupportTransport{Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateAfter}, seen: &s.taskTools}
	} else {
		hc := sameOriginClient(s.r.opts.HTTPClient, s.cfg.URL, s.cfg.Headers)
		if w, ok := s.oauth.(interface {
			Transport(http.RoundTripper) http.RoundTripper
		}); ok {
			// A handler that must shape each request (DPoP proofs) wraps the transport.
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			hc.Transport = w.Transport(base)
		}
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc.Transport = &taskSupportRoundTripper{base: base, seen: &s.taskTools}
		t = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, OAuthHandler: s.oauth}
	}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		if stderr != nil {
			// The cause (a missing package, a bad flag) is on the child's stderr, not in
			// the transport's error ("EOF").
			if head := stderr.head(); len(head) > 0 {
				s.log.Warn("mcp server failed to start; its first stderr lines follow", "error", err, "stderr", head)
			}
		}
		return nil, nil, s.safe(fmt.Errorf("connecting to MCP server %q: %w", s.cfg.Name, err))
	}
	var tools []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			_ = sess.Close()
			return nil, nil, s.safe(fmt.Errorf("listing tools of MCP server %q: %w", s.cfg.Name, err))
		}
		tools = append(tools, t)
	}
	return sess, s.withoutTaskTools(tools), nil
}

// drop forgets sess after a transport failure, unless it was replaced
// already. The next session call reconnects (and reaps sess).
func (s *server) drop(sess *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == sess {
		// Keep s.sess so that session() closes it, but mark it unusable.
		s.broken = true
	}
}

// kick starts a background connection when the server is down and its
// pause has passed.
func (s *server) kick() {
	if s.perUser() {
		return // nothing to connect without a principal
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alive() || s.connecting != nil || time.Now().Before(s.nextLazy) {
		return
	}
	s.nextLazy = time.Now().Add(maxLazyPause) // at most one attempt in flight
	s.r.goTracked(func() {
		if _, err := s.session(s.r.bgCtx); err != nil {
			s.log.Debug("mcp server still down", "error", err)
		}
	})
}

// refresh lists the tools again in the background (the server said they
// changed, or named a tool unknown).
func (s *server) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.alive() {
		return
	}
	sess := s.sess
	s.r.goTracked(func() {
		ctx, cancel := context.WithTimeout(s.r.bgCtx, connectTimeout)
		defer cancel()
		var tools []*mcp.Tool
		for t, err := range sess.Tools(ctx, nil) {
			if err != nil {
				s.log.Debug("mcp tool list refresh failed", "error", err)
				return
			}
			tools = append(tools, t)
		}
		s.r.setTools(s.catalogServer(), s.withoutTaskTools(tools))
	})
}

// close ends the session (stopping a stdio server), and every principal's.
func (s *server) close() error {
	if s.users != nil {
		s.users.closeAll()
	}
	s.mu.Lock()
	sess := s.sess
	s.sess = nil
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	// Errors are only logged: a stdio server that already died or exits
	// non-zero on EOF, or an HTTP server that is gone (the closing DELETE
	// fails), is closed all the same.
	if err := sess.Close(); err != nil {
		s.log.Debug("mcp session closed with an error", "error", err)
	}
	return nil
}

// begin and end track the calls in flight, to attribute in-session
// elicitation requests.
func (s *server) begin(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[c] = struct{}{}
}

func (s *server) end(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, c)
}

// soleCall returns the only call in flight, or nil.
func (s *server) soleCall() *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A call already blocked in the Elicitor (its user has not answered yet) is not the
	// one asking again: among the others, exactly one must remain.
	var found *call
	for c := range s.inflight {
		if c.isEliciting() {
			continue
		}
		if found != nil {
			return nil
		}
		found = c
	}
	return found
}

// handleElicit answers elicitation/create requests (2025-11-25 sessions).
// go-sdk then checks an accepted form answer against the schema and fills in
// its defaults (only when Content is not nil, hence the empty map).
func (s *server) handleElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c := s.soleCall()
	res, err := s.r.ask.elicit(ctx, s.cfg.Name, c, req.Params, ShapeSession)
	if err != nil {
		if c != nil {
			// Call returns the Elicitor's error, as in the other shape.
			c.setElicitErr(err)
		}
		return nil, err
	}
	return res, nil
}

func (s *server) env() []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.cfg.Env[k])
	}
	return env
}

// errCrossOriginRedirect is returned when an MCP server redirects to another origin.
var errCrossOriginRedirect = errors.New("the MCP server redirected to another origin, which is not followed")

// sameOriginClient returns a copy of base for one MCP server at endpoint: redirects are
// followed only within the endpoint's origin (scheme, host and port), and the configured
// headers, which may hold secrets, are added only to requests for that origin. A server
// that redirects elsewhere fails the request instead of receiving the user's data or the
// credentials meant for it.
func sameOriginClient(base *http.Client, endpoint string, headers map[string]string) *http.Client {
	c := *base
	origin := originOf(endpoint)
	inner := base.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if originOf(req.URL.String()) != origin {
			return errCrossOriginRedirect
		}
		if inner != nil {
			return inner(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	if len(headers) > 0 {
		c.Transport = &headerTransport{base: base.Transport, headers: headers, origin: origin}
	}
	return &c
}

// originOf returns scheme://host:port of a URL in lower case, with the default port made
// explicit, or "" when it does not parse.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// headerTransport adds the configured headers to every request for the server's own
// origin, and to no other. The values may be secrets: they are never logged.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	origin  string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.origin != "" && originOf(req.URL.String()) == t.origin {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// lineLogger logs a stdio server's stderr, line by line, at debug level, and keeps its
// first lines for the warning logged when the server fails to start.
type lineLogger struct {
	log *slog.Logger
	buf []byte

	mu    sync.Mutex
	first []string
}

const (
	maxStderrLine = 2048
	// maxStderrHead is how many first lines of stderr a start-up failure reports.
	maxStderrHead = 10
	// maxStderrHeadLine caps each of those lines.
	maxStderrHeadLine = 300
)

// head returns the first lines written so far.
func (l *lineLogger) head() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.first)
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxStderrLine {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func (l *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	if len(line) > 0 {
		l.log.Debug("mcp server stderr", "line", string(line))
		l.mu.Lock()
		if len(l.first) < maxStderrHead {
			l.first = append(l.first, strings.ToValidUTF8(string(line[:min(len(line), maxStderrHeadLine)]), "?"))
		}
		l.mu.Unlock()
	}
}

// safe hides the query and user info of the server's URL (they may hold
// credentials) in err's message; errors.Is and errors.As still see err.
func (s *server) safe(err error) error {
	if err == nil || s.cfg.URL == "" {
		return err
	}
	u, perr := url.Parse(s.cfg.URL)
	if perr != nil || (u.RawQuery == "" && u.User == nil) {
		return err
	}
	clean := *u
	clean.RawQuery, clean.User = "", nil
	msg := strings.ReplaceAll(err.Error(), s.cfg.URL, clean.String())
	if u.User != nil {
		msg = strings.ReplaceAll(msg, u.User.String()+"@", "")
	}
	if u.RawQuery != "" {
		msg = strings.ReplaceAll(msg, u.RawQuery, "<redacted>")
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
