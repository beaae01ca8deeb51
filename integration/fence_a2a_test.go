package integration

// Fencing with an A2A task (design/fencing.md): the owner replica (a child process) is
// paused (SIGSTOP) while it follows the JS peer's slow task, past its lease; the other
// replica takes the run over and follows the task by id; the owner is resumed (SIGCONT)
// while the task still runs. The stale owner must not cancel the task the new owner
// follows, nor write to the run's log.

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

func TestFencePausedOwnerA2A(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	dsn := pgtest.DSN(t)
	peer := startA2APeerEnv(t)
	model := startFakeLLM(t)
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}, Store: dsn, Grace: "1s"}.yaml() +
		"replication:\n  heartbeat: 500ms\n  lease: 2s\n"
	a := startHITLCoordinator(t, cfg)
	b := startHITLCoordinator(t, cfg)

	before := peerCallLog(t, peer)
	thread, live, _, _ := startSlowDelegation(t, a.URL, "fence-a2a", 2)
	defer live.Body.Close()
	tasks := newTasks(before, peerCallLog(t, peer))
	require.Len(t, tasks, 1, "one task at the peer")
	task := tasks[0]

	pid := a.p.cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()

	// The other replica takes the run over and follows the task by id (it subscribes).
	deadline := time.Now().Add(30 * time.Second)
	for {
		pc := peerCallLog(t, peer)
		if countOf(pc.Subscribes, task) > countOf(before.Subscribes, task) && pc.Tasks[task] == "TASK_STATE_WORKING" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the other replica never followed the task: %+v", pc)
		time.Sleep(100 * time.Millisecond)
	}

	// The stale owner wakes while the task still runs: it must learn that it lost the run
	// and stop it here, cancelling nothing.
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	resumed = true
	waitProcLog(t, a.p, "owned by another replica now", 30*time.Second)

	frames := followRun(t, b.URL, thread, 0, 90*time.Second)
	require.Equal(t, "RUN_FINISHED", frames[len(frames)-1].Event["type"], "%v", frameTypes(frames))
	after := peerCallLog(t, peer)
	assert.NotContains(t, after.Cancels, task, "the stale owner cancelled the task the new owner follows")
	assert.Equal(t, "TASK_STATE_COMPLETED", after.Tasks[task], "the task ran to its end")
	assert.Equal(t, 1, countOf(after.Sends[len(before.Sends):], "slow"), "the task was sent once: %v", after.Sends)
	_, terminals := resultsPerCall(frames)
	assert.Equal(t, 1, terminals, "one terminal event: %v", frameTypes(frames))
	assertDense(t, frames)
	again := followRun(t, b.URL, thread, 0, 30*time.Second)
	assert.Equal(t, len(frames), len(again), "the stale owner wrote to the run's log after the takeover")
}
