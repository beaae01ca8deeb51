package integration

// End-to-end tests of cancellation (issue 4, DESIGN §10): a frontend disconnect becomes A2A
// CancelTask and MCP cancellation, the producer-side stop endpoint, and graceful shutdown,
// with the coordinator binary, the official AG-UI clients and real sub-agents and MCP
// servers. What was cancelled is always checked on the far side.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/demomcp"
)

// reasonClientGone is the coordinator's "run ended" reason after a disconnect.
const reasonClientGone = "cancelled: client disconnected"

// assertAborted checks the client side of an abortRun(): the abort fired and the client
// reported no failure and printed no warning.
func assertAborted(t *testing.T, r aguiResult) {
	t.Helper()
	assert.True(t, r.Aborted, "the client's abortRun() did not fire; events: %v", eventTypes(r.Events))
	assert.Nil(t, r.Failed, "the client failed")
	assert.Empty(t, r.Warnings, "client warnings")
	assert.Empty(t, eventsOfType(r.Events, "RUN_FINISHED"), "the run finished before the abort: %v", eventTypes(r.Events))
}

// assertRunEndedBy waits for the coordinator's "run ended" line of the thread and checks its
// reason.
func assertRunEndedBy(t *testing.T, b *baton, threadID, reason string) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		recs := b.logRecords("run ended", threadID)
		if assert.Len(c, recs, 1, "run ended lines of thread %s", threadID) {
			assert.Equal(c, reason, recs[0]["reason"])
		}
	}, eventualWait, 50*time.Millisecond)
}

// assertPeerCancelled waits until the JS peer has exactly one task that is not in before,
// and checks that it received CancelTask for it and that the task ended canceled. It
// returns the task id.
func assertPeerCancelled(t *testing.T, peer string, before map[string]string) string {
	t.Helper()
	var id string
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		tasks, cancelled := peerTasks(t, peer)
		ids := newKeys(before, tasks)
		if !assert.Len(c, ids, 1, "new tasks at the peer") {
			return
		}
		id = ids[0]
		assert.True(c, cancelled[id], "the peer got no CancelTask for task %s", id)
		assert.Equal(c, "TASK_STATE_CANCELED", tasks[id], "final state of task %s", id)
	}, eventualWait, 100*time.Millisecond)
	return id
}

// TestCancelAbortRunJSPeer: @ag-ui/client abortRun() while a delegation to the @a2a-js/sdk
// peer's slow task streams: the peer gets CancelTask for that task and the task ends
// canceled. The abort comes either as soon as the delegation starts (the task id may not be
// known yet) or once the sub-agent's text streams (the id is known).
func TestCancelAbortRunJSPeer(t *testing.T) {
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
	for _, lane := range lanes {
		for _, on := range []string{"SUBAGENT_STARTED", "TEXT_MESSAGE_CONTENT"} {
			t.Run(lane+"/"+on, func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				job := userJob("abort-peer", "peer: slow please")
				job["abortOnEvent"] = on
				r := runAGUIClient(t, lane, b.URL+"/agui", job)
				assertAborted(t, r)
				require.NotEmpty(t, eventsOfType(r.Events, "SUBAGENT_STARTED"), "no delegation before the abort")
				id := assertPeerCancelled(t, peer, before)
				thread := job["threadId"].(string)
				assertRunEndedBy(t, b, thread, reasonClientGone)
				recs := b.logRecords("cancelled downstream", thread)
				if assert.Len(t, recs, 1, "cancelled downstream lines") {
					assert.Equal(t, "a2a_task", recs[0]["kind"])
					assert.Equal(t, "peer", recs[0]["name"])
					assert.Equal(t, id, recs[0]["task_id"])
					assert.Equal(t, "cancelled", recs[0]["result"])
				}
			})
		}
	}
}

// TestCancelAbortRunDemoAgent: the same against cmd/demo-agent's research agent in slow
// mode. The demo agent has no test log: the coordinator's log names the task it cancelled,
// and GetTask on the agent shows that task canceled.
func TestCancelAbortRunDemoAgent(t *testing.T) {
	requirePeers(t)
	research := startDemoAgent(t, "research")
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "research", URL: research}}})
	for _, lane := range lanes {
		for _, on := range []string{"SUBAGENT_STARTED", "TEXT_MESSAGE_CONTENT"} {
			t.Run(lane+"/"+on, func(t *testing.T) {
				job := userJob("abort-demo", "research: slow survey of tides")
				job["abortOnEvent"] = on
				r := runAGUIClient(t, lane, b.URL+"/agui", job)
				assertAborted(t, r)
				thread := job["threadId"].(string)
				assertRunEndedBy(t, b, thread, reasonClientGone)
				recs := b.logRecords("cancelled downstream", thread)
				require.Len(t, recs, 1, "cancelled downstream lines")
				assert.Equal(t, "a2a_task", recs[0]["kind"])
				assert.Equal(t, "research", recs[0]["name"])
				assert.Equal(t, "cancelled", recs[0]["result"])
				id := recs[0]["task_id"]
				require.NotEmpty(t, id, "the log names no task id: %v", recs[0])
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				state, err := demoTaskState(ctx, research, id)
				require.NoError(t, err)
				assert.Equal(t, sdk.TaskStateCanceled, state, "the demo agent's state of task %s", id)
			})
		}
	}
}

// TestDisconnectBeforeFirstTaskEvent: the peer's "delay" verb sends nothing (not even the
// SSE headers) for 1.5 s, so the coordinator does not know the task id when the client
// disconnects; the cancel is held until the id arrives, and the task is still cancelled.
func TestDisconnectBeforeFirstTaskEvent(t *testing.T) {
	requirePeers(t)
	peer := startA2APeerEnv(t, "DELAY_MS=1500")
	model := startCancelLLM(t)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "peer", URL: peer}}})
	for _, tc := range []struct {
		name string
		lane string
		abort map[string]any
	}{
		{name: "v1/on-SUBAGENT_STARTED", lane: "v1", abort: map[string]any{"abortOnEvent": "SUBAGENT_STARTED"}},
		{name: "legacy/on-SUBAGENT_STARTED", lane: "legacy", abort: map[string]any{"abortOnEvent": "SUBAGENT_STARTED"}},
		{name: "v1/after-300ms", lane: "v1", abort: map[string]any{"abortAfterMs": 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := peerTasks(t, peer)
			job := userJob("abort-delay", "peer: delay then stream")
			for k, v := range tc.abort {
				job[k] = v
			}
			r := runAGUIClient(t, tc.lane, b.URL+"/agui", job)
			assertAborted(t, r)
			require.NotEmpty(t, eventsOfType(r.Events, "SUBAGENT_STARTED"), "the abort came before the delegation started")
			id := assertPeerCancelled(t, peer, before)
			thread := job["threadId"].(string)
			assertRunEndedBy(t, b, thread, reasonClientGone)
			recs := b.logRecords("cancelled downstream", thread)
			if assert.Len(t, recs, 1) {
				assert.Equal(t, id, recs[0]["task_id"], "the held cancel names the task that arrived later")
				assert.Equal(t, "cancelled", recs[0]["result"])
			}
		})
	}
}

