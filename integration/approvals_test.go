package integration

// End-to-end tests of approvals (DESIGN §9): a call that config approvals names is
// not sent; the run ends with a tool_call interrupt, and the resume runs it once (with
// edits), or declines it. Through the coordinator binary with the fake model, the demo MCP
// server (delete_release), server-everything (echo), the @a2a-js/sdk peer, both official
// AG-UI clients, and a recording MCP server of the test's own (go-sdk, in this process) that
// counts the calls it receives and has a tool that blocks until released, for the exactly-once
// cases: duplicate and concurrent resumes, and a SIGKILL of the coordinator while the approved
// call is out.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// approvalsYAML adds an approvals section to a config.
func approvalsYAML(cfg string, tools, agents []string) string {
	q := func(list []string) string {
		b, _ := json.Marshal(list)
		return string(b)
	}
	return cfg + "approvals:\n  tools: " + q(tools) + "\n  agents: " + q(agents) + "\n"
}

// checkApproval asserts the shape of an approval interrupt of run for a call of tool.
func checkApproval(t *testing.T, run hitlRun, in map[string]any, tool string) (callID string) {
	t.Helper()
	assert.Equal(t, "tool_call", in["reason"], "reason: %v", in)
	id, _ := in["id"].(string)
	assert.True(t, strings.HasPrefix(id, "int-"), "interrupt id %q", id)
	msg, _ := in["message"].(string)
	assert.Contains(t, msg, tool, "the message names the tool")
	_, err := time.Parse(time.RFC3339, in["expiresAt"].(string))
	assert.NoError(t, err, "expiresAt")
	callID, _ = in["toolCallId"].(string)
	start := toolCallStarts(run.Events)[callID]
	if assert.NotNil(t, start, "toolCallId %q names no TOOL_CALL_START of the run", callID) {
		assert.Equal(t, tool, start["toolCallName"])
	}
	assert.NotEmpty(t, eventWith(run.Events, "TOOL_CALL_END", "toolCallId", callID), "the call was streamed to its end")
	assert.Empty(t, toolResults(run.Events)[callID], "an unapproved call has no result")
	schema, _ := in["responseSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	assert.Equal(t, map[string]any{"type": "boolean"}, props["approved"], "responseSchema.properties.approved")
	edited, _ := props["editedArgs"].(map[string]any)
	assert.Equal(t, "object", edited["type"], "editedArgs is the tool's input schema: %v", props["editedArgs"])
	assert.Equal(t, []any{"approved"}, schema["required"])
	return callID
}

// demoMCPEnv starts the demo MCP server (HTTP) and the fake model and returns the model
// and a config with both.
func demoMCPEnv(t *testing.T) (*fakellm.Server, string) {
	t.Helper()
	requirePeers(t)
	mcpURL := startDemoMCPHTTP(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	return model, hitlEnv{llmURL: model.URL, mcp: []mcpServerEntry{{Name: "demo", URL: mcpURL}}}.yaml()
}

// payEnv starts a recording MCP server ("pay") and the fake model and returns the server
// and env's config with both.
func payEnv(t *testing.T, env hitlEnv) (*recordingMCP, string) {
	t.Helper()
	srv := startRecordingMCP(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	env.llmURL = model.URL
	env.mcp = []mcpServerEntry{{Name: "pay", URL: srv.URL + "/"}}
	return srv, env.yaml()
}

// interruptedRuns checks that a client job ran twice, the first run ending with n
// interrupts, and returns the two runs; why explains n.
func interruptedRuns(t *testing.T, res hitlJob, n int, why string) (first, second hitlRun) {
	t.Helper()
	require.Len(t, res.Runs, 2, "an interrupted run and its resume run")
	first = res.Runs[0]
	assertRun(t, first, "interrupt")
	require.Len(t, first.Interrupts, n, why)
	return first, res.Runs[1]
}

// TestApprovalsDemoMCP: the demo delete_release behind approvals, through both official
// clients: approve, approve with edits, deny with a reason, cancel, invalid edits.
func TestApprovalsDemoMCP(t *testing.T) {
	t.Parallel()
	model, cfg := demoMCPEnv(t)
	coord := startHITLCoordinator(t, approvalsYAML(cfg, []string{"demo__delete_release"}, nil))

	cases := []struct {
		name   string
		answer map[string]any
		// want is in the result of the original call; tag its first line.
		tag, want string
		// resumeError, when set, is the RUN_ERROR code of the resume run.
		resumeError string
	}{
		{"approve", resolved(map[string]any{"approved": true}), "[OK]", "Would delete release v1.0.0 of web", ""},
		{"approve with edits", resolved(map[string]any{"approved": true, "editedArgs": map[string]any{"release": "v0.9.0", "service": "api"}}), "[OK]", "Would delete release v0.9.0 of api", ""},
		{"deny with a reason", resolved(map[string]any{"approved": false, "reason": "v1.0.0 is still live"}), "[DECLINED]", "v1.0.0 is still live", ""},
		{"cancel", cancelledAnswer, "[DECLINED]", "declined", ""},
		{"invalid edits", resolved(map[string]any{"approved": true, "editedArgs": map[string]any{"release": 5}}), "", "", "INVALID_RESUME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, lane := range lanes {
				t.Run(lane, func(t *testing.T) {
					job := hitlJobOn(newThreadID("approve-"+lane), newThreadID("run"),
						hitlText(hitlCall{Name: "demo__delete_release", Args: map[string]any{"release": "v1.0.0"}}))
					job["resumeAnswers"] = map[string]any{"*": tc.answer}
					first, second := interruptedRuns(t, runHITLClient(t, lane, coord.URL, job), 1, "one approval")
					callID := checkApproval(t, first, first.Interrupts[0], "demo__delete_release")
					if tc.resumeError != "" {
						assertResumeError(t, second, tc.resumeError)
						return
					}
					assertRun(t, second, "success")
					got := checkResumed(t, second, model, callID)
					assert.True(t, strings.HasPrefix(got, tc.tag+"\n"), "result %q, want tag %s", got, tc.tag)
					assert.Contains(t, got, tc.want)
				})
			}
		})
	}
}

// TestApprovalsEverything: server-everything's echo behind approvals (stdio): nothing runs
// before the approval; the approved call's result is the echo.
func TestApprovalsEverything(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	node, entry := everythingEntry(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	cfg := hitlEnv{llmURL: model.URL, mcp: []mcpServerEntry{{Name: "everything", Command: []string{node, entry, "stdio"}}}}.yaml()
	coord := startHITLCoordinator(t, approvalsYAML(cfg, []string{"everything__ec*"}, nil))
	job := hitlJobOn(newThreadID("approve-everything"), newThreadID("run"),
		hitlText(hitlCall{Name: "everything__echo", Args: map[string]any{"message": "hello approvals"}}))
	job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"approved": true, "editedArgs": map[string]any{"message": "edited hello"}})}
	first, second := interruptedRuns(t, runHITLClient(t, "v1", coord.URL, job), 1, "one approval")
	callID := checkApproval(t, first, first.Interrupts[0], "everything__echo")
	assertRun(t, second, "success")
	got := checkResumed(t, second, model, callID)
	assert.True(t, strings.HasPrefix(got, "[OK]\n"), got)
	assert.Contains(t, got, "edited hello")
}

