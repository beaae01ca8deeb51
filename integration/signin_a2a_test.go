package integration

// Sign-in for an A2A agent whose card declares an OAuth 2 authorization-code flow:
// an in-process a2a-go agent answers auth-required without a valid bearer token and
// "user=<who>" with one; its card points to internal/testutil/oauthmcp's authorization
// server (dynamic registration through the card's metadata URL). The coordinator raises
// a2a:auth_required with metadata.authorizationUrl; after the browser's sign-in (played by
// an HTTP client) the resume continues the task with the principal's token.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
)

// securedAgent is an A2A agent that needs a bearer token from as. Like an a2a-go agent
// whose credentials arrive out of band, a task waits in auth-required with its execution
// running; the client's continuation message, when it carries a valid token, lets it
// complete as that user (a2a-go refuses the message itself while the execution runs, and
// the client follows the task).
type securedAgent struct {
	as *oauthmcp.Server

	mu      sync.Mutex
	waiting map[a2a.TaskID]chan string
	stop    chan struct{} // closed at the end of the test: waiting executions end
	// cancels records the user of every CancelTask ("" without a valid token); a cancel
	// without one is refused, as an agent that requires auth does.
	cancels []string
	// busy makes every CancelTask of a signed-in user fail with an error that repeating
	// may change (an agent swamped by cancels): the coordinator keeps it pending.
	busy atomic.Bool
}

// askMe in a prompt makes a signed-in user's task wait in input-required until cancelled.
const askMe = "ask me"

func (e *securedAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		user := e.userOf(ctx)
		if user == "" {
			ch := make(chan string, 1)
			e.mu.Lock()
			e.waiting[ec.TaskID] = ch
			e.mu.Unlock()
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired,
				a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("Please sign in to the vault."))), nil) {
				return
			}
			select {
			case user = <-ch:
			case <-ctx.Done():
				return
			case <-e.stop:
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
				return
			}
		}
		if ec.Message != nil && ec.StoredTask == nil && strings.Contains(partsText(ec.Message.Parts), askMe) {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired,
				a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("Which notes?"))), nil) {
				return
			}
			select {
			case <-ctx.Done():
			case <-e.stop:
			}
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("user="+user))), nil)
	}
}

func partsText(parts []*a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// cancelUsers returns the user of every CancelTask so far.
func (e *securedAgent) cancelUsers() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.cancels...)
}

func (e *securedAgent) userOf(ctx context.Context) string {
	cc, ok := a2asrv.CallContextFrom(ctx)
	if !ok {
		return ""
	}
	v, ok := cc.ServiceParams().Get("authorization")
	if !ok || len(v) == 0 {
		return ""
	}
	tok, ok := strings.CutPrefix(v[0], "Bearer ")
	if !ok {
		return ""
	}
	user, _ := e.as.Verify(tok)
	return user
}

func (e *securedAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		user := e.userOf(ctx)
		e.mu.Lock()
		e.cancels = append(e.cancels, user)
		e.mu.Unlock()
		if user == "" {
			yield(nil, a2a.ErrUnauthenticated)
			return
		}
		if e.busy.Load() {
			yield(nil, errors.New("too many cancels, try again"))
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// credentials is the interceptor that hands the valid token of a message for a waiting
// task to its execution. It hands it over After the request was handled: handed over
// Before, the execution could complete the task before a2a-go looked at the message, which
// it then refused as one for a finished task instead of one for a running execution.
type credentials struct {
	a2asrv.PassthroughCallInterceptor
	e *securedAgent
}

// signedIn is what Before found in a message for a waiting task: its task and user.
type signedIn struct {
	task a2a.TaskID
	user string
}

type signedInKey struct{}

func (c credentials) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	var id a2a.TaskID
	switch p := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		if p.Message != nil {
			id = p.Message.TaskID
		}
	}
	if id == "" {
		return ctx, nil, nil
	}
	if user := c.e.userOf(ctx); user != "" {
		return context.WithValue(ctx, signedInKey{}, signedIn{task: id, user: user}), nil, nil
	}
	return ctx, nil, nil
}

func (c credentials) After(ctx context.Context, _ *a2asrv.CallContext, _ *a2asrv.Response) error {
	si, ok := ctx.Value(signedInKey{}).(signedIn)
	if !ok {
		return nil
	}
	c.e.mu.Lock()
	ch := c.e.waiting[si.task]
	delete(c.e.waiting, si.task)
	c.e.mu.Unlock()
	if ch != nil {
		ch <- si.user
	}
	return nil
}

// startSecuredAgent serves the agent on loopback and returns its base URL.
func startSecuredAgent(t *testing.T, as *oauthmcp.Server) string {
	u, _ := startSecuredAgentFor(t, as)
	return u
}

