package integration

// Nesting limits (DESIGN §9c): two Batons that list each other as agents cannot recurse
// past server.max_depth, and the calls of one conversation are one thread at the callee.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// startMutualBatons starts Batons A and B, each serving A2A and listing the other as agent
// "other", on one fake model; extra is added to both configs' server section.
func startMutualBatons(t *testing.T, extra string) (a, b string, model *fakellm.Server) {
	t.Helper()
	return startMutualBatonsWith(t, extra, extra)
}

// startMutualBatonsWith is startMutualBatons with A's and B's own server settings.
func startMutualBatonsWith(t *testing.T, extraA, extraB string) (a, b string, model *fakellm.Server) {
	t.Helper()
	m := startA2AModel(t)
	portA, portB := freePort(t), freePort(t)
	cfg := func(name string, own, peer int, extra string) string {
		y := testConfig{LLMURL: m.URL, Agents: []agentEntry{{Name: "other", URL: "http://127.0.0.1:" + strconv.Itoa(peer), InputRequired: "ask_user"}}}.yaml()
		y = strings.Replace(y, "server:\n", "server:\n"+extra, 1)
		return "listen: 127.0.0.1:" + strconv.Itoa(own) + "\n" + y + a2aServerYAML(name)
	}
	a = startCoordinator(t, cfg("baton-a", portA, portB, extraA))
	b = startCoordinator(t, cfg("baton-b", portB, portA, extraB))
	return a, b, m
}

// TestA2ANestingDepth: one user message that would bounce between A and B for ever makes
// max_depth levels of runs; the deepest call gets [REFUSED:max_depth], the levels above
// complete, and nothing else is blocked (no [UNREACHABLE], other conversations go on).
func TestA2ANestingDepth(t *testing.T) {
	t.Parallel()
	const maxDepth = 3
	a, _, m := startMutualBatons(t, fmt.Sprintf("  max_depth: %d\n", maxDepth))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	evs := aguiRun(ctx, t, a, runInput(newThreadID("deep"), "d1", strings.Repeat("other: ", 8)+"bottom"))
	outcome, _ := finished(evs)
	require.Equal(t, "success", outcome, "events: %v", eventTypes(evs))

	var refused, completed, other []string
	for _, content := range toolMessagesSeen(m) {
		switch {
		case strings.HasPrefix(content, "[REFUSED:max_depth]\n"):
			refused = append(refused, content)
		case strings.HasPrefix(content, "[COMPLETED]\n"):
			completed = append(completed, content)
		default:
			other = append(other, content)
		}
	}
	assert.Len(t, refused, 1, "the deepest call is refused")
	assert.Len(t, completed, maxDepth-1, "every level above completes: %d levels of runs", maxDepth)
	assert.Empty(t, other, "no other result (no [UNREACHABLE], no [REJECTED])")
	if len(refused) == 1 {
		assert.Contains(t, refused[0], "server.max_depth")
	}

	// Nothing is left blocked: another conversation delegates as before.
	evs = aguiRun(ctx, t, a, runInput(newThreadID("after"), "a1", "other: hello"))
	outcome, _ = finished(evs)
	require.Equal(t, "success", outcome, "events: %v", eventTypes(evs))
	found := false
	for _, content := range toolMessagesSeen(m) {
		found = found || strings.HasPrefix(content, "[COMPLETED]\n") && strings.Contains(content, "not <agent>: <prompt>")
	}
	assert.True(t, found, "the plain call completed at B")
}

// TestA2ANestingOneThread: N delegations from one conversation are one thread (one A2A
// context) at the callee.
func TestA2ANestingOneThread(t *testing.T) {
	t.Parallel()
	a, b, _ := startMutualBatons(t, "")
	bc := newA2AClient(t, b, "jsonrpc")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	before := bTasks(ctx, t, bc)
	thread := newThreadID("one")
	const n = 3
	for i := range n {
		evs := aguiRun(ctx, t, a, runInput(thread, fmt.Sprintf("r%d", i), fmt.Sprintf("other: call %d", i)))
		outcome, _ := finished(evs)
		require.Equal(t, "success", outcome, "events: %v", eventTypes(evs))
	}
	ids := newTaskIDs(before, bTasks(ctx, t, bc))
	require.Len(t, ids, n, "one task per delegation")
	contexts := map[string]bool{}
	for _, id := range ids {
		task, err := bc.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
		require.NoError(t, err)
		assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
		contexts[task.ContextID] = true
	}
	assert.Len(t, contexts, 1, "one context, so one thread at B")
}

// TestA2ANestingThreadCap: a caller at the callee's thread cap is refused with a rejected
// task that says how to free threads: the caller's model reads [REJECTED] with that
// advice, never [UNREACHABLE].
func TestA2ANestingThreadCap(t *testing.T) {
	t.Parallel()
	a, _, m := startMutualBatonsWith(t, "", "  max_threads_per_principal: 1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range 2 {
		evs := aguiRun(ctx, t, a, runInput(newThreadID("cap"), "c1", "other: hello"))
		outcome, _ := finished(evs)
		require.Equal(t, "success", outcome, "conversation %d: events: %v", i, eventTypes(evs))
	}
	var rejected, completed, other []string
	for _, content := range toolMessagesSeen(m) {
		switch {
		case strings.HasPrefix(content, "[REJECTED]\n"):
			rejected = append(rejected, content)
		case strings.HasPrefix(content, "[COMPLETED]\n"):
			completed = append(completed, content)
		default:
			other = append(other, content)
		}
	}
	assert.Len(t, completed, 1, "the first conversation has its thread at B")
	assert.Empty(t, other, "no [UNREACHABLE]")
	if assert.Len(t, rejected, 1, "the second is refused at B's cap") {
		assert.Contains(t, rejected[0], "DELETE /agui/threads/")
		assert.Contains(t, rejected[0], "thread_retention")
	}
}
