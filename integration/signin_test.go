package integration

// End to end sign-in (OAuth) for an MCP server in auth mode user: the
// coordinator binary with bearer auth for two principals and a SQLite store, against
// internal/testutil/oauthmcp (a go-sdk MCP server behind RequireBearerToken with its own
// authorization server, on loopback). One coordinator topology serves the subtests in
// order; a restart of the coordinator is part of the story. The browser is played by an
// HTTP client that follows the authorization server's redirect to Baton's callback.

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
)

const (
	aliceToken = "ALICE-BEARER-si-7f3a"
	bobToken   = "BOB-BEARER-si-2c9e"
)

// signInEnv is the coordinator's environment: two bearer tokens and the secrets key.
func signInEnv() []string {
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	return []string{"SI_KEY=" + key, "SI_TOKENS=" + aliceToken + "," + bobToken, "SI_LLM=fake", "SI_SVC=" + oauthmcp.ServiceSecret}
}

func signInYAML(llmURL, mcpURL, dbPath string) string {
	return fmt.Sprintf(`server:
  shutdown_grace: 3s
  auth_tokens_env: SI_TOKENS
  secrets_key_env: SI_KEY
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: SI_LLM
mcp_servers:
  - name: sec
    url: %q
    auth: {mode: user}
  - name: svc
    url: %q
    auth: {mode: service, client_id: baton, client_secret_env: SI_SVC}
store: "sqlite:%s"
`, llmURL, mcpURL, mcpURL, dbPath)
}

// siClient talks to the coordinator as one principal and keeps every body it received.
type siClient struct {
	t      *testing.T
	base   string
	token  string
	bodies *[]string
}

func (c siClient) do(method, path string, body []byte) (int, []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	*c.bodies = append(*c.bodies, string(b))
	return resp.StatusCode, b
}

// run posts one run and returns its events.
func (c siClient) run(in map[string]any) []map[string]any {
	c.t.Helper()
	st, b := c.do(http.MethodPost, "/agui", mustJSON(c.t, in))
	require.Equal(c.t, http.StatusOK, st, string(b))
	return sseEvents(c.t, b)
}

// call asks the model to call tool on a fresh thread; it returns the thread and the events.
func (c siClient) call(tool string) (string, []map[string]any) {
	th := newThreadID("si")
	return th, c.run(runInput(th, "r1", mcpCallMarker+" "+tool))
}

// signInInterrupt returns the run's one interrupt, which must be a sign-in to sec.
func signInInterrupt(t *testing.T, evs []map[string]any) map[string]any {
	t.Helper()
	fins := eventsOfType(evs, "RUN_FINISHED")
	require.Len(t, fins, 1, "events: %v", eventTypes(evs))
	out, _ := fins[0]["outcome"].(map[string]any)
	require.Equal(t, "interrupt", out["type"], "events: %v", eventTypes(evs))
	ins, _ := out["interrupts"].([]any)
	require.Len(t, ins, 1)
	in := ins[0].(map[string]any)
	assert.Equal(t, "mcp:authorization", in["reason"])
	assert.Equal(t, "Sign in to sec", in["message"])
	assert.NotEmpty(t, in["expiresAt"])
	md, _ := in["metadata"].(map[string]any)
	assert.Equal(t, "sec", md["server"])
	require.NotEmpty(t, md["authorizationUrl"])
	return in
}

// result is the content of the run's one TOOL_CALL_RESULT.
func result(t *testing.T, evs []map[string]any) string {
	t.Helper()
	res := eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, res, 1, "events: %v", eventTypes(evs))
	s, _ := res[0]["content"].(string)
	return s
}

