package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// pendingOf waits until st records exactly n pending cancels and returns them.
func pendingOf(t *testing.T, st store.Store, n int) []store.PendingCancel {
	t.Helper()
	var got []store.PendingCancel
	require.Eventually(t, func() bool {
		var err error
		got, err = st.PendingCancels(context.Background(), 10)
		return err == nil && len(got) == n
	}, 10*time.Second, 2*time.Millisecond, "pending cancels: %v", got)
	return got
}

// TestRestartContinuesCancelAsOwner: a run's cancel that the agent does not confirm is
// recorded with the run's owner; the next process (a new engine on the same store)
// continues it with that owner's credentials, as the live run would have, and the agent
// accepts it. Without the owner the continued cancel went without them and was refused.
func TestRestartContinuesCancelAsOwner(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	started := make(chan struct{})
	agent := &securedAgent{failFirst: 1 << 30, fakeAgent: &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("task-rs", "ctx")
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}}
	first := newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"trip"}`)},
		Agents:        []Agent{{Name: "research", Description: "Researches.", Client: agent, Timeout: time.Minute}},
		CancelTimeout: 2 * time.Second, CancelHorizon: time.Hour, Store: st,
		A2ASignIn: bearerSignIn{signedIn: map[string]bool{"alice": true}}})
	r, err := first.StartRun(context.Background(), input("rs"), "alice")
	require.NoError(t, err)
	<-started
	r.Cancel(ErrClientGone)
	collect(t, r)
	p := pendingOf(t, st, 1)
	assert.Equal(t, "research", p[0].Agent)
	assert.Equal(t, "task-rs", p[0].TaskID)
	assert.Equal(t, "alice", p[0].Owner, "recorded with the run's owner")
	// The process stops with the cancel still refused: it stays recorded.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = first.Stop(ctx)
	cancel()
	pendingOf(t, st, 1)
	before := len(agent.bearers())

	agent.mu.Lock()
	agent.failFirst = 0
	agent.mu.Unlock()
	second := newSecuredEngine(t, agent, func(c *Config) { c.Store, c.CancelHorizon = st, time.Hour })
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	require.NoError(t, second.cancels.confirm.Wait(wctx))
	assert.Equal(t, []string{"task-rs"}, agent.cancelled(), "the continued cancel is accepted")
	assert.Equal(t, []string{"tok-alice"}, agent.bearers()[before:], "sent with alice's credentials")
	pendingOf(t, st, 0)
}

// TestRestartContinuesCancelWithoutGrant: a continued cancel whose owner has no
// credentials for the agent any more (signed out), or that was recorded without an owner,
// goes without them, ends failed when the agent refuses it, and says so at warn, without
// the principal or any token.
func TestRestartContinuesCancelWithoutGrant(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	since := time.Now()
	for _, c := range []store.PendingCancel{
		{Agent: "research", TaskID: "task-out", Since: since, Owner: "p-carol"},
		{Agent: "research", TaskID: "task-v7", Since: since},
	} {
		require.NoError(t, st.SavePendingCancel(context.Background(), c))
	}
	var logs testutil.SyncBuffer
	agent := &securedAgent{fakeAgent: &fakeAgent{}}
	e := newSecuredEngine(t, agent, func(c *Config) {
		c.Store, c.CancelHorizon = st, time.Hour
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	require.NoError(t, e.cancels.confirm.Wait(wctx))
	assert.Empty(t, agent.cancelled())
	assert.Equal(t, []string{"", ""}, agent.bearers(), "one attempt each, without credentials")
	pendingOf(t, st, 0)
	var warns []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "refused by the agent's authentication") {
			warns = append(warns, line)
		}
	}
	require.Len(t, warns, 2, "logs:\n%s", logs.String())
	assert.Contains(t, strings.Join(warns, ""), "owner_known=true")
	assert.Contains(t, strings.Join(warns, ""), "owner_known=false")
	assert.NotContains(t, logs.String(), "p-carol", "the principal is not logged")
}