// startSecuredAgentFor is startSecuredAgent that also returns the agent.
func startSecuredAgentFor(t *testing.T, as *oauthmcp.Server) (string, *securedAgent) {
	t.Helper()
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	card := &a2a.AgentCard{
		Name: "vault", Description: "Reads the vault for the signed-in user.", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(ts.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "read", Name: "Read", Description: "Reads the vault.", Tags: []string{"vault"}}},
		SecuritySchemes: a2a.NamedSecuritySchemes{"oauth": a2a.OAuth2SecurityScheme{
			Flows: a2a.AuthorizationCodeOAuthFlow{AuthorizationURL: as.Issuer() + "/authorize", TokenURL: as.Issuer() + "/token",
				Scopes: map[string]string{"vault:read": "read the vault"}},
			Oauth2MetadataURL: as.Issuer() + "/.well-known/oauth-authorization-server",
		}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"oauth": {"vault:read"}}},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	agent := &securedAgent{as: as, waiting: map[a2a.TaskID]chan string{}, stop: make(chan struct{})}
	t.Cleanup(func() { close(agent.stop) })
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent, a2asrv.WithCallInterceptors(credentials{e: agent}))))
	return ts.URL, agent
}

// vaultConfig is the coordinator configuration of the A2A sign-in tests: the "vault" agent at
// agentURL (input_required: ask_user), the fake model at modelURL, two bearer principals and
// a secrets key (signInEnv), the given shutdown grace and store, and extra top-level YAML.
func vaultConfig(modelURL, agentURL, grace, extra, store string) string {
	return fmt.Sprintf(`server:
  shutdown_grace: %s
  auth_tokens_env: SI_TOKENS
  secrets_key_env: SI_KEY
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: SI_LLM
agents:
  - name: vault
    url: %q
    input_required: ask_user
%sstore: %q
`, grace, modelURL, agentURL, extra, store)
}

// signInToVault runs alice's first message on thread th, which ends in the vault's
// a2a:auth_required interrupt with an authorization URL at as; she follows it (signed in
// with her bearer) and resumes. It returns the resume's events.
func signInToVault(t *testing.T, as *oauthmcp.Server, alice siClient, th string) []map[string]any {
	t.Helper()
	in := firstInterrupt(t, alice.run(runInput(th, "r1", "vault: read my notes")), "a2a:auth_required")
	md := in["metadata"].(map[string]any)
	authURL, _ := md["authorizationUrl"].(string)
	require.True(t, strings.HasPrefix(authURL, as.Issuer()+"/authorize?"), "metadata: %v", md)
	st, page, err := oauthmcp.FollowAuthorization(context.Background(), http.DefaultClient, authURL, "alice-vault",
		http.Header{"Authorization": {"Bearer " + aliceToken}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, page)
	assert.Contains(t, page, "Signed in to vault, you can return to the chat.")
	resume := runInput(th, "r2", "")
	resume["messages"] = []any{}
	resume["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{}))}
	return alice.run(resume)
}

// firstInterrupt returns the first interrupt of a run that ended in one, and checks its
// reason.
func firstInterrupt(t *testing.T, evs []map[string]any, reason string) map[string]any {
	t.Helper()
	fins := eventsOfType(evs, "RUN_FINISHED")
	require.Len(t, fins, 1, "events: %v", eventTypes(evs))
	out := fins[0]["outcome"].(map[string]any)
	require.Equal(t, "interrupt", out["type"], "events: %v", eventTypes(evs))
	in := out["interrupts"].([]any)[0].(map[string]any)
	require.Equal(t, reason, in["reason"])
	return in
}

func TestSignInA2A(t *testing.T) {
	t.Parallel()
	as := oauthmcp.New(oauthmcp.Config{})
	defer as.Close()
	agentURL := startSecuredAgent(t, as)
	model := startFakeLLM(t)
	base, _ := startSecCoordinator(t, vaultConfig(model.URL, agentURL, "3s", "", "memory:"), signInEnv(), "json")
	var bodies []string
	alice := siClient{t: t, base: base, token: aliceToken, bodies: &bodies}

	evs := signInToVault(t, as, alice, newThreadID("a2a-si"))
	res := eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, res, 1, "events: %v", eventTypes(evs))
	assert.Contains(t, res[0]["content"], "user=alice-vault", "the continuation carried alice's token")

	// A new task of alice's is authorized from the start; bob's is not.
	evs = alice.run(runInput(newThreadID("a2a-si"), "r1", "vault: again"))
	res = eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, res, 1, "events: %v", eventTypes(evs))
	assert.Contains(t, res[0]["content"], "user=alice-vault")
	bob := siClient{t: t, base: base, token: bobToken, bodies: &bodies}
	evs = bob.run(runInput(newThreadID("a2a-si"), "r1", "vault: mine"))
	fins := eventsOfType(evs, "RUN_FINISHED")
	require.Len(t, fins, 1)
	assert.Equal(t, "interrupt", fins[0]["outcome"].(map[string]any)["type"], "bob must sign in himself")

	// Forgetting the connection asks again.
	st, _ := alice.do(http.MethodDelete, "/agui/connections/vault", nil)
	assert.Equal(t, http.StatusNoContent, st)
	evs = alice.run(runInput(newThreadID("a2a-si"), "r1", "vault: once more"))
	fins = eventsOfType(evs, "RUN_FINISHED")
	require.Len(t, fins, 1)
	assert.Equal(t, "interrupt", fins[0]["outcome"].(map[string]any)["type"])
	for _, secret := range as.Issued() {
		assert.NotContains(t, strings.Join(bodies, "\n"), secret, "no token in events or pages")
	}
}
