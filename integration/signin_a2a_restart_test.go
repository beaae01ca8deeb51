package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/oauthmcp"
)

// TestSignInA2ARestartContinuesCancels: the CancelTask of alice's task at an agent that
// requires her sign-in is not confirmed (the agent is busy) when the coordinator stops; the
// next coordinator on the same SQLite file continues it with alice's token, and the agent
// cancels the task. Before the store kept each pending cancel's owner, the continued cancel
// went without a token and the agent refused it.
func TestSignInA2ARestartContinuesCancels(t *testing.T) {
	t.Parallel()
	as := oauthmcp.New(oauthmcp.Config{})
	defer as.Close()
	agentURL, agent := startSecuredAgentFor(t, as)
	model := startFakeLLM(t)
	cfg := vaultConfig(model.URL, agentURL, "1s", "", "sqlite:"+filepath.Join(t.TempDir(), "baton.db"))
	base, first := startSecCoordinator(t, cfg, signInEnv(), "json")
	var bodies []string
	alice := siClient{t: t, base: base, token: aliceToken, bodies: &bodies}

	// alice signs in to the vault.
	require.Len(t, eventsOfType(signInToVault(t, as, alice, newThreadID("a2a-rs")), "TOOL_CALL_RESULT"), 1)

	// Her waiting task is cancelled while the agent is busy: the cancel stays pending (the
	// coordinator retries it, recorded in the store) until the coordinator stops.
	agent.busy.Store(true)
	th := newThreadID("a2a-rs")
	in := firstInterrupt(t, alice.run(runInput(th, "r1", "vault: "+askMe)), "input_required")
	resume := runInput(th, "r2", "")
	resume["messages"] = []any{}
	resume["resume"] = []any{resumeEntry(in["id"].(string), cancelledAnswer)}
	alice.run(resume)
	// The follow-up records the cancel before its first retry.
	require.Eventually(t, func() bool { return len(agent.cancelUsers()) >= 2 }, 20*time.Second, 20*time.Millisecond,
		"the refused cancel is retried")
	require.Zero(t, first.Stop())
	before := agent.cancelUsers()
	require.NotContains(t, before, "", "the live process sent every attempt with alice's token")

	// The next process continues the cancel as alice; the agent accepts it now.
	agent.busy.Store(false)
	startSecCoordinator(t, cfg, signInEnv(), "json")
	require.Eventually(t, func() bool { return len(agent.cancelUsers()) > len(before) }, 30*time.Second, 20*time.Millisecond,
		"the restarted coordinator continues the cancel")
	after := agent.cancelUsers()[len(before):]
	assert.Equal(t, []string{"alice-vault"}, slices.Compact(after), "every continued attempt carried alice's token")
	for _, secret := range as.Issued() {
		assert.NotContains(t, fmt.Sprint(bodies), secret, "no token in events")
	}
}
