package integration

// A sign-in asked for inside a nested Baton (DESIGN §9, §9c): the inner Baton B needs its
// user to sign in to an MCP server in auth mode user. B's task goes to auth-required (the
// credentials arrive out of band, through B's OAuth callback) and the outer Baton A
// surfaces it to its AG-UI client as the contract's interrupt, reason a2a:auth_required,
// with the URL to open. Once the user has signed in, B's run goes on by itself; the
// user's "done" at A continues A's call, which ends [COMPLETED] with B's answer, and the
// MCP call ran once, as the signed-in user.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
)

// nestedAuthToken is the bearer token A uses at B (B's principal for A's calls).
const nestedAuthToken = "OUTER-BATON-na-4b1d"

// nestedAuthModel scripts both levels: A (offered "inner") delegates to B; B calls the
// MCP server's sign-in tool (nobody has signed in yet, so its tools are not listed), then,
// signed in, its whoami, then says it is done.
func nestedAuthModel(req fakellm.Request) fakellm.Reply {
	tools, results := offeredTools(req), resultsSoFar(req)
	switch {
	case results > 0 && tools["sec__whoami"] && strings.Contains(req.Last().Content, "Signed in to sec"):
		return callTool("sec__whoami", `{}`)
	case results > 0:
	case tools["inner"]:
		return callTool("inner", `{"prompt":"who am I at sec?"}`)
	case tools["sec__whoami"]:
		return callTool("sec__whoami", `{}`)
	case tools["sec__sign_in"]:
		return callTool("sec__sign_in", `{}`)
	}
	return fakellm.Reply{Text: modelDoneText}
}

var signInAt = regexp.MustCompile(`Sign in at (\S+), then answer`)

func TestNestedSignInAuthRequired(t *testing.T) {
	t.Parallel()
	srv := oauthmcp.New(oauthmcp.Config{})
	t.Cleanup(srv.Close)
	model := fakellm.Start(nestedAuthModel)
	t.Cleanup(model.Close)
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	inner, _ := startKillableCoordinator(t, fmt.Sprintf(`server:
  shutdown_grace: 1s
  auth_tokens_env: NA_TOKENS
  secrets_key_env: NA_KEY
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
mcp_servers:
  - name: sec
    url: %q
    auth: {mode: user}
store: "memory:"
`, model.URL, llmKeyEnv, srv.URL())+a2aServerYAML("inner-baton"),
		[]string{llmKeyEnv + "=fake-key", "NA_TOKENS=" + nestedAuthToken, "NA_KEY=" + key})
	outer := startCoordinator(t, fmt.Sprintf(`server:
  shutdown_grace: 1s
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
agents:
  - name: inner
    url: %q
    headers: {Authorization: "Bearer %s"}
    input_required: ask_user
    timeout: 60s
store: "memory:"
`, model.URL, llmKeyEnv, inner, nestedAuthToken))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	thread := newThreadID("nested-auth")
	evs := aguiRun(ctx, t, outer, runInput(thread, "r1", "go"))
	outcome, ins := finished(evs)
	require.Equal(t, "interrupt", outcome, "events: %v", eventTypes(evs))
	require.Len(t, ins, 1)
	assert.Equal(t, "a2a:auth_required", ins[0]["reason"], "B's task is auth-required, surfaced as the contract's interrupt: %v", ins[0])
	msg, _ := ins[0]["message"].(string)
	m := signInAt.FindStringSubmatch(msg)
	require.NotNil(t, m, "the URL to sign in at reaches the top: %q", msg)
	assert.Zero(t, srv.Stats().Authorizations, "nobody signed in yet")

	// The user signs in (at B's callback, as B's principal for A's calls).
	st, page, err := oauthmcp.FollowAuthorization(ctx, http.DefaultClient, m[1], "alice-user",
		http.Header{"Authorization": {"Bearer " + nestedAuthToken}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, page)
	assert.Contains(t, page, "Signed in to sec")

	id, _ := ins[0]["id"].(string)
	require.NotEmpty(t, id)
	resume := runInput(thread, "r2", "")
	resume["messages"] = []any{}
	resume["resume"] = []any{map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"text": "done"}}}
	evs = aguiRun(ctx, t, outer, resume)
	outcome, _ = finished(evs)
	assert.Equal(t, "success", outcome, "events: %v", eventTypes(evs))
	got := innerResult(t, evs)
	assert.True(t, strings.HasPrefix(got, "[COMPLETED]"), "A's call of B completes: %q", got)
	assert.Contains(t, got, modelDoneText)

	// B's MCP call ran once after the sign-in, as the signed-in user.
	whoami := 0
	for _, c := range toolMessagesSeen(model) {
		if strings.Contains(c, "user=alice-user") {
			whoami++
		}
	}
	assert.Equal(t, 1, whoami, "B's parked call ran once, as the user: %v", toolMessagesSeen(model))
	assert.Equal(t, 1, srv.Stats().Authorizations, "one sign-in")
}
