package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
	"github.com/baton-dev/baton/signin"
)

// oauthRegistry connects one mode-user server "sec" backed by the real signin.Handler.
func oauthRegistry(t *testing.T, srv *oauthmcp.Server, st signin.Store, opts Options) *Registry {
	t.Helper()
	const callback = "http://127.0.0.1:1/oauth/callback"
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	cfg := ServerConfig{Name: "sec", URL: srv.URL(), Auth: &Auth{
		PerPrincipal: true,
		Handler: func(principal string) auth.OAuthHandler {
			return signin.NewHandler(signin.HandlerConfig{Store: st, Principal: principal, Server: "sec",
				ServerURL: srv.URL(), RedirectURL: callback, ClientName: "baton-test", HTTPClient: hc})
		},
		HasGrant: func(ctx context.Context, principal string) bool {
			_, err := st.Grant(ctx, principal, "sec")
			return err == nil
		},
	}}
	r, err := New(context.Background(), []ServerConfig{cfg}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func toolNames(ts []Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// signIn follows a NeedsSignIn's URL as user and completes the sign-in as principal.
func signIn(t *testing.T, st signin.Store, err error, user, principal string) {
	t.Helper()
	var ns *signin.NeedsSignIn
	require.True(t, errors.As(err, &ns), "want NeedsSignIn, got %v", err)
	assert.Equal(t, "sec", ns.Server)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, ns.URL, nil)
	req.Header.Set("X-Test-User", user)
	resp, rerr := hc.Do(req)
	require.NoError(t, rerr)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc, perr := resp.Location()
	require.NoError(t, perr)
	q := loc.Query()
	assert.Equal(t, ns.State, q.Get("state"))
	_, cerr := signin.Complete(context.Background(), st, nil, q.Get("state"), q.Get("code"), q.Get("iss"), principal)
	require.NoError(t, cerr)
}

func text(t *testing.T, res Result) string {
	t.Helper()
	require.Equal(t, StatusOK, res.Status, "result: %+v", res)
	require.NotNil(t, res.Content)
	var parts []string
	for _, c := range res.Content.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestPerPrincipalSignIn(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{})
	defer srv.Close()
	st := signin.NewMemory()
	r := oauthRegistry(t, srv, st, Options{MaxUserSessions: 2})
	ctx := context.Background()

	// Nobody signed in: the catalog offers the sign-in tool only.
	assert.Equal(t, []string{"sec__sign_in"}, toolNames(r.Tools()))
	assert.True(t, r.Status()[0].Connected, "waiting for a sign-in is not down")

	// alice calls it: she must sign in; the error is NeedsSignIn, not a resend.
	_, err := r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	require.Error(t, err)
	// A second call before she signed in gets the same pending sign-in (one authorization URL).
	_, err2 := r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	var a, b *signin.NeedsSignIn
	require.True(t, errors.As(err, &a))
	require.True(t, errors.As(err2, &b))
	assert.Equal(t, a.URL, b.URL)
	assert.Equal(t, 0, srv.Stats().Authorizations, "nobody opened the URL yet")

	signIn(t, st, err, "alice-user", "alice")
	res, err := r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Contains(t, text(t, res), "Signed in to sec")
	assert.Contains(t, text(t, res), "whoami")
	assert.Equal(t, []string{"sec__whoami"}, toolNames(r.Tools()), "the first signed-in principal listed the tools")
	assert.True(t, r.Status()[0].Connected)

	res, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "user=alice-user", text(t, res))

	// bob has his own session and must sign in himself.
	_, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "bob"})
	signIn(t, st, err, "bob-user", "bob")
	res, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "bob"})
	require.NoError(t, err)
	assert.Equal(t, "user=bob-user", text(t, res))
	res, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "user=alice-user", text(t, res), "alice's session still carries her token")

	// A third principal evicts the least recently used session (bob's; MaxUserSessions 2);
	// bob's next call opens a new session with his stored grant.
	_, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "carol"})
	var ns *signin.NeedsSignIn
	require.True(t, errors.As(err, &ns))
	r.servers[0].users.mu.Lock()
	assert.Len(t, r.servers[0].users.byKey, 2)
	_, bobKept := r.servers[0].users.byKey["bob"]
	r.servers[0].users.mu.Unlock()
	assert.False(t, bobKept)
	res, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "bob"})
	require.NoError(t, err)
	assert.Equal(t, "user=bob-user", text(t, res))

	// alice signs in again as another user of the authorization server (a go-sdk server binds
	// a session to its first user): her calls run as the new user.
	require.NoError(t, st.DeleteGrant(ctx, "alice", "sec"))
	_, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	signIn(t, st, err, "alice-second", "alice")
	res, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "user=alice-second", text(t, res))

	// Revocation: the grant is deleted and the session closed; the next call asks again.
	require.NoError(t, st.DeleteGrant(ctx, "alice", "sec"))
	assert.True(t, r.Forget("alice", "sec"))
	assert.False(t, r.Forget("alice", "nope"))
	_, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.True(t, errors.As(err, &ns))
}