// TestApprovalsThreeCalls: three calls in one turn, two of which need approval: the third
// runs first, the run ends with both interrupts, and one resume answers both.
func TestApprovalsThreeCalls(t *testing.T) {
	t.Parallel()
	_, cfg := demoMCPEnv(t)
	coord := startHITLCoordinator(t, approvalsYAML(cfg, []string{"demo__delete_release"}, nil))
	for _, lane := range lanes {
		t.Run(lane, func(t *testing.T) {
			job := hitlJobOn(newThreadID("approve-three-"+lane), newThreadID("run"), hitlText(
				hitlCall{Name: "demo__delete_release", Args: map[string]any{"release": "a"}},
				hitlCall{Name: "demo__divide", Args: map[string]any{"a": 6, "b": 3}},
				hitlCall{Name: "demo__delete_release", Args: map[string]any{"release": "b"}},
			))
			job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"approved": true})}
			first, second := interruptedRuns(t, runHITLClient(t, lane, coord.URL, job), 2, "both approvals in one outcome")
			ids := []string{checkApproval(t, first, first.Interrupts[0], "demo__delete_release"), checkApproval(t, first, first.Interrupts[1], "demo__delete_release")}
			var divide string
			for id, s := range toolCallStarts(first.Events) {
				if s["toolCallName"] == "demo__divide" {
					divide = id
				}
			}
			if assert.Len(t, toolResults(first.Events)[divide], 1, "the call that needs no approval ran first") {
				assert.True(t, strings.HasPrefix(toolResults(first.Events)[divide][0], "[OK]"))
			}
			assertRun(t, second, "success")
			for _, id := range ids {
				got := toolResults(second.Events)[id]
				if assert.Len(t, got, 1, "result of %s", id) {
					assert.Contains(t, got[0], "Would delete release")
				}
			}
		})
	}
}