// signInAndResume follows the interrupt's URL as user, then resumes the thread.
func (c siClient) signInAndResume(thread string, in map[string]any, user string) []map[string]any {
	c.t.Helper()
	md := in["metadata"].(map[string]any)
	st, page, err := oauthmcp.FollowAuthorization(context.Background(), http.DefaultClient, md["authorizationUrl"].(string), user,
		http.Header{"Authorization": {"Bearer " + c.token}})
	require.NoError(c.t, err)
	*c.bodies = append(*c.bodies, page)
	require.Equal(c.t, http.StatusOK, st, page)
	assert.Contains(c.t, page, "Signed in to sec, you can return to the chat.")
	assert.Contains(c.t, page, `"threadId":"`+thread+`"`, "the sign-in is bound to its thread, for the chat page")
	resume := runInput(thread, "r-resume-"+newThreadID("x"), "")
	resume["messages"] = []any{}
	resume["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{"action": "accept"}))}
	return c.run(resume)
}

func TestSignInEndToEnd(t *testing.T) {
	t.Parallel()
	srv := oauthmcp.New(oauthmcp.Config{TokenTTL: 2 * time.Second})
	defer srv.Close()
	model := fakellm.Start(mcpModel)
	defer model.Close()
	db := filepath.Join(t.TempDir(), "baton.db")
	cfg := signInYAML(model.URL, srv.URL(), db)
	base, p := startSecCoordinator(t, cfg, signInEnv(), "json")
	var bodies []string
	alice := siClient{t: t, base: base, token: aliceToken, bodies: &bodies}
	bob := siClient{t: t, base: base, token: bobToken, bodies: &bodies}
	var logs []string

	t.Run("first call asks alice to sign in; the resumed call completes", func(t *testing.T) {
		alice.t, bob.t = t, t
		th, evs := alice.call("sec__sign_in")
		in := signInInterrupt(t, evs)
		assert.Empty(t, eventsOfType(evs, "TOOL_CALL_RESULT"), "the call is parked, not answered")
		evs = alice.signInAndResume(th, in, "alice-user")
		assert.Contains(t, result(t, evs), "Signed in to sec")
		assert.Contains(t, result(t, evs), "whoami")
		_, evs = alice.call("sec__whoami")
		assert.Contains(t, result(t, evs), "user=alice-user")
	})

	t.Run("another principal's browser cannot complete alice's sign-in", func(t *testing.T) {
		alice.t, bob.t = t, t
		th, evs := bob.call("sec__whoami")
		in := signInInterrupt(t, evs)
		md := in["metadata"].(map[string]any)
		st, page, err := oauthmcp.FollowAuthorization(context.Background(), http.DefaultClient, md["authorizationUrl"].(string), "mallory",
			http.Header{"Authorization": {"Bearer " + aliceToken}})
		require.NoError(t, err)
		bodies = append(bodies, page)
		assert.Equal(t, http.StatusForbidden, st, page)
		// The state was used up: bob's resume asks again, with a new sign-in.
		resume := runInput(th, "r2", "")
		resume["messages"] = []any{}
		resume["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{"action": "accept"}))}
		again := signInInterrupt(t, bob.run(resume))
		assert.NotEqual(t, in["id"], again["id"])

		t.Run("bob signs in separately", func(t *testing.T) {
			bob.t = t
			evs := bob.signInAndResume(th, again, "bob-user")
			assert.Contains(t, result(t, evs), "user=bob-user")
			_, evs = alice.call("sec__whoami")
			assert.Contains(t, result(t, evs), "user=alice-user", "alice keeps her own session and token")
		})
	})

	t.Run("a service account server answers every principal as the service", func(t *testing.T) {
		alice.t, bob.t = t, t
		_, evs := alice.call("svc__whoami")
		assert.Contains(t, result(t, evs), "user=service:baton")
		_, evs = bob.call("svc__whoami")
		assert.Contains(t, result(t, evs), "user=service:baton")
	})

	t.Run("an expired access token is refreshed", func(t *testing.T) {
		alice.t = t
		refreshes := srv.Stats().Refreshes
		authorizations := srv.Stats().Authorizations
		time.Sleep(2500 * time.Millisecond) // past the 2 s access token; nothing timed is asserted
		_, evs := alice.call("sec__whoami")
		assert.Contains(t, result(t, evs), "user=alice-user")
		assert.Greater(t, srv.Stats().Refreshes, refreshes)
		assert.Equal(t, authorizations, srv.Stats().Authorizations, "no new sign-in")
	})

	outer := t
	t.Run("a restart keeps both tokens", func(t *testing.T) {
		require.Equal(t, 0, p.Stop())
		so, se := p.Logs()
		logs = append(logs, so, se)
		base2, p2 := startSecCoordinator(outer, cfg, signInEnv(), "json")
		p = p2
		alice.base, bob.base, alice.t, bob.t = base2, base2, t, t
		authorizations := srv.Stats().Authorizations
		_, evs := alice.call("sec__whoami")
		assert.Contains(t, result(t, evs), "user=alice-user")
		_, evs = bob.call("sec__whoami")
		assert.Contains(t, result(t, evs), "user=bob-user")
		assert.Equal(t, authorizations, srv.Stats().Authorizations, "nobody signed in again")
	})

	t.Run("a revoked connection asks again", func(t *testing.T) {
		alice.t, bob.t = t, t
		st, b := alice.do(http.MethodDelete, "/agui/connections/nope", nil)
		assert.Equal(t, http.StatusNotFound, st)
		assert.Contains(t, string(b), `"error":"NOT_FOUND"`)
		st, _ = alice.do(http.MethodDelete, "/agui/connections/sec", nil)
		assert.Equal(t, http.StatusNoContent, st)
		_, evs := alice.call("sec__whoami")
		signInInterrupt(t, evs)
		_, evs = bob.call("sec__whoami")
		assert.Contains(t, result(t, evs), "user=bob-user", "bob's connection is his own")
	})

	t.Run("no secret in logs, events, metrics or error bodies", func(t *testing.T) {
		alice.t = t
		st, b := alice.do(http.MethodGet, "/metrics", nil)
		require.Equal(t, http.StatusOK, st)
		assert.Contains(t, string(b), "baton_")
		st, _ = alice.do(http.MethodGet, "/oauth/callback?state=forged&code=forged-code", nil)
		assert.Equal(t, http.StatusBadRequest, st)
		require.Equal(t, 0, p.Stop())
		so, se := p.Logs()
		logs = append(logs, so, se)
		all := strings.Join(logs, "\n") + strings.Join(bodies, "\n")
		issued := srv.Issued()
		require.NotEmpty(t, issued)
		for _, secret := range []string{aliceToken, bobToken, oauthmcp.ServiceSecret, base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))} {
			assert.NotContains(t, all, secret, "a bearer token, the client secret or the secrets key leaked")
		}
		for _, secret := range issued {
			if strings.Contains(all, secret) {
				t.Errorf("a token, code or verifier (%.6s…) leaked", secret)
			}
		}
		assert.Contains(t, all, "mcp sign-in completed", "the sign-ins were logged, without secrets")
	})
}
