package integration

// Baton as an A2A agent (DESIGN §9c), end to end over real processes: the coordinator binary
// with a2a_server enabled, the JS SDK peer as its sub-agent, the fake model, and a2a-go's
// client on both 1.0 bindings (JSON-RPC and HTTP+JSON) against Baton.

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// a2aWires are the 1.0 bindings Baton serves, by the path of their endpoint.
var a2aWires = map[string]struct {
	path     string
	protocol a2a.TransportProtocol
}{
	"jsonrpc": {"/a2a", a2a.TransportProtocolJSONRPC},
	"rest":    {"/a2a/v1", a2a.TransportProtocolHTTPJSON},
}

// a2aServerYAML enables the A2A server in a test config.
func a2aServerYAML(name string) string {
	return "a2a_server:\n  enabled: true\n  name: " + name + "\n"
}

// startA2ABaton starts a coordinator that serves A2A, with agents in ask_user mode.
func startA2ABaton(t testing.TB, llmURL, name string, agents ...agentEntry) string {
	t.Helper()
	for i := range agents {
		agents[i].InputRequired = orDefault(agents[i].InputRequired, "ask_user")
	}
	return startCoordinator(t, testConfig{LLMURL: llmURL, Agents: agents}.yaml()+a2aServerYAML(name))
}

// startA2AModel is the fake model with testModel's script and one more: a user text that
// starts with "refuse" makes the model refuse, which hands the run off (a failed task).
func startA2AModel(t testing.TB) *fakellm.Server {
	t.Helper()
	s := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == "user" {
				if strings.HasPrefix(m.Content, "refuse") {
					return fakellm.Reply{Refusal: "I will not do that."}
				}
				break
			}
		}
		return testModel(req)
	})
	t.Cleanup(s.Close)
	return s
}

// newA2AClient is a2a-go's client for one of Baton's bindings.
func newA2AClient(t testing.TB, base, wire string) *a2aclient.Client {
	t.Helper()
	w := a2aWires[wire]
	hc := &http.Client{}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(base+w.path, w.protocol)},
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy(); hc.CloseIdleConnections() })
	return c
}

// a2aRun is what a streaming call showed.
type a2aRun struct {
	TaskID    a2a.TaskID
	ContextID string
	States    []a2a.TaskState
	Artifact  string
	Last      *a2a.TaskStatus
	Err       error
}

// streamA2A sends text (on task, when set) over a streaming call and reads it to the end,
// or until stop says so.
func streamA2A(ctx context.Context, c *a2aclient.Client, msg *a2a.Message, stop func(a2aRun) bool) a2aRun {
	var r a2aRun
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			r.Err = err
			return r
		}
		r.add(ev)
		if stop != nil && stop(r) {
			return r
		}
	}
	return r
}

func (r *a2aRun) add(ev a2a.Event) {
	switch v := ev.(type) {
	case *a2a.Task:
		r.TaskID, r.ContextID = v.ID, v.ContextID
		r.States = append(r.States, v.Status.State)
		r.Last = &v.Status
	case *a2a.TaskStatusUpdateEvent:
		r.TaskID, r.ContextID = v.TaskID, v.ContextID
		r.States = append(r.States, v.Status.State)
		r.Last = &v.Status
	case *a2a.TaskArtifactUpdateEvent:
		for _, p := range v.Artifact.Parts {
			r.Artifact += p.Text()
		}
	}
}

func (r a2aRun) state() a2a.TaskState {
	if r.Last == nil {
		return ""
	}
	return r.Last.State
}

func taskArtifactText(t *a2a.Task) string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

func statusText(s *a2a.TaskStatus) string {
	if s == nil || s.Message == nil {
		return ""
	}
	var out []string
	for _, p := range s.Message.Parts {
		if t := p.Text(); t != "" {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n")
}

func statusData(s *a2a.TaskStatus) []map[string]any {
	if s == nil || s.Message == nil {
		return nil
	}
	var out []map[string]any
	for _, p := range s.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			out = append(out, d)
		}
	}
	return out
}

func userMessage(text string) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
}

