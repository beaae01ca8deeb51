package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
)

// TestSignInA2ACancels: the CancelTask of a signed-in principal's task carries their
// token, so that an agent that requires auth accepts it: the user's cancelled answer and the
// expiry of the interrupt (the background sweep) both cancel the waiting task as alice.
func TestSignInA2ACancels(t *testing.T) {
	as := oauthmcp.New(oauthmcp.Config{})
	defer as.Close()
	agentURL, agent := startSecuredAgentFor(t, as)
	model := startFakeLLM(t)
	cfg := fmt.Sprintf(`server:
  shutdown_grace: 3s
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
interrupts:
  ttl: 2s
store: "memory:"
`, model.URL, agentURL)
	base, _ := startSecCoordinator(t, cfg, signInEnv(), "json")
	var bodies []string
	alice := siClient{t: t, base: base, token: aliceToken, bodies: &bodies}

	interrupt := func(evs []map[string]any, reason string) map[string]any {
		t.Helper()
		fins := eventsOfType(evs, "RUN_FINISHED")
		require.Len(t, fins, 1, "events: %v", eventTypes(evs))
		out := fins[0]["outcome"].(map[string]any)
		require.Equal(t, "interrupt", out["type"], "events: %v", eventTypes(evs))
		in := out["interrupts"].([]any)[0].(map[string]any)
		require.Equal(t, reason, in["reason"])
		return in
	}

	// alice signs in to the vault (the resume must come before the 2 s interrupt expiry).
	th := newThreadID("a2a-cx")
	in := interrupt(alice.run(runInput(th, "r1", "vault: read my notes")), "a2a:auth_required")
	authURL, _ := in["metadata"].(map[string]any)["authorizationUrl"].(string)
	st, page, err := oauthmcp.FollowAuthorization(context.Background(), http.DefaultClient, authURL, "alice-vault",
		http.Header{"Authorization": {"Bearer " + aliceToken}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, page)
	resume := runInput(th, "r2", "")
	resume["messages"] = []any{}
	resume["resume"] = []any{resumeEntry(in["id"].(string), resolved(map[string]any{}))}
	res := eventsOfType(alice.run(resume), "TOOL_CALL_RESULT")
	require.Len(t, res, 1)
	require.Contains(t, res[0]["content"], "user=alice-vault")

	// A cancelled answer cancels the waiting task with alice's token.
	th = newThreadID("a2a-cx")
	in = interrupt(alice.run(runInput(th, "r1", "vault: "+askMe)), "input_required")
	resume = runInput(th, "r2", "")
	resume["messages"] = []any{}
	resume["resume"] = []any{resumeEntry(in["id"].(string), cancelledAnswer)}
	alice.run(resume)
	assert.Equal(t, []string{"alice-vault"}, agent.cancelUsers(), "the cancel carried alice's token")

	// The expiry sweep cancels the waiting task with alice's token too.
	th = newThreadID("a2a-cx")
	interrupt(alice.run(runInput(th, "r1", "vault: "+askMe)), "input_required")
	require.Eventually(t, func() bool { return len(agent.cancelUsers()) >= 2 }, 20*time.Second, 50*time.Millisecond,
		"the expired interrupt's task is cancelled")
	assert.Equal(t, []string{"alice-vault", "alice-vault"}, agent.cancelUsers(), "the background cancel carried alice's token")
	for _, secret := range as.Issued() {
		assert.NotContains(t, strings.Join(bodies, "\n"), secret, "no token in events")
	}
}
