package integration

// Baton B, serving A2A, delegates to the A2A JS SDK peer, which answers "auth" with
// auth-required (DESIGN §9, §9c). When the peer's card declares an OAuth flow that B's
// sign-in handles, the question is answered out of band: B's task is auth-required (not
// input-required) with the URL to open, a message to it meanwhile is refused (a2a-go keeps
// the execution open), and once the user has signed in at B's callback B's run goes on by
// itself: the peer's task gets one follow-up, carrying the user's token, and every level
// completes. Without a flow the caller must say when it is done: B's task is
// input-required and the caller's "done" continues it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
)

// peerAuthLog is what the A2A peer recorded about sign-ins and follow-ups.
type peerAuthLog struct {
	Authorizations []string          `json:"authorizations"`
	FollowUps      map[string]int    `json:"followUps"`
	Tasks          map[string]string `json:"tasks"`
	Sends          []string          `json:"sends"`
}

func readPeerAuthLog(t testing.TB, base string) peerAuthLog {
	t.Helper()
	resp, err := http.Get(base + "/test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var l peerAuthLog
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	return l
}

// bearerA2AClient is a2a-go's JSON-RPC client of Baton at base, as the principal of token.
func bearerA2AClient(t testing.TB, base, token string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{Transport: bearerTransport{token}}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolJSONRPC)}, a2aclient.WithJSONRPCTransport(hc))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy(); hc.CloseIdleConnections() })
	return c
}

func TestNestedA2AAgentSignInAuthRequired(t *testing.T) {
	t.Parallel()
	as := oauthmcp.New(oauthmcp.Config{})
	t.Cleanup(as.Close)
	signed := startA2APeerEnv(t, "OAUTH_ISSUER="+as.Issuer())
	plain := startA2APeerEnv(t)
	model := startA2AModel(t)
	b, _ := startKillableCoordinator(t, fmt.Sprintf(`server:
  shutdown_grace: 1s
  auth_tokens_env: SI_TOKENS
  secrets_key_env: SI_KEY
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: SI_LLM
agents:
  - name: peer
    url: %q
    input_required: ask_user
  - name: plain
    url: %q
    input_required: ask_user
store: "memory:"
`, model.URL, signed, plain)+a2aServerYAML("inner-baton"), signInEnv())
	c := bearerA2AClient(t, b, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The peer's card declares a flow: B's task waits in auth-required, with B's URL.
	r := streamA2A(ctx, c, userMessage("peer: auth"), func(r a2aRun) bool {
		return r.state() == a2a.TaskStateAuthRequired || r.state() == a2a.TaskStateInputRequired
	})
	require.NoError(t, r.Err)
	require.Equal(t, a2a.TaskStateAuthRequired, r.state(), "a sign-in B completes by itself is auth-required: %v", r.States)
	got := ""
	for _, p := range r.Last.Message.Parts {
		got += p.Text()
	}
	assert.Contains(t, got, "please authenticate", "the peer's own message")
	m := signInAt.FindStringSubmatch(got)
	require.NotNil(t, m, "the URL to sign in at: %q", got)
	require.True(t, strings.HasPrefix(m[1], as.Issuer()+"/authorize?"), "B's sign-in to the peer's authorization server: %s", m[1])

	// a2a-go refuses a message to the task while it waits (the credentials arrive out of
	// band); the task is unchanged.
	_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser,
		a2a.TaskInfo{TaskID: r.TaskID, ContextID: r.ContextID}, a2a.NewTextPart("done"))})
	require.Error(t, err, "a message to an auth-required task is refused")
	task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: r.TaskID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)
	assert.Zero(t, as.Stats().Authorizations, "nobody signed in yet")

	// The user signs in at B's callback, as B's principal; B's run goes on by itself.
	st, page, err := oauthmcp.FollowAuthorization(ctx, http.DefaultClient, m[1], "alice-peer",
		http.Header{"Authorization": {"Bearer " + aliceToken}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, page)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		task, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: r.TaskID})
		if assert.NoError(ct, err) {
			assert.Equal(ct, a2a.TaskStateCompleted, task.Status.State)
		}
	}, 30*time.Second, 50*time.Millisecond)
	assert.Contains(t, taskArtifactText(task), modelDoneText, "B's answer")
	var tool string
	for _, c := range toolMessagesSeen(model) {
		tool += c
	}
	assert.Contains(t, tool, "done: done", "the peer's task was continued with B's \"done\"")

	pl := readPeerAuthLog(t, signed)
	require.Len(t, pl.FollowUps, 1, "one peer task was continued: %+v", pl)
	for id, n := range pl.FollowUps {
		assert.Equal(t, 1, n, "the follow-up reached the peer's task once")
		assert.Equal(t, "TASK_STATE_COMPLETED", pl.Tasks[id])
	}
	users := map[string]int{}
	for _, h := range pl.Authorizations {
		tok, _ := strings.CutPrefix(h, "Bearer ")
		u, _ := as.Verify(tok)
		users[u]++
	}
	assert.Positive(t, users["alice-peer"], "the continuation carried the signed-in user's token: %v", users)
	assert.Positive(t, users[""], "the first message went without one")
	assert.Equal(t, 1, as.Stats().Authorizations, "one sign-in")

	// Without a flow only the caller can say it is done: input-required, answered by "done".
	r = streamA2A(ctx, c, userMessage("plain: auth"), nil)
	require.NoError(t, r.Err)
	require.Equal(t, a2a.TaskStateInputRequired, r.state(), "%v", r.States)
	r = streamA2A(ctx, c, a2a.NewMessageForTask(a2a.MessageRoleUser,
		a2a.TaskInfo{TaskID: r.TaskID, ContextID: r.ContextID}, a2a.NewTextPart("done")), nil)
	require.NoError(t, r.Err)
	assert.Equal(t, a2a.TaskStateCompleted, r.state(), "%v", r.States)
	pl = readPeerAuthLog(t, plain)
	require.Len(t, pl.FollowUps, 1, "%+v", pl)
	for _, n := range pl.FollowUps {
		assert.Equal(t, 1, n)
	}
}