// TestA2AServerCard: the card names Baton, its skills (the configured agents), both 1.0
// bindings and the 0.3 ones, streaming, and no push notifications.
func TestA2AServerCard(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := startFakeLLM(t)
	base := startA2ABaton(t, model.URL, "inner-baton", agentEntry{Name: "peer", URL: "http://127.0.0.1:9"})
	resp, err := http.Get(base + "/.well-known/agent-card.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var card map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
	assert.Equal(t, "inner-baton", card["name"])
	assert.Equal(t, map[string]any{"streaming": true}, card["capabilities"])
	b, _ := json.Marshal(card)
	for _, want := range []string{base + "/a2a", base + "/a2a/v1", base + "/a2a/v0/jsonrpc", `"peer"`} {
		assert.Contains(t, string(b), want)
	}
}

// TestA2AServerOff: without a2a_server.enabled nothing is served.
func TestA2AServerOff(t *testing.T) {
	t.Parallel()
	model := startFakeLLM(t)
	base := startCoordinator(t, coordinatorYAML(model.URL))
	for _, p := range []string{"/.well-known/agent-card.json", "/a2a/v1/tasks"} {
		resp, err := http.Get(base + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.NotEqual(t, http.StatusOK, resp.StatusCode, p)
	}
	resp, err := http.Post(base+"/a2a", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
	require.NoError(t, err)
	resp.Body.Close()
	// No route: the chat page's catch-all answers GET only.
	assert.Contains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, resp.StatusCode)
}

// TestA2AServer drives Baton's A2A surface with a2a-go's client on both bindings:
// completed, failed, input-required answered (and a bad answer refused), cancel confirmed at
// the peer, resubscribe after a dropped stream, and ListTasks by contextId.
func TestA2AServer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startA2AModel(t)
	base := startA2ABaton(t, model.URL, "inner-baton", agentEntry{Name: "peer", URL: peer})

	for _, wire := range []string{"jsonrpc", "rest"} {
		t.Run(wire, func(t *testing.T) {
			c := newA2AClient(t, base, wire)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			t.Run("completed", func(t *testing.T) {
				r := streamA2A(ctx, c, userMessage("peer: complete"), nil)
				require.NoError(t, r.Err)
				assert.Equal(t, a2a.TaskStateCompleted, r.state(), "states %v", r.States)
				assert.Equal(t, modelDoneText, r.Artifact)
				got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: r.TaskID})
				require.NoError(t, err)
				assert.Equal(t, a2a.TaskStateCompleted, got.Status.State)
			})

			t.Run("input-required answered", func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				r := streamA2A(ctx, c, userMessage("peer: input"), nil)
				require.NoError(t, r.Err)
				require.Equal(t, a2a.TaskStateInputRequired, r.state(), "states %v", r.States)
				assert.Contains(t, statusText(r.Last), "what colour?")
				qs := statusData(r.Last)
				require.Len(t, qs, 1, "one DataPart per question")
				assert.NotEmpty(t, qs[0]["interruptId"])
				assert.Equal(t, "input_required", qs[0]["reason"])
				assert.NotNil(t, qs[0]["responseSchema"])

				task := &a2a.Task{ID: r.TaskID, ContextID: r.ContextID}
				// A DataPart that names no open question is refused; the task keeps waiting.
				bad := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewDataPart(map[string]any{"interruptId": "nope", "payload": map[string]any{"text": "x"}}))
				r2 := streamA2A(ctx, c, bad, nil)
				require.NoError(t, r2.Err)
				assert.Equal(t, a2a.TaskStateInputRequired, r2.state())
				assert.Contains(t, statusText(r2.Last), "not accepted")

				answer := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("blue"))
				r3 := streamA2A(ctx, c, answer, nil)
				require.NoError(t, r3.Err)
				assert.Equal(t, a2a.TaskStateCompleted, r3.state(), "states %v", r3.States)
				tasks, _ := peerTasks(t, peer)
				ids := newKeys(before, tasks)
				if assert.Len(t, ids, 1) {
					assert.Equal(t, "TASK_STATE_COMPLETED", tasks[ids[0]])
				}
			})

			t.Run("failed", func(t *testing.T) {
				r := streamA2A(ctx, c, userMessage("refuse: this"), nil)
				require.NoError(t, r.Err)
				assert.Equal(t, a2a.TaskStateFailed, r.state(), "states %v", r.States)
				assert.NotEmpty(t, statusText(r.Last), "the explanation")
			})

			t.Run("cancel", func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				r := streamA2A(ctx, c, &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, Parts: []*a2a.Part{a2a.NewTextPart("peer: slow")}},
					func(r a2aRun) bool { return r.TaskID != "" })
				require.NoError(t, r.Err)
				assert.EventuallyWithT(t, func(c *assert.CollectT) {
					tasks, _ := peerTasks(c, peer)
					assert.Len(c, newKeys(before, tasks), 1)
				}, eventualWait, 50*time.Millisecond)
				got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: r.TaskID})
				require.NoError(t, err)
				assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
				// Canceled only once the peer confirmed: its task is canceled already.
				tasks, cancelled := peerTasks(t, peer)
				ids := newKeys(before, tasks)
				require.Len(t, ids, 1)
				assert.Equal(t, "TASK_STATE_CANCELED", tasks[ids[0]])
				assert.True(t, cancelled[ids[0]], "the peer got CancelTask")
			})

			t.Run("resubscribe after a dropped stream", func(t *testing.T) {
				sctx, drop := context.WithCancel(ctx)
				r := streamA2A(sctx, c, userMessage("peer: drop"), func(r a2aRun) bool { return r.TaskID != "" })
				drop()
				require.NoError(t, r.Err)
				// The dropped call did not cancel the task: it completes, seen again through
				// SubscribeToTask (or, if it is over already, GetTask).
				var again a2aRun
				for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: r.TaskID}) {
					require.NoError(t, err, "the task runs for ~2 s after the drop: it is live")
					again.add(ev)
				}
				assert.Equal(t, a2a.TaskStateCompleted, again.state(), "resubscribed: %v", again.States)
				got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: r.TaskID})
				require.NoError(t, err)
				assert.Equal(t, a2a.TaskStateCompleted, got.Status.State)
				assert.Equal(t, modelDoneText, taskArtifactText(got), "the answer, once")
			})

			t.Run("ListTasks", func(t *testing.T) {
				first := streamA2A(ctx, c, userMessage("peer: complete"), nil)
				require.NoError(t, first.Err)
				m := userMessage("peer: complete")
				m.ContextID = first.ContextID
				second := streamA2A(ctx, c, m, nil)
				require.NoError(t, second.Err)
				assert.Equal(t, first.ContextID, second.ContextID)
				page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: first.ContextID, PageSize: 1})
				require.NoError(t, err)
				require.Len(t, page.Tasks, 1)
				assert.NotEmpty(t, page.NextPageToken)
				next, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: first.ContextID, PageSize: 1, PageToken: page.NextPageToken})
				require.NoError(t, err)
				require.Len(t, next.Tasks, 1)
				assert.ElementsMatch(t, []a2a.TaskID{first.TaskID, second.TaskID}, []a2a.TaskID{page.Tasks[0].ID, next.Tasks[0].ID})
			})
		})
	}
}

