package integration

// The A2A front door held against a second principal, through the official @a2a-js/sdk
// client: another principal's task is one that does not exist, for SubscribeToTask and
// for SendMessage, while it runs and after.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// doorTokens are the static bearer tokens of the door tests: two principals.
const doorTokens = "door-alice-token,door-bob-token"

// startDoorModel is the fake model for the door tests: "slow: <words>" answers the words
// one chunk per 50 ms, "long: N" N bytes in 4-character deltas; anything else is
// testModel's.
func startDoorModel(t testing.TB) *fakellm.Server {
	t.Helper()
	s := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == "user" {
				if words, ok := strings.CutPrefix(m.Content, "slow:"); ok {
					return fakellm.Reply{Text: strings.TrimSpace(words), Delay: 50 * time.Millisecond}
				}
				if n, ok := strings.CutPrefix(m.Content, "long: "); ok {
					size, _ := strconv.Atoi(n)
					return fakellm.Reply{Text: strings.Repeat("abc ", size/4)}
				}
				break
			}
		}
		return testModel(req)
	})
	t.Cleanup(s.Close)
	return s
}

// startDoorBaton starts a coordinator serving A2A behind doorTokens, with more server
// keys (indented under server:) when given.
func startDoorBaton(t *testing.T, llmURL, serverKeys string) string {
	t.Helper()
	base, _, _ := startCoordinatorEnv(t, "server:\n  shutdown_grace: 3s\n  auth_tokens_env: DOOR_TOKENS\n"+serverKeys+
		"llm:\n  provider: openai\n  base_url: \""+llmURL+"\"\n  model: fake-model\n  api_key_env: "+llmKeyEnv+"\n"+
		a2aServerYAML("door")+"store: \"memory:\"\n", "DOOR_TOKENS="+doorTokens)
	return base
}

// TestA2ADoorOtherPrincipal: Bob, knowing Alice's task id, gets exactly the answers of a
// task that does not exist from SubscribeToTask, SendMessage and SendStreamingMessage,
// while the task runs on this replica and after Alice cancelled it; he never sees its
// answer or learns whether it is live.
func TestA2ADoorOtherPrincipal(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := startDoorModel(t)
	base := startDoorBaton(t, model.URL, "")
	alice, bob, _ := strings.Cut(doorTokens, ",")
	for _, wire := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(wire, func(t *testing.T) {
			r := runA2AJSJob(t, map[string]any{"base": base, "wire": wire, "scenario": "intruder", "token": alice, "other": bob})
			require.NotEmpty(t, r["taskId"], "%v", r)
			none, _ := r["none"].(map[string]any)
			require.Len(t, none, 3, "%v", r)
			// A task that does not exist is an error, or (the SDK's HTTP+JSON stream, which
			// does not raise an error event) an empty stream: no state, no answer.
			assert.NotContains(t, none["send"], "answered", "send to a task that does not exist")
			for _, k := range []string{"subscribe", "sendStream"} {
				assert.NotContains(t, none[k], "TASK_STATE", "%s of a task that does not exist", k)
			}
			for _, when := range []string{"live", "ended"} {
				got, _ := r[when].(map[string]any)
				assert.Equal(t, none, got, "%s: bob's answers for alice's task", when)
			}
			assert.Equal(t, "TASK_STATE_CANCELED", r["cancelled"])
		})
	}
}

