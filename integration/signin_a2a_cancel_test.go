package integration

import (
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
	t.Parallel()
	as := oauthmcp.New(oauthmcp.Config{})
	defer as.Close()
	agentURL, agent := startSecuredAgentFor(t, as)
	model := startFakeLLM(t)
	cfg := vaultConfig(model.URL, agentURL, "3s", "interrupts:\n  ttl: 2s\n", "memory:")
	base, _ := startSecCoordinator(t, cfg, signInEnv(), "json")
	var bodies []string
	alice := siClient{t: t, base: base, token: aliceToken, bodies: &bodies}

	// alice signs in to the vault (the resume must come before the 2 s interrupt expiry).
	res := eventsOfType(signInToVault(t, as, alice, newThreadID("a2a-cx")), "TOOL_CALL_RESULT")
	require.Len(t, res, 1)
	require.Contains(t, res[0]["content"], "user=alice-vault")

	// A cancelled answer cancels the waiting task with alice's token.
	th := newThreadID("a2a-cx")
	in := firstInterrupt(t, alice.run(runInput(th, "r1", "vault: "+askMe)), "input_required")
	resume := runInput(th, "r2", "")
	resume["messages"] = []any{}
	resume["resume"] = []any{resumeEntry(in["id"].(string), cancelledAnswer)}
	alice.run(resume)
	assert.Equal(t, []string{"alice-vault"}, agent.cancelUsers(), "the cancel carried alice's token")

	// The expiry sweep cancels the waiting task with alice's token too.
	th = newThreadID("a2a-cx")
	firstInterrupt(t, alice.run(runInput(th, "r1", "vault: "+askMe)), "input_required")
	require.Eventually(t, func() bool { return len(agent.cancelUsers()) >= 2 }, 20*time.Second, 50*time.Millisecond,
		"the expired interrupt's task is cancelled")
	assert.Equal(t, []string{"alice-vault", "alice-vault"}, agent.cancelUsers(), "the background cancel carried alice's token")
	for _, secret := range as.Issued() {
		assert.NotContains(t, strings.Join(bodies, "\n"), secret, "no token in events")
	}
}