// runA2AJSClient runs peers/a2a-client.mjs (the @a2a-js/sdk client) for one scenario.
func runA2AJSClient(t *testing.T, base, wire, scenario string) map[string]any {
	t.Helper()
	return runA2AJSJob(t, map[string]any{"base": base, "wire": wire, "scenario": scenario})
}

// runA2AJSJob runs peers/a2a-client.mjs for a job with more fields than runA2AJSClient's
// (bearer tokens, say).
func runA2AJSJob(t *testing.T, fields map[string]any) map[string]any {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	job, _ := json.Marshal(fields)
	wire, scenario := fields["wire"], fields["scenario"]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "a2a-client.mjs"), string(job))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "a2a-client %s %s: %s", wire, scenario, stderr.String())
	var res map[string]any
	require.NoError(t, json.Unmarshal(lastLine(out), &res), "a2a-client output: %s", out)
	return res
}

// TestA2AServerJSClient drives Baton's A2A surface with the A2A JS SDK's client on both
// bindings: completed, failed, input-required answered, cancel, resubscribe after a dropped
// stream, ListTasks.
func TestA2AServerJSClient(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := startA2AModel(t)
	base := startA2ABaton(t, model.URL, "inner-baton", agentEntry{Name: "peer", URL: peer})
	for _, wire := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(wire, func(t *testing.T) {
			t.Run("completed", func(t *testing.T) {
				r := runA2AJSClient(t, base, wire, "complete")
				assert.Equal(t, "TASK_STATE_COMPLETED", r["state"])
				assert.Equal(t, modelDoneText, r["artifact"])
			})
			t.Run("failed", func(t *testing.T) {
				r := runA2AJSClient(t, base, wire, "fail")
				assert.Equal(t, "TASK_STATE_FAILED", r["state"])
				assert.NotEmpty(t, r["text"])
			})
			t.Run("input-required answered", func(t *testing.T) {
				r := runA2AJSClient(t, base, wire, "input")
				assert.Equal(t, "TASK_STATE_INPUT_REQUIRED", r["asked"])
				assert.Contains(t, r["question"], "what colour?")
				data, _ := r["data"].([]any)
				if assert.Len(t, data, 1) {
					q, _ := data[0].(map[string]any)
					assert.NotEmpty(t, q["interruptId"])
					assert.NotNil(t, q["responseSchema"])
				}
				assert.Equal(t, "TASK_STATE_COMPLETED", r["state"])
			})
			t.Run("cancel", func(t *testing.T) {
				before, _ := peerTasks(t, peer)
				r := runA2AJSClient(t, base, wire, "cancel")
				assert.Equal(t, "TASK_STATE_CANCELED", r["state"], "%v", r)
				tasks, cancelled := peerTasks(t, peer)
				ids := newKeys(before, tasks)
				// The peer's task may not have been created when the cancel came; if it
				// was, it was cancelled before Baton reported canceled.
				for _, id := range ids {
					assert.Equal(t, "TASK_STATE_CANCELED", tasks[id])
					assert.True(t, cancelled[id])
				}
			})
			t.Run("resubscribe", func(t *testing.T) {
				r := runA2AJSClient(t, base, wire, "resubscribe")
				assert.Equal(t, "TASK_STATE_COMPLETED", r["state"], "%v", r)
				assert.Nil(t, r["resubscribeError"], "the task runs for ~2 s after the drop: it is live")
				states, _ := r["resubscribed"].([]any)
				if assert.NotEmpty(t, states) {
					assert.Equal(t, "TASK_STATE_COMPLETED", states[len(states)-1])
				}
			})
			t.Run("ListTasks", func(t *testing.T) {
				r := runA2AJSClient(t, base, wire, "list")
				ctxs, _ := r["contexts"].([]any)
				require.Len(t, ctxs, 2)
				assert.Equal(t, ctxs[0], ctxs[1])
				pages, _ := r["pages"].([]any)
				var got []any
				for _, p := range pages {
					ids, _ := p.([]any)
					assert.Len(t, ids, 1, "one task per page")
					got = append(got, ids...)
				}
				assert.ElementsMatch(t, r["taskIds"], got)
			})
		})
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestA2AServerAuth: with bearer tokens configured, the card (public) declares the bearer
// scheme, an A2A call without a token is 401 with an RFC 6750 challenge, and one with a
// token runs.
func TestA2AServerAuth(t *testing.T) {
	t.Setenv("BATON_TEST_A2A_TOKENS", "outer-secret")
	model := startFakeLLM(t)
	base := startCoordinator(t, "server:\n  shutdown_grace: 3s\n  auth_tokens_env: BATON_TEST_A2A_TOKENS\n"+
		"llm:\n  provider: openai\n  base_url: \""+model.URL+"\"\n  model: fake-model\n  api_key_env: "+llmKeyEnv+"\n"+
		a2aServerYAML("guarded")+"store: \"memory:\"\n")

	resp, err := http.Get(base + "/.well-known/agent-card.json")
	require.NoError(t, err)
	var card map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
	resp.Body.Close()
	b, _ := json.Marshal(card["securitySchemes"])
	assert.Contains(t, string(b), `"Bearer"`)

	resp, err = http.Post(base+"/a2a", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")

	hc := &http.Client{Transport: bearerTransport{"outer-secret"}}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(base+"/a2a", a2a.TransportProtocolJSONRPC)}, a2aclient.WithJSONRPCTransport(hc))
	require.NoError(t, err)
	defer c.Destroy()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := streamA2A(ctx, c, userMessage("hello"), nil)
	require.NoError(t, r.Err)
	assert.Equal(t, a2a.TaskStateCompleted, r.state())
}
