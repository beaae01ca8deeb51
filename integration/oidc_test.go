package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// idp is a running oidc-provider (integration/peers/idp.mjs).
type idp struct {
	issuer string
	proc   *proc
}

// startIDP starts panva's oidc-provider with the test clients and resources.
func startIDP(t *testing.T, env ...string) *idp {
	t.Helper()
	node := requireNode22(t)
	script := filepath.Join(requirePeers(t), "idp.mjs")
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var p *proc
		p, err = startProcErr(t, "idp", []string{node, script},
			append([]string{"PORT=" + strconv.Itoa(freePort(t))}, env...), readyOnLine(`issuer (http://\S+)`))
		if err == nil {
			t.Cleanup(func() { p.Stop() })
			return &idp{issuer: p.Match[1], proc: p}
		}
	}
	t.Fatalf("starting oidc-provider: %v", err)
	return nil
}

// token gets a signed JWT access token for user (a client_credentials client whose sub is
// its name) for resource.
func (p *idp) token(t *testing.T, user, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {"runs:read runs:write"}}
	if resource == "urn:other" {
		form.Set("scope", "runs:read")
	}
	req, err := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(user, user+"-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.Unmarshal(b, &tr))
	require.Equal(t, 2, strings.Count(tr.AccessToken, "."), "a JWT access token")
	return tr.AccessToken
}

// rotate puts a new signing key first at the provider (the previous one stays published).
func (p *idp) rotate(t *testing.T) {
	t.Helper()
	resp, err := http.Post(p.issuer+"/test/rotate", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// claims decodes a JWT's payload (test inspection only; Baton verifies with go-oidc).
func claims(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	require.Len(t, parts, 3)
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

// authGet does GET path with a bearer token and returns the status, WWW-Authenticate and body.
func authGet(t *testing.T, base, path, token string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

func oidcCoordinatorConfig(llmURL, issuer string) string {
	return fmt.Sprintf(`server:
  auth_tokens_env: OIDC_STATIC_TOKENS
  oidc:
    issuer: %q
    audience: baton
    allowed_algs: [ES256]
    clock_skew: 1s
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
store: "memory:"
`, issuer, llmURL, llmKeyEnv)
}

// TestOIDCUsers: Baton accepts oidc-provider's access tokens beside a static token and
// refuses, with an RFC 6750 header saying why, a token for another audience, one from
// another issuer, an unsigned one, an expired one and one signed by a key the provider
// rotated out; a rotation is picked up without a restart; two users see only their own
// threads; no token reaches the logs.
func TestOIDCUsers(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	other := startIDP(t) // another issuer, same audience names
	llm := fakellm.Start(func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "hello there"} })
	t.Cleanup(llm.Close)
	base, coord := startSecCoordinator(t, oidcCoordinatorConfig(llm.URL, p.issuer),
		[]string{llmKeyEnv + "=fake-key", "OIDC_STATIC_TOKENS=static-token-1"}, "text")

	alice, bob := p.token(t, "alice", "urn:baton"), p.token(t, "bob", "urn:baton")
	assert.Equal(t, "alice", claims(t, alice)["sub"])

	// Each user runs a chat on a thread of their own.
	run := func(token, thread string) {
		st, b := secPost(t, base, "/agui", mustJSON(t, runInput(thread, "r1", "hi")),
			"Content-Type", "application/json", "Authorization", "Bearer "+token)
		require.Equal(t, http.StatusOK, st, string(b))
		evs := sseEvents(t, b)
		require.NotEmpty(t, evs)
		assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	}
	aliceThread, bobThread := newThreadID("alice"), newThreadID("bob")
	run(alice, aliceThread)
	run(bob, bobThread)
	run("static-token-1", newThreadID("static"))
	st, _, body := authGet(t, base, "/agui/threads", alice)
	require.Equal(t, http.StatusOK, st, body)
	assert.Contains(t, body, aliceThread)
	assert.NotContains(t, body, bobThread)
	st, _, _ = authGet(t, base, "/agui/threads/"+aliceThread, bob)
	assert.Equal(t, http.StatusNotFound, st, "bob reads alice's thread")
	st, _, body = authGet(t, base, "/agui/threads", bob)
	require.Equal(t, http.StatusOK, st)
	assert.Contains(t, body, bobThread)
	assert.NotContains(t, body, aliceThread)

	refused := func(name, token, reason string) {
		t.Helper()
		st, hdr, body := authGet(t, base, "/agui/threads", token)
		assert.Equal(t, http.StatusUnauthorized, st, name)
		assert.Contains(t, hdr, `error="invalid_token"`, name)
		assert.Contains(t, hdr, reason, name)
		assert.NotContains(t, body, "goroutine", name)
	}
	refused("wrong audience", p.token(t, "alice", "urn:other"), "another audience")
	refused("wrong issuer", other.token(t, "alice", "urn:baton"), "another issuer")
	parts := strings.Split(alice, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + parts[1] + "."
	refused("alg none", none, "algorithm")
	c := claims(t, alice)
	c["sub"] = "bob"
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(mustJSON(t, c)) + "." + parts[2]
	refused("altered claims", forged, "signature")
	st, hdr, _ := authGet(t, base, "/agui/threads", "")
	assert.Equal(t, http.StatusUnauthorized, st)
	assert.NotContains(t, hdr, "error=", "no credentials: no error code (RFC 6750 §3.1)")

	short := p.token(t, "alice", "urn:baton-short")
	exp := time.Unix(int64(claims(t, short)["exp"].(float64)), 0)
	time.Sleep(time.Until(exp.Add(1500 * time.Millisecond))) // past exp and the 1 s skew
	refused("expired", short, "expired")

	// Rotation: a token signed with the new key is accepted without a restart; after a
	// second rotation the first key is no longer published and its tokens are refused.
	p.rotate(t)
	fresh := p.token(t, "alice", "urn:baton")
	require.NotEqual(t, kid(t, alice), kid(t, fresh))
	// The JWKS is fetched again at most every 10 s: the new key may take that long.
	require.Eventually(t, func() bool {
		st, _, _ := authGet(t, base, "/agui/threads", fresh)
		return st == http.StatusOK
	}, 30*time.Second, 500*time.Millisecond, "a token of the new key")
	p.rotate(t)
	newest := p.token(t, "alice", "urn:baton")
	require.Eventually(t, func() bool {
		st, _, _ := authGet(t, base, "/agui/threads", newest)
		return st == http.StatusOK
	}, 30*time.Second, 500*time.Millisecond, "a token of the newest key")
	refused("rotated-out key", alice, "signature")

	stdout, stderr := coord.Logs()
	logs := stdout + stderr
	for _, tok := range []string{alice, bob, fresh, newest, none} {
		for _, part := range strings.Split(tok, ".") {
			if len(part) > 20 {
				assert.NotContains(t, logs, part, "a token part reached the logs")
			}
		}
	}
}

func kid(t *testing.T, jwt string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	require.NoError(t, err)
	var h struct {
		Kid, Typ string
	}
	require.NoError(t, json.Unmarshal(b, &h))
	assert.Equal(t, "at+jwt", h.Typ)
	return h.Kid
}