// TestA2ADoorLongAnswer: a 128 KiB answer streamed by the model in 4-character deltas
// reaches the JS client whole, in a few appended chunks (at most one per 16 KiB or 50 ms),
// not 32,768 artifact events each of which copied the whole task.
func TestA2ADoorLongAnswer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := startDoorModel(t)
	base := startDoorBaton(t, model.URL, "")
	alice, _, _ := strings.Cut(doorTokens, ",")
	const size = 128 << 10
	for _, wire := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(wire, func(t *testing.T) {
			r := runA2AJSJob(t, map[string]any{"base": base, "wire": wire, "scenario": "long", "size": size, "token": alice})
			assert.Equal(t, "TASK_STATE_COMPLETED", r["state"], "%v", r)
			assert.Equal(t, float64(size), r["length"])
			assert.Equal(t, true, r["answer"], "the answer, in order")
			events, _ := r["events"].(float64)
			ms, _ := r["ms"].(float64)
			// The task, working, completed, and the chunks: one per 16 KiB, or per 50 ms
			// the answer took (a rate, not a time limit: a slow machine only allows more).
			assert.LessOrEqual(t, events, 4+float64(size/(16<<10))+ms/50, "%v", r)
			assert.Less(t, events, float64(size/4/10), "far fewer events than deltas: %v", r)
		})
	}
}

// TestA2ADoorAdmission: 40 messages at once against server.max_active_runs: 5 start
// exactly 5 runs; the others are refused with a server error that says to retry, never
// -32600 invalid request.
func TestA2ADoorAdmission(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := startDoorModel(t)
	base := startDoorBaton(t, model.URL, "  max_active_runs: 5\n")
	alice, _, _ := strings.Cut(doorTokens, ",")
	r := runA2AJSJob(t, map[string]any{"base": base, "wire": "JSONRPC", "scenario": "flood", "count": 40, "token": alice})
	assert.Equal(t, float64(5), r["started"], "%v", r)
	errs, _ := r["errors"].([]any)
	assert.Len(t, errs, 35)
	for _, e := range errs {
		s, _ := e.(string)
		assert.Contains(t, s, "retry")
		assert.NotContains(t, s, "-32600")
		assert.NotContains(t, strings.ToLower(s), "invalid request")
	}
}

// TestA2ADoorFollowersPerPrincipal: server.max_followers_per_principal counts one
// principal's follow streams across its runs and across both surfaces: with Alice's two
// AG-UI reconnect streams open, her third (AG-UI) is 429 TOO_MANY_FOLLOWERS and her
// SubscribeToTask through the JS client is refused with the busy server error; Bob, under
// his own cap, follows his task.
func TestA2ADoorFollowersPerPrincipal(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := startDoorModel(t)
	base := startDoorBaton(t, model.URL, "  max_followers_per_principal: 2\n")
	alice, bob, _ := strings.Cut(doorTokens, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := func(method, url, body string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	threadID, runID := newThreadID("door"), newThreadID("run")
	b, _ := json.Marshal(runInput(threadID, runID, "slow: "+strings.Repeat("word ", 200)))
	live := get(http.MethodPost, base+"/agui", string(b))
	defer live.Body.Close()
	require.Equal(t, http.StatusOK, live.StatusCode)
	_, err := readSSEWhile(live.Body, func(ev map[string]any) bool { return ev["type"] != "RUN_STARTED" })
	require.NoError(t, err)
	events := base + "/agui/threads/" + threadID + "/runs/" + runID + "/events"
	for range 2 {
		f := get(http.MethodGet, events, "")
		defer f.Body.Close()
		require.Equal(t, http.StatusOK, f.StatusCode)
		_, err := readSSEWhile(f.Body, func(ev map[string]any) bool { return ev["type"] != "RUN_STARTED" })
		require.NoError(t, err)
	}
	third := get(http.MethodGet, events, "")
	var e struct{ Error string }
	require.NoError(t, json.NewDecoder(third.Body).Decode(&e))
	third.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, third.StatusCode)
	assert.Equal(t, "TOO_MANY_FOLLOWERS", e.Error)

	r := runA2AJSJob(t, map[string]any{"base": base, "wire": "JSONRPC", "scenario": "capped", "token": alice, "other": bob})
	owner, _ := r["owner"].(string)
	assert.NotContains(t, owner, "answered", "alice's third follow stream, on A2A")
	assert.Contains(t, owner, "retry")
	assert.Contains(t, r["other"], "answered", "bob's own cap")
}
