package tokenexchange

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// as is a minimal RFC 8693 authorization server: it checks the client, the grant type and
// the subject token type, refuses the subject "mallory" (invalid_target) and issues
// "<audience>:<subject>:<n>" valid for ttl.
type as struct {
	*httptest.Server
	requests atomic.Int64
	ttl      atomic.Int64 // seconds
	last     atomic.Value // url.Values of the last request, for inspection
}

func newAS(t testing.TB) *as {
	a := &as{}
	a.ttl.Store(120)
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := a.requests.Add(1)
		_ = r.ParseForm()
		a.last.Store(r.PostForm)
		w.Header().Set("Content-Type", "application/json")
		fail := func(code string) {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "no"})
		}
		id, secret, ok := r.BasicAuth()
		switch {
		case !ok || id != "baton" || secret != "baton-secret":
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
		case r.PostForm.Get("grant_type") != GrantType || r.PostForm.Get("subject_token_type") != TokenTypeJWT:
			fail("invalid_request")
		case r.PostForm.Get("subject_token") == "mallory":
			fail("invalid_target")
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{
				"access_token":      r.PostForm.Get("audience") + ":" + r.PostForm.Get("subject_token") + ":" + itoa(n),
				"issued_token_type": TokenTypeAccessToken, "token_type": "Bearer", "expires_in": a.ttl.Load(),
			})
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func itoa(n int64) string { return string(rune('0' + n%10)) }