// TestPrepareListsForSignedInPrincipal: a new registry (a restart) lists the tools at a
// run's start for a principal with a stored grant, and not for one without.
func TestPrepareListsForSignedInPrincipal(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{})
	defer srv.Close()
	st := signin.NewMemory()
	ctx := context.Background()
	first := oauthRegistry(t, srv, st, Options{})
	_, err := first.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	signIn(t, st, err, "alice-user", "alice")
	require.NoError(t, first.Close())

	r := oauthRegistry(t, srv, st, Options{})
	before := srv.Stats().Authorizations
	r.Prepare(ctx, "bob")
	assert.Equal(t, []string{"sec__sign_in"}, toolNames(r.Tools()), "bob has no grant: nothing listed")
	assert.Equal(t, before, srv.Stats().Authorizations, "and no sign-in started")
	r.Prepare(ctx, "alice")
	assert.Equal(t, []string{"sec__whoami"}, toolNames(r.Tools()))
	res, err := r.Call(ctx, "sec__whoami", nil, CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "user=alice-user", text(t, res))
	// A call parked on the sign-in tool before the tools were listed still resolves.
	res, err = r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Contains(t, text(t, res), "Signed in to sec")
}

// TestExpiredTokenRefreshed: with 1 s access tokens, a call after expiry refreshes the
// token and completes without asking the user again. The principal is the anonymous one
// (""), as without bearer auth.
func TestExpiredTokenRefreshed(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{TokenTTL: time.Second})
	defer srv.Close()
	st := signin.NewMemory()
	r := oauthRegistry(t, srv, st, Options{})
	ctx := context.Background()
	_, err := r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: ""})
	signIn(t, st, err, "alice-user", "")
	_, err = r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: ""})
	require.NoError(t, err)
	// Past the access token's expiry (no timing is asserted, only the outcome).
	time.Sleep(1500 * time.Millisecond)
	res, err := r.Call(ctx, "sec__whoami", nil, CallOptions{Principal: ""})
	require.NoError(t, err)
	assert.Equal(t, "user=alice-user", text(t, res))
	assert.GreaterOrEqual(t, srv.Stats().Refreshes, 1)
	assert.Equal(t, 1, srv.Stats().Authorizations, "no second sign-in")
}

// TestPerPrincipalServerDown: a per-user server that cannot be reached is reported down
// once a principal's connection failed for another reason than sign-in.
func TestPerPrincipalServerDown(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{})
	srv.Close() // nothing listens there any more
	st := signin.NewMemory()
	r := oauthRegistry(t, srv, st, Options{MaxReconnects: 1, ReconnectBackoff: time.Millisecond})
	res, err := r.Call(context.Background(), "sec__sign_in", nil, CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Equal(t, StatusUnreachable, res.Status)
	st0 := r.Status()[0]
	assert.False(t, st0.Connected)
	assert.NotEmpty(t, st0.LastError)
}

