package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPServerThreeLevels: the official TypeScript client → Baton A (MCP server, agent
// tool "b") → Baton B (A2A server, its model delegating to "peer") → the A2A JS SDK peer.
// The answer comes back up; a question at the bottom reaches the MCP client as an
// elicitation and the answer goes down once; baton/depth grows by one at each level (the
// client claims 1 as a calling Baton would: B receives 2, the peer 3); and an abort at the
// top (notifications/cancelled) cancels down to the bottom: the peer gets exactly one
// CancelTask, and the tasks at the peer and at B end canceled.
func TestMCPServerThreeLevels(t *testing.T) {
	t.Parallel()
	peer := startA2APeerEnv(t)
	model := startA2AModel(t)
	b := startA2ABaton(t, model.URL, "baton-b", agentEntry{Name: "peer", URL: peer})
	cfg := testConfig{LLMURL: model.URL, Agents: []agentEntry{{Name: "b", URL: b, InputRequired: "ask_user"}}}.yaml() +
		"mcp_server:\n  enabled: true\n"
	a := startCoordinator(t, cfg)
	bc := newA2AClient(t, b, "jsonrpc")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bBefore := bTasks(ctx, t, bc)

	depth := map[string]any{"baton/depth": 1}
	rep := runMCPClient(t, map[string]any{"url": a + "/mcp", "elicit": "blue", "steps": []map[string]any{
		{"op": "call", "tool": "b", "args": map[string]any{"prompt": "peer: complete the report"}, "meta": depth},
		{"op": "call", "tool": "b", "args": map[string]any{"prompt": "peer: input please"}},
		{"op": "abortWhen", "tool": "b", "args": map[string]any{"prompt": "peer: slow please"},
			"waitUrl": peer + "/test/log", "waitState": "TASK_STATE_WORKING"},
	}})
	s := rep.Steps

	require.Nil(t, s[0].Error, "%+v", s[0].Error)
	assert.False(t, s[0].Result.IsError, s[0].text())
	assert.Contains(t, s[0].text(), modelDoneText, "B's answer reaches the MCP client")

	require.Nil(t, s[1].Error, "%+v", s[1].Error)
	assert.False(t, s[1].Result.IsError, s[1].text())
	require.Len(t, rep.Elicited, 1, "the bottom's question is asked once, at the top")
	assert.Contains(t, rep.Elicited[0]["message"], "what colour?")

	assert.True(t, s[2].Aborted, "the slow call was aborted: %+v", s[2])
	require.NotNil(t, s[2].Error)

	// The abort went down: one CancelTask at the bottom, the bottom and B's task canceled.
	var peerTaskIDs []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cancels, tasks := peerLog(t, peer)
		if assert.Len(c, cancels, 1, "one CancelTask reached the peer") {
			assert.Equal(c, "TASK_STATE_CANCELED", tasks[cancels[0]])
		}
		peerTaskIDs = peerTaskIDs[:0]
		for id := range tasks {
			peerTaskIDs = append(peerTaskIDs, id)
		}
	}, eventualWait, 20*time.Millisecond)
	require.Len(t, peerTaskIDs, 3, "one task per call at the bottom")
	followUps := peerFollowUps(t, peer)
	_, tasks := peerLog(t, peer)
	for id, state := range tasks {
		if state == "TASK_STATE_COMPLETED" && followUps[id] > 0 {
			assert.Equal(t, 1, followUps[id], "the answer reached the bottom once")
		}
	}
	var bStates []a2a.TaskState
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		now := bTasks(ctx, t, bc)
		bStates = bStates[:0]
		for _, id := range newTaskIDs(bBefore, now) {
			bStates = append(bStates, now[id])
		}
		assert.Contains(c, bStates, a2a.TaskStateCanceled)
	}, eventualWait, 50*time.Millisecond, "B's task of the aborted call ends canceled: %v", bStates)

	// baton/depth at each level: what the first call's message carried at B and at the peer.
	bDepths := messageDepths(ctx, t, bc, newTaskIDs(bBefore, bTasks(ctx, t, bc)), "complete the report")
	assert.Equal(t, []float64{2}, bDepths, "B received the client's depth plus one")
	pc := peerClient(t, peer)
	peerDepths := messageDepths(ctx, t, pc, peerTaskIDs, "complete the report")
	assert.Equal(t, []float64{3}, peerDepths, "the peer received B's run depth, one more again")
}

// peerClient is a2a-go's JSON-RPC client of the JS peer.
func peerClient(t *testing.T, peer string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(peer+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy(); hc.CloseIdleConnections() })
	return c
}

// messageDepths returns the baton/depth of the user messages, among the tasks ids, whose
// text contains word.
func messageDepths(ctx context.Context, t *testing.T, c *a2aclient.Client, ids []string, word string) []float64 {
	t.Helper()
	var out []float64
	for _, id := range ids {
		task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
		require.NoError(t, err)
		for _, m := range task.History {
			if m == nil || m.Role != a2a.MessageRoleUser {
				continue
			}
			var text strings.Builder
			for _, p := range m.Parts {
				if tx, ok := p.Content.(a2a.Text); ok {
					text.WriteString(string(tx))
				}
			}
			if !strings.Contains(text.String(), word) {
				continue
			}
			d, _ := m.Metadata["baton/depth"].(float64)
			out = append(out, d)
		}
	}
	return out
}