// TestApprovalsA2APeer: a delegation to the @a2a-js/sdk peer behind approvals.agents: the
// peer receives nothing before the approval and exactly one message after it.
func TestApprovalsA2APeer(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	peer := startA2APeerEnv(t)
	model := fakellm.Start(hitlModel)
	t.Cleanup(model.Close)
	cfg := hitlEnv{llmURL: model.URL, agents: []agentEntry{{Name: "peer", URL: peer}}}.yaml()
	coord := startHITLCoordinator(t, approvalsYAML(cfg, nil, []string{"peer"}))
	thread := newThreadID("approve-a2a")
	job := hitlJobOn(thread, newThreadID("run"), hitlText(hitlCall{Name: "peer", Args: map[string]any{"prompt": "complete"}}))
	first := runHITLClient(t, "v1", coord.URL, job)
	assertRun(t, first.hitlRun, "interrupt")
	require.Len(t, first.Interrupts, 1)
	in := first.Interrupts[0]
	callID := checkApproval(t, first.hitlRun, in, "peer")
	assert.Empty(t, peerVersions(t, peer), "nothing was sent to the peer before the approval")

	evs := postRun(t, coord.URL, approve(thread, in, true))
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "events: %v", eventTypes(evs))
	res := toolResults(evs)[callID]
	require.Len(t, res, 1, "events: %v", eventTypes(evs))
	assert.True(t, strings.HasPrefix(res[0], "[COMPLETED]"), res[0])
	assert.Len(t, peerVersions(t, peer), 1, "exactly one message after the approval")
}

// postRun posts a RunAgentInput and reads its whole stream.
func postRun(t *testing.T, base string, in map[string]any) []map[string]any {
	t.Helper()
	return postRunRetrying(t, base, in, false)
}

// postRunWhenFree is postRun that tries again while the thread is busy (409): a run of a
// killed coordinator holds its thread until its lease lapses.
func postRunWhenFree(t *testing.T, base string, in map[string]any) []map[string]any {
	t.Helper()
	return postRunRetrying(t, base, in, true)
}

// postRunRetrying is postRun, and with whileBusy postRunWhenFree: a 409 is tried again
// every 200 ms until the 60 s deadline.
func postRunRetrying(t *testing.T, base string, in map[string]any, whileBusy bool) []map[string]any {
	t.Helper()
	b := mustJSON(t, in)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		resp, err := postAGUI(ctx, base, b)
		require.NoError(t, err)
		if whileBusy && resp.StatusCode == http.StatusConflict {
			resp.Body.Close()
			select {
			case <-ctx.Done():
				t.Fatal("the thread stayed busy")
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		evs, err := readSSE(resp.Body, nil)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		return evs
	}
}

// postAtOnce posts body to every base at the same time and returns the statuses; a
// stream that is accepted is read to its end.
func postAtOnce(t *testing.T, body []byte, bases ...string) []int {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make([]int, len(bases))
	for i, base := range bases {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			resp, err := postAGUI(ctx, base, bytes.Clone(body))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			statuses[i] = resp.StatusCode
			if resp.StatusCode == http.StatusOK {
				_, err = readSSE(resp.Body, nil)
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	return statuses
}

// recordingMCP is an MCP server (go-sdk, streamable HTTP) that records the calls it gets:
// charge answers at once; hang blocks until release is closed (or its request ends).
type recordingMCP struct {
	URL     string
	mu      sync.Mutex
	calls   []string
	started chan string
	release chan struct{}
}

func startRecordingMCP(t *testing.T) *recordingMCP {
	t.Helper()
	m := &recordingMCP{started: make(chan string, 16), release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "recording", Version: "0.0.1"}, nil)
	type in struct {
		Amount int `json:"amount"`
	}
	record := func(name string, a in) {
		m.mu.Lock()
		m.calls = append(m.calls, name)
		m.mu.Unlock()
		m.started <- name
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	f := false
	mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "Charge a card.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &[]bool{true}[0], IdempotentHint: false, OpenWorldHint: &f}},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			record("charge", a)
			return text("charged"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Charge a card slowly.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &[]bool{true}[0], OpenWorldHint: &f}},
		func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			record("hang", a)
			select {
			case <-m.release:
			case <-ctx.Done():
			}
			return text("charged slowly"), nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		m.releaseAll()
		srv.CloseClientConnections()
		srv.Close()
	})
	m.URL = srv.URL
	return m
}