// TestServiceAccount: a server in mode service has one session whose token comes from the
// client_credentials grant (signin.NewServiceHandler); every principal's call runs as the
// service.
func TestServiceAccount(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{})
	defer srv.Close()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	h := signin.NewServiceHandler(signin.ServiceConfig{Server: "svc", ServerURL: srv.URL(), ClientID: "baton",
		ClientSecret: oauthmcp.ServiceSecret, HTTPClient: hc})
	r, err := New(context.Background(), []ServerConfig{{Name: "svc", URL: srv.URL(),
		Auth: &Auth{Handler: func(string) auth.OAuthHandler { return h }}}}, Options{})
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{"svc__whoami"}, toolNames(r.Tools()), "listed at start, as the service")
	for _, p := range []string{"alice", "bob", ""} {
		res, err := r.Call(context.Background(), "svc__whoami", nil, CallOptions{Principal: p})
		require.NoError(t, err)
		assert.Equal(t, "user=service:baton", text(t, res))
	}
	assert.Equal(t, 0, srv.Stats().Authorizations, "no user signs in")
	assert.GreaterOrEqual(t, srv.Stats().ClientCredentials, 1)
}

// TestReSignInAsAnotherUserResends: a go-sdk server binds a session to the user of its
// first token and answers another user's token with 403. When a principal's grant goes away
// while their session stays open (revoked on another replica, or a refused refresh) and they
// sign in again as another user of the authorization server, the next call is refused on the
// old session; it is sent once more on a new session and runs as the new user.
func TestReSignInAsAnotherUserResends(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{})
	defer srv.Close()
	st := signin.NewMemory()
	r := oauthRegistry(t, srv, st, Options{})
	ctx := context.Background()

	_, err := r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	signIn(t, st, err, "alice-first", "alice")
	_, err = r.Call(ctx, "sec__sign_in", nil, CallOptions{Principal: "alice"})
	require.NoError(t, err)
	res, err := r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.NoError(t, err)
	require.Equal(t, "user=alice-first", text(t, res))
	child := r.servers[0].forPrincipal("alice")
	child.mu.Lock()
	first := child.sess
	child.mu.Unlock()
	require.NotNil(t, first, "alice has an open session")

	// The grant is deleted behind the registry's back (no Forget): the session stays open.
	require.NoError(t, st.DeleteGrant(ctx, "alice", "sec"))
	_, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.Error(t, err, "no grant: sign in again")
	child.mu.Lock()
	kept := child.sess
	child.mu.Unlock()
	require.Same(t, first, kept, "the 401 of a missing grant keeps the session")
	signIn(t, st, err, "alice-second", "alice")

	res, err = r.Call(ctx, "sec__whoami", json.RawMessage(`{}`), CallOptions{Principal: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "user=alice-second", text(t, res), "resent on a new session, as the new user")
	child.mu.Lock()
	second := child.sess
	child.mu.Unlock()
	assert.NotSame(t, first, second, "the refused session was replaced")
}

// refusingHandler is an OAuth handler whose tokens cannot be obtained (a refused token
// exchange): every token read fails with an AuthRequiredError.
type refusingHandler struct{ reads *int }

func (h refusingHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return refusingSource(h), nil
}

func (refusingHandler) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return signin.ErrForbidden
}

type refusingSource refusingHandler

func (s refusingSource) Token() (*oauth2.Token, error) {
	*s.reads++
	return nil, &AuthRequiredError{Reason: "the identity provider refused (invalid_target)"}
}

// TestAuthRequiredNotSent: when the user's credentials for a server cannot be obtained,
// the call ends StatusAuthRequired with the handler's reason, and nothing reaches the
// server (not even unauthenticated).
func TestAuthRequiredNotSent(t *testing.T) {
	srv := oauthmcp.New(oauthmcp.Config{})
	defer srv.Close()
	reads := 0
	r, err := New(context.Background(), []ServerConfig{{Name: "sec", URL: srv.URL(), Auth: &Auth{
		PerPrincipal: true,
		Handler:      func(string) auth.OAuthHandler { return refusingHandler{reads: &reads} },
	}}}, Options{MaxReconnects: 1, ReconnectBackoff: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	res, err := r.Call(context.Background(), "sec__sign_in", nil, CallOptions{Principal: "mallory"})
	require.NoError(t, err)
	assert.Equal(t, StatusAuthRequired, res.Status, "result: %+v", res)
	assert.Equal(t, "the identity provider refused (invalid_target)", res.Message)
	assert.Positive(t, reads, "the handler was asked for the token")
	assert.Zero(t, srv.Stats().Unauthorized, "no request reached the server without the user's token")
}