// subjects maps principals to their subject tokens.
type subjects struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *subjects) Subject(_ context.Context, p string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[p]; ok {
		return v, nil
	}
	return "", ErrNoSubject
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestToken(t *testing.T) {
	a := newAS(t)
	ck := &clock{t: time.Now()}
	var logs bytes.Buffer
	x := New(Config{Subjects: &subjects{m: map[string]string{"p-alice": "alice", "p-bob": "bob", "p-mallory": "mallory"}},
		Now: ck.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	tools := &Target{Name: "tools", TokenURL: a.URL, Audience: "tools", Scopes: []string{"b", "a"}, ClientID: "baton", ClientSecret: "baton-secret"}
	ctx := context.Background()

	tok, err := x.Token(ctx, "p-alice", tools)
	require.NoError(t, err)
	assert.Equal(t, "tools:alice:1", tok)
	form := a.last.Load().(interface{ Get(string) string })
	assert.Equal(t, "b a", form.Get("scope"))
	assert.Equal(t, TokenTypeAccessToken, form.Get("requested_token_type"))
	assert.Equal(t, TokenTypeJWT, form.Get("subject_token_type"), "the inbound token is sent as a JWT")

	// The cache answers the second call; another principal gets their own token.
	tok, err = x.Token(ctx, "p-alice", tools)
	require.NoError(t, err)
	assert.Equal(t, "tools:alice:1", tok)
	assert.EqualValues(t, 1, a.requests.Load())
	tok, err = x.Token(ctx, "p-bob", tools)
	require.NoError(t, err)
	assert.Equal(t, "tools:bob:2", tok)
	// Another audience is another token.
	agent := *tools
	agent.Audience = "agent"
	tok, err = x.Token(ctx, "p-alice", &agent)
	require.NoError(t, err)
	assert.Equal(t, "agent:alice:3", tok)

	// Near expiry (inside the 30 s margin) the token is exchanged again.
	ck.Add(89 * time.Second)
	tok, _ = x.Token(ctx, "p-alice", tools)
	assert.Equal(t, "tools:alice:1", tok, "still 31 s to go")
	ck.Add(2 * time.Second)
	tok, err = x.Token(ctx, "p-alice", tools)
	require.NoError(t, err)
	assert.Equal(t, "tools:alice:4", tok)

	// Refused, no subject, anonymous: typed errors, nothing cached.
	_, err = x.Token(ctx, "p-mallory", tools)
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, Reason(err), "(invalid_target)")
	_, err = x.Token(ctx, "p-mallory", tools)
	require.ErrorIs(t, err, ErrRefused)
	assert.EqualValues(t, 6, a.requests.Load(), "a refusal is not cached, and sent once (no auth-style retry)")
	_, err = x.Token(ctx, "p-carol", tools)
	require.ErrorIs(t, err, ErrNoSubject)
	_, err = x.Token(ctx, "", tools)
	require.ErrorIs(t, err, ErrNoSubject)
	assert.Contains(t, Reason(err), "sign in again")

	bad := *tools
	bad.ClientSecret = "wrong"
	_, err = x.Token(ctx, "p-bob", &bad)
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "invalid_client")

	a.Close()
	gone := *tools
	gone.Audience = "gone"
	_, err = x.Token(ctx, "p-alice", &gone)
	require.ErrorIs(t, err, ErrUnavailable)

	assert.NotContains(t, logs.String(), "alice:", "no token in the logs")
	assert.Equal(t, 2, x.Len(), "alice's two tokens; bob's expired one was dropped when read")
	x.Forget("p-alice")
	assert.Equal(t, 0, x.Len())
}

// TestCacheBounded: beyond MaxEntries the least recently used token is dropped.
func TestCacheBounded(t *testing.T) {
	a := newAS(t)
	x := New(Config{Subjects: &subjects{m: map[string]string{"1": "one", "2": "two", "3": "three"}}, MaxEntries: 2})
	tg := &Target{TokenURL: a.URL, Audience: "tools", ClientID: "baton", ClientSecret: "baton-secret"}
	ctx := context.Background()
	for _, p := range []string{"1", "2", "1", "3"} {
		_, err := x.Token(ctx, p, tg)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, x.Len())
	assert.EqualValues(t, 3, a.requests.Load())
	_, _ = x.Token(ctx, "1", tg) // still cached: used more recently than 2
	assert.EqualValues(t, 3, a.requests.Load())
	_, _ = x.Token(ctx, "2", tg) // evicted
	assert.EqualValues(t, 4, a.requests.Load())
}

// TestShortLivedNotServedStale: a token living less than twice the margin is cached for
// half its life only.
func TestShortLivedNotServedStale(t *testing.T) {
	a := newAS(t)
	a.ttl.Store(10)
	ck := &clock{t: time.Now()}
	x := New(Config{Subjects: &subjects{m: map[string]string{"p": "s"}}, Now: ck.Now})
	tg := &Target{TokenURL: a.URL, Audience: "tools", ClientID: "baton", ClientSecret: "baton-secret"}
	ctx := context.Background()
	_, err := x.Token(ctx, "p", tg)
	require.NoError(t, err)
	ck.Add(4 * time.Second)
	_, _ = x.Token(ctx, "p", tg)
	assert.EqualValues(t, 1, a.requests.Load())
	ck.Add(2 * time.Second)
	_, _ = x.Token(ctx, "p", tg)
	assert.EqualValues(t, 2, a.requests.Load())
}

type writer struct {
	mu     sync.Mutex
	writes int
	fail   bool
}

func (w *writer) PutSubject(context.Context, string, string, time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if w.fail {
		return assert.AnError
	}
	return nil
}

func TestRecorder(t *testing.T) {
	w := &writer{}
	r := NewRecorder(w, 2, nil)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	r.Record(ctx, "a", "t1", exp)
	r.Record(ctx, "a", "t1", exp)
	assert.Equal(t, 1, w.writes, "the same token is written once")
	r.Record(ctx, "a", "t2", exp)
	assert.Equal(t, 2, w.writes)
	r.Record(ctx, "b", "t1", exp)
	r.Record(ctx, "c", "t1", exp) // over the bound: the memory is cleared
	r.Record(ctx, "a", "t2", exp)
	assert.Equal(t, 5, w.writes)
	w.fail = true
	r.Record(ctx, "d", "t", exp)
	w.fail = false
	r.Record(ctx, "d", "t", exp)
	assert.Equal(t, 7, w.writes, "a failed write is tried again")
}

// TestRedirectNotFollowed: a token endpoint that answers with a redirect does not get the
// request re-sent (body with the subject token, header with the client secret) anywhere;
// the exchange fails with ErrRedirected and a reason that says so.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	var subjectSeen atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_ = r.ParseForm()
		if r.PostForm.Get("subject_token") != "" {
			subjectSeen.Store(true)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "stolen", "token_type": "Bearer", "expires_in": 60})
	}))
	t.Cleanup(other.Close)
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		var first atomic.Int64
		ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			first.Add(1)
			http.Redirect(w, r, other.URL+"/token", code)
		}))
		peerClient := &http.Client{}
		x := New(Config{Subjects: &subjects{m: map[string]string{"p": "alice-jwt"}}})
		tg := &Target{Name: "tools", TokenURL: ep.URL, Audience: "tools", ClientID: "baton", ClientSecret: "baton-secret", HTTPClient: peerClient}
		_, err := x.Token(context.Background(), "p", tg)
		ep.Close()
		require.ErrorIs(t, err, ErrRedirected, "status %d", code)
		require.ErrorIs(t, err, ErrExchange)
		assert.Contains(t, Reason(err), "redirect", "status %d", code)
		assert.NotContains(t, err.Error()+Reason(err), "alice-jwt")
		assert.EqualValues(t, 1, first.Load(), "status %d: sent once", code)
		assert.Nil(t, peerClient.CheckRedirect, "the peer's own client is not changed")
		assert.Equal(t, 0, x.Len(), "nothing cached")
	}
	assert.EqualValues(t, 0, elsewhere.Load(), "the redirect target received no request")
	assert.False(t, subjectSeen.Load(), "subject_token never re-sent")
}