func (m *recordingMCP) releaseAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.release:
	default:
		close(m.release)
	}
}

func (m *recordingMCP) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

// approvalRun starts a run that asks for approval of tool and returns its interrupt.
func approvalRun(t *testing.T, base, thread, tool string) map[string]any {
	t.Helper()
	return onlyInterrupt(t, postRun(t, base, runInput(thread, newThreadID("run"), hitlText(hitlCall{Name: tool, Args: map[string]any{"amount": 5}}))))
}

// onlyInterrupt returns the one interrupt a run's events end with.
func onlyInterrupt(t *testing.T, evs []map[string]any) map[string]any {
	t.Helper()
	last := evs[len(evs)-1]
	require.Equal(t, "RUN_FINISHED", last["type"], "events: %v", eventTypes(evs))
	out, _ := last["outcome"].(map[string]any)
	ins, _ := out["interrupts"].([]any)
	require.Len(t, ins, 1, "outcome: %v", out)
	return ins[0].(map[string]any)
}

// approve is the resume of thread that answers interrupt in with approved.
func approve(thread string, in map[string]any, approved bool) map[string]any {
	return resumeRun(thread, resumeEntry(in["id"].(string), resolved(map[string]any{"approved": approved})))
}

func resumeRun(thread string, entries ...map[string]any) map[string]any {
	in := runInput(thread, newThreadID("run"), "")
	in["messages"] = []any{}
	r := make([]any, len(entries))
	for i, e := range entries {
		r[i] = e
	}
	in["resume"] = r
	return in
}

// TestApprovalsDuplicateResume: the same resume sent twice at once, and again later, runs
// the approved call once.
func TestApprovalsDuplicateResume(t *testing.T) {
	t.Parallel()
	srv, cfg := payEnv(t, hitlEnv{})
	coord := startHITLCoordinator(t, approvalsYAML(cfg, []string{"pay__charge"}, nil))
	thread := newThreadID("approve-dup")
	in := approvalRun(t, coord.URL, thread, "pay__charge")
	assert.Equal(t, 0, srv.count())

	statuses := postAtOnce(t, mustJSON(t, approve(thread, in, true)), coord.URL, coord.URL)
	assert.Contains(t, statuses, http.StatusOK, "one of the two resumes ran")
	for _, s := range statuses {
		assert.Contains(t, []int{http.StatusOK, http.StatusConflict}, s, "the other ran too or found the thread busy")
	}
	// Once more, after the first has finished.
	evs := postRun(t, coord.URL, approve(thread, in, true))
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "events: %v", eventTypes(evs))
	assert.Equal(t, 1, srv.count(), "the MCP server got exactly one call")
}

// TestApprovalsKillWhileCallOut: the coordinator is killed (SIGKILL) after the approved call
// was sent and before it returned. After a restart the user is asked again (inDoubt), the
// call is not sent by itself, and it runs again only when the user says so.
func TestApprovalsKillWhileCallOut(t *testing.T) {
	t.Parallel()
	for _, again := range []bool{false, true} {
		name := "deny"
		if again {
			name = "run again"
		}
		t.Run(name, func(t *testing.T) {
			srv, cfg := payEnv(t, hitlEnv{store: "sqlite:" + t.TempDir() + "/baton.db"})
			// A short lease: the killed process's run holds the thread (409) until it lapses.
			cfg += "replication:\n  heartbeat: 250ms\n  lease: 1s\n"
			coord := startHITLCoordinator(t, approvalsYAML(cfg, []string{"pay__hang"}, nil))
			thread := newThreadID("approve-kill")
			in := approvalRun(t, coord.URL, thread, "pay__hang")

			body := mustJSON(t, approve(thread, in, true))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			resp, err := postAGUI(ctx, coord.URL, body)
			require.NoError(t, err)
			defer resp.Body.Close()
			select {
			case <-srv.started: // the approved call is out
			case <-ctx.Done():
				t.Fatal("the approved call never reached the MCP server")
			}
			coord.kill(t)
			srv.releaseAll()
			coord.restart(t)

			// The client tries again with a plain run (once the dead process's lease has
			// lapsed): it is asked whether to run the call again.
			doubt := onlyInterrupt(t, postRunWhenFree(t, coord.URL, runInput(thread, newThreadID("run"), "anyone there?")))
			assert.Equal(t, "tool_call", doubt["reason"])
			assert.Equal(t, in["toolCallId"], doubt["toolCallId"])
			assert.Contains(t, doubt["message"], "this call may already have run: run it again?")
			md, _ := doubt["metadata"].(map[string]any)
			baton, _ := md["baton"].(map[string]any)
			assert.Equal(t, true, baton["inDoubt"], "metadata.baton.inDoubt")
			assert.Equal(t, 1, srv.count(), "not sent again by itself")

			evs := postRun(t, coord.URL, approve(thread, doubt, again))
			assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "events: %v", eventTypes(evs))
			res := toolResults(evs)[in["toolCallId"].(string)]
			require.Len(t, res, 1, "events: %v", eventTypes(evs))
			if again {
				assert.Equal(t, 2, srv.count(), "run again: sent once more")
				assert.True(t, strings.HasPrefix(res[0], "[OK]"), res[0])
			} else {
				assert.Equal(t, 1, srv.count(), "the server recorded one call")
				assert.True(t, strings.HasPrefix(res[0], "[DECLINED]"), res[0])
				assert.Contains(t, res[0], "may or may not have run")
			}
		})
	}
}

// TestApprovalsExpire: with interrupts.ttl 2s, an approval answered after it expired gets
// INTERRUPT_EXPIRED and the call is never sent.
func TestApprovalsExpire(t *testing.T) {
	t.Parallel()
	srv, cfg := payEnv(t, hitlEnv{ttl: "2s"})
	coord := startHITLCoordinator(t, approvalsYAML(cfg, []string{"pay__charge"}, nil))
	thread := newThreadID("approve-expire")
	in := approvalRun(t, coord.URL, thread, "pay__charge")
	exp, err := time.Parse(time.RFC3339, in["expiresAt"].(string))
	require.NoError(t, err)
	time.Sleep(time.Until(exp) + time.Second) // waits for the expiry; asserts nothing about time
	evs := postRun(t, coord.URL, approve(thread, in, true))
	assert.Equal(t, []string{"RUN_STARTED", "RUN_ERROR"}, eventTypes(evs))
	assert.Equal(t, "INTERRUPT_EXPIRED", evs[len(evs)-1]["code"])
	assert.Equal(t, 0, srv.count(), "an expired approval sends nothing")
}

// TestApprovalsTwoReplicas: two coordinators on one PostgreSQL store; the same approval's
// resume is sent to both at once, then again to each: the MCP server gets one call.
func TestApprovalsTwoReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	srv, cfg := payEnv(t, hitlEnv{store: dsn})
	cfg = approvalsYAML(cfg, []string{"pay__charge"}, nil)
	a := startHITLCoordinator(t, cfg)
	b := startHITLCoordinator(t, cfg)
	thread := newThreadID("approve-replicas")
	in := approvalRun(t, a.URL, thread, "pay__charge")
	statuses := postAtOnce(t, mustJSON(t, approve(thread, in, true)), a.URL, b.URL)
	assert.Contains(t, statuses, http.StatusOK, "one of the replicas ran the resume: %v", statuses)
	for _, base := range []string{a.URL, b.URL} {
		evs := postRunWhenFree(t, base, approve(thread, in, true))
		assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "events: %v", eventTypes(evs))
	}
	assert.Equal(t, 1, srv.count(), "the MCP server got exactly one call")
}

// TestApprovalsDestructive: approvals.destructive asks before the demo's delete_release
// (destructiveHint) and not before divide (readOnlyHint), in one turn.
func TestApprovalsDestructive(t *testing.T) {
	t.Parallel()
	model, cfg := demoMCPEnv(t)
	coord := startHITLCoordinator(t, cfg+"approvals:\n  destructive: true\n")
	job := hitlJobOn(newThreadID("approve-destructive"), newThreadID("run"), hitlText(
		hitlCall{Name: "demo__divide", Args: map[string]any{"a": 1, "b": 4}},
		hitlCall{Name: "demo__delete_release", Args: map[string]any{"release": "old"}},
	))
	job["resumeAnswers"] = map[string]any{"*": resolved(map[string]any{"approved": false})}
	first, second := interruptedRuns(t, runHITLClient(t, "v1", coord.URL, job), 1, "only the destructive tool asks")
	callID := checkApproval(t, first, first.Interrupts[0], "demo__delete_release")
	assertRun(t, second, "success")
	got := checkResumed(t, second, model, callID)
	assert.True(t, strings.HasPrefix(got, "[DECLINED]\n"), got)
}
