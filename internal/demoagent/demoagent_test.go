package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m)
}

// protocols are the two wire generations every behaviour is checked over.
var protocols = []string{"1.0", "0.3"}

// testAgent is a demo agent behind httptest, with the paths its clients hit counted.
type testAgent struct {
	url string
	rec *Recorder

	mu    sync.Mutex
	paths map[string]int
}

func (a *testAgent) hits(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.paths[path]
}

func startTestAgent(t *testing.T, kind string, slowStep time.Duration) *testAgent {
	t.Helper()
	a := &testAgent{rec: &Recorder{}, paths: map[string]int{}}
	var h http.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.paths[r.URL.Path]++
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	a.url = "http://" + srv.Listener.Addr().String()
	var err error
	h, err = NewHandler(Options{Kind: kind, BaseURL: a.url, ChunkDelay: time.Millisecond, SlowStep: slowStep, Recorder: a.rec})
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() {
		require.NoError(t, h.(io.Closer).Close())
		srv.Close()
	})
	return a
}

// newClient connects to the agent at base over the given protocol version, forcing 0.3
// by registering only the 0.3 transport.
func newClient(t *testing.T, base, version string) *a2aclient.Client {
	t.Helper()
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	resolver := &agentcard.Resolver{Client: hc}
	opts := []a2aclient.FactoryOption{a2aclient.WithJSONRPCTransport(hc)}
	if version == "0.3" {
		resolver.CardParser = a2av0.NewAgentCardParser()
		opts = []a2aclient.FactoryOption{
			a2aclient.WithDefaultsDisabled(),
			a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}),
		}
	}
	card, err := resolver.Resolve(t.Context(), base)
	require.NoError(t, err)
	c, err := a2aclient.NewFromCard(t.Context(), card, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Destroy()
		tr.CloseIdleConnections()
	})
	return c
}

// forEachProtocol runs f as a subtest per protocol version, on a fresh agent of kind and a
// client speaking that version.
func forEachProtocol(t *testing.T, kind string, slowStep time.Duration, f func(t *testing.T, a *testAgent, c *a2aclient.Client, version string)) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) {
			a := startTestAgent(t, kind, slowStep)
			f(t, a, newClient(t, a.url, version), version)
		})
	}
}

func userMsg(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

func followUp(task *a2a.Task, text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))}
}

func statusText(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	return messageText(s.Message)
}

func artifactText(task *a2a.Task, name string) string {
	var b strings.Builder
	for _, a := range task.Artifacts {
		if a.Name != name {
			continue
		}
		for _, p := range a.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

func sendTask(t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(t.Context(), req)
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.Truef(t, ok, "want a task, got %T", res)
	return task
}

// assertPathUsed checks that the client really spoke the protocol version under test.
func assertPathUsed(t *testing.T, a *testAgent, version string) {
	t.Helper()
	used, unused := PathV1, PathV0
	if version == "0.3" {
		used, unused = PathV0, PathV1
	}
	assert.Positive(t, a.hits(used), "requests on %s", used)
	assert.Zero(t, a.hits(unused), "requests on %s", unused)
}

const fullReport = "Report: quantum error correction\n" +
	"Summary: quantum error correction is well covered by the sources consulted.\n" +
	"Finding 1: the core ideas are stable and widely documented.\n" +
	"Finding 2: recent work refines them rather than replacing them.\n" +
	"Conclusion: the evidence is consistent; no open contradictions were found.\n"

func TestResearchOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prompt     string
		state      a2a.TaskState
		statusText string
		report     string
	}{
		{"quantum error correction", a2a.TaskStateCompleted, researchComplete, fullReport},
		{"please fail this", a2a.TaskStateFailed, "Research failed: the source archive is offline.", ""},
		{"reject: cooking recipes", a2a.TaskStateRejected, "I only research technical topics.", ""},
		{"auth needed for paywalled papers", a2a.TaskStateAuthRequired, "Please sign in to the research library.", ""},
	}
	for _, version := range protocols {
		for _, tt := range tests {
			t.Run(version+"/"+tt.prompt, func(t *testing.T) {
				a := startTestAgent(t, kindResearch, time.Minute)
				c := newClient(t, a.url, version)
				task := sendTask(t, c, userMsg(tt.prompt))
				assert.Equal(t, tt.state, task.Status.State)
				assert.Equal(t, tt.statusText, statusText(task.Status))
				assert.Equal(t, tt.report, artifactText(task, "Report"))
				assert.Equal(t, tt.state, a.rec.LastState(string(task.ID)))
				assertPathUsed(t, a, version)
			})
		}
	}
}

func TestResearchStreamsReportInChunks(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, kindResearch, time.Minute, func(t *testing.T, a *testAgent, c *a2aclient.Client, version string) {
		var chunks []*a2a.TaskArtifactUpdateEvent
		var first a2a.Event
		var last *a2a.TaskStatusUpdateEvent
		for ev, err := range c.SendStreamingMessage(t.Context(), userMsg("quantum error correction")) {
			require.NoError(t, err)
			if first == nil {
				first = ev
			}
			switch v := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				chunks = append(chunks, v)
			case *a2a.TaskStatusUpdateEvent:
				last = v
			}
		}
		task, ok := first.(*a2a.Task)
		require.Truef(t, ok, "first event is %T", first)
		assert.Equal(t, a2a.TaskStateSubmitted, task.Status.State)

		require.Len(t, chunks, 5)
		var text strings.Builder
		for i, ch := range chunks {
			assert.Equal(t, "Report", ch.Artifact.Name)
			assert.Equal(t, i > 0, ch.Append, "append on chunk %d", i)
			assert.Equal(t, i == len(chunks)-1, ch.LastChunk, "lastChunk on chunk %d", i)
			assert.Equal(t, chunks[0].Artifact.ID, ch.Artifact.ID)
			text.WriteString(ch.Artifact.Parts[0].Text())
		}
		assert.Equal(t, fullReport, text.String())

		require.NotNil(t, last)
		assert.Equal(t, a2a.TaskStateCompleted, last.Status.State)
		assert.Equal(t, researchComplete, statusText(last.Status))
		assertPathUsed(t, a, version)
	})
}

func TestResearchMessageReply(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, kindResearch, time.Minute, func(t *testing.T, a *testAgent, c *a2aclient.Client, version string) {
		res, err := c.SendMessage(t.Context(), userMsg("message me back"))
		require.NoError(t, err)
		msg, ok := res.(*a2a.Message)
		require.Truef(t, ok, "want a message, got %T", res)
		assert.Equal(t, a2a.MessageRoleAgent, msg.Role)
		assert.Equal(t, "echo: message me back", messageText(msg))
		assert.Empty(t, msg.TaskID)
	})
}

// forEachMode runs f as a subtest per protocol version and per way of continuing a task
// (blocking, streaming), on a fresh agent of kind and a client speaking that version.
func forEachMode(t *testing.T, kind string, f func(t *testing.T, a *testAgent, c *a2aclient.Client, version string, streaming bool)) {
	for _, version := range protocols {
		for _, streaming := range []bool{false, true} {
			name := version + "/blocking"
			if streaming {
				name = version + "/streaming"
			}
			t.Run(name, func(t *testing.T) {
				a := startTestAgent(t, kind, time.Minute)
				f(t, a, newClient(t, a.url, version), version, streaming)
			})
		}
	}
}

// continueTask sends text to task, blocking or streaming, and returns the task as it ends.
// A stream must stay on the task (a new task, or another task's status, fails the test);
// its status states and artifact text are returned too (none when blocking).
func continueTask(t *testing.T, c *a2aclient.Client, task *a2a.Task, text string, streaming bool) (final *a2a.Task, states []a2a.TaskState, artifact string) {
	t.Helper()
	if !streaming {
		return sendTask(t, c, followUp(task, text)), nil, ""
	}
	var b strings.Builder
	for ev, err := range c.SendStreamingMessage(t.Context(), followUp(task, text)) {
		require.NoError(t, err)
		switch v := ev.(type) {
		case *a2a.Task:
			t.Fatalf("continuation emitted a new task: %v", v.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			assert.Equal(t, task.ID, v.TaskID)
			states = append(states, v.Status.State)
		case *a2a.TaskArtifactUpdateEvent:
			b.WriteString(v.Artifact.Parts[0].Text())
		}
	}
	final, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	return final, states, b.String()
}

func TestResearchAuthRequiredThenContinue(t *testing.T) {
	t.Parallel()
	forEachMode(t, kindResearch, func(t *testing.T, _ *testAgent, c *a2aclient.Client, _ string, streaming bool) {
		task := sendTask(t, c, userMsg("auth: quantum error correction"))
		require.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)

		final, states, text := continueTask(t, c, task, "done, signed in", streaming)
		if streaming {
			assert.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}, states)
			assert.Equal(t, "Report: auth: quantum error correction\n", strings.SplitAfter(text, "\n")[0])
		}
		assert.Equal(t, task.ID, final.ID)
		assert.Equal(t, task.ContextID, final.ContextID)
		assert.Equal(t, a2a.TaskStateCompleted, final.Status.State)
		assert.Equal(t, researchComplete, statusText(final.Status))
		assert.True(t, strings.HasPrefix(artifactText(final, "Report"), "Report: auth: quantum error correction\n"))
	})
}

func TestResearchSlowCancel(t *testing.T) {
	t.Parallel()
	// A step longer than the test: the cancel always lands while step 1 is waiting.
	forEachProtocol(t, kindResearch, time.Hour, func(t *testing.T, a *testAgent, c *a2aclient.Client, version string) {
		var taskID a2a.TaskID
		var progress strings.Builder
		var last *a2a.TaskStatusUpdateEvent
		for ev, err := range c.SendStreamingMessage(t.Context(), userMsg("slow survey of consensus protocols")) {
			require.NoError(t, err)
			switch v := ev.(type) {
			case *a2a.Task:
				taskID = v.ID
			case *a2a.TaskArtifactUpdateEvent:
				assert.Equal(t, "Progress", v.Artifact.Name)
				progress.WriteString(v.Artifact.Parts[0].Text())
				ct, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: taskID})
				require.NoError(t, err)
				assert.Equal(t, a2a.TaskStateCanceled, ct.Status.State)
				assert.Equal(t, "cancelled at step 1", statusText(ct.Status))
			case *a2a.TaskStatusUpdateEvent:
				last = v
			}
		}
		assert.Equal(t, "step 1 ", progress.String())
		require.NotNil(t, last)
		assert.Equal(t, a2a.TaskStateCanceled, last.Status.State)
		assert.Equal(t, "cancelled at step 1", statusText(last.Status))
		assert.Equal(t, []string{string(taskID)}, a.rec.Cancels())
		assert.Equal(t, a2a.TaskStateCanceled, a.rec.LastState(string(taskID)))
		assert.Contains(t, a.rec.Methods(), "CancelTask")
		assertPathUsed(t, a, version)
	})
}

func TestResearchSlowCompletes(t *testing.T) {
	t.Parallel()
	a := startTestAgent(t, kindResearch, time.Microsecond)
	c := newClient(t, a.url, "1.0")
	task := sendTask(t, c, userMsg("slow"))
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	var want strings.Builder
	for i := 1; i <= slowSteps; i++ {
		want.WriteString("step " + itoa(i) + " ")
	}
	assert.Equal(t, want.String(), artifactText(task, "Progress"))
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestTravelAsksForDatesThenCompletes(t *testing.T) {
	t.Parallel()
	forEachMode(t, kindTravel, func(t *testing.T, a *testAgent, c *a2aclient.Client, version string, streaming bool) {
		task := sendTask(t, c, userMsg("Book a trip to Lisbon"))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		assert.Equal(t, "What dates would you like to travel? (e.g. 12–19 May)", statusText(task.Status))

		dates := "12–19 May"
		if !streaming {
			dates += "." // the dates are found inside a sentence too
		}
		final, states, _ := continueTask(t, c, task, dates, streaming)
		if streaming {
			assert.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}, states)
		}
		assert.Equal(t, task.ID, final.ID)
		assert.Equal(t, task.ContextID, final.ContextID)
		assert.Equal(t, a2a.TaskStateCompleted, final.Status.State)
		assert.Equal(t, "Booked: Book a trip to Lisbon for 12–19 May.", artifactText(final, "Itinerary"))
		assertPathUsed(t, a, version)
	})
}

func TestTravelWithDatesCompletesAtOnce(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, kindTravel, time.Minute, func(t *testing.T, a *testAgent, c *a2aclient.Client, version string) {
		task := sendTask(t, c, userMsg("Book a trip to Rome from 3 to 9 June."))
		assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
		assert.Equal(t, "Booked: Book a trip to Rome from 3 to 9 June for 3 to 9 June.", artifactText(task, "Itinerary"))
	})
}

func TestTravelCancelWhileWaitingForDates(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, kindTravel, time.Minute, func(t *testing.T, a *testAgent, c *a2aclient.Client, version string) {
		task := sendTask(t, c, userMsg("Book a trip to Oslo"))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		ct, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
		require.NoError(t, err)
		assert.Equal(t, a2a.TaskStateCanceled, ct.Status.State)
		assert.Equal(t, []string{string(task.ID)}, a.rec.Cancels())

		// A finished task cannot be continued.
		_, err = c.SendMessage(t.Context(), followUp(task, "1 May"))
		assert.True(t, errors.Is(err, a2a.ErrInvalidParams), "got %v", err)
	})
}

func TestAgentCardIsUnionOfVersions(t *testing.T) {
	t.Parallel()
	a := startTestAgent(t, kindResearch, time.Minute)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, a.url+"/.well-known/agent-card.json", nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var card struct {
		Name                string `json:"name"`
		URL                 string `json:"url"`
		ProtocolVersion     string `json:"protocolVersion"`
		PreferredTransport  string `json:"preferredTransport"`
		SupportedInterfaces []struct {
			URL             string `json:"url"`
			ProtocolBinding string `json:"protocolBinding"`
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"supportedInterfaces"`
		Capabilities struct {
			Streaming bool `json:"streaming"`
		} `json:"capabilities"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
	assert.Equal(t, "research", card.Name)
	assert.Equal(t, a.url+PathV0, card.URL)
	assert.Equal(t, "0.3", card.ProtocolVersion)
	assert.Equal(t, "JSONRPC", card.PreferredTransport)
	assert.True(t, card.Capabilities.Streaming)
	require.Len(t, card.SupportedInterfaces, 2)
	assert.Equal(t, a.url+PathV1, card.SupportedInterfaces[0].URL)
	assert.Equal(t, "1.0", card.SupportedInterfaces[0].ProtocolVersion)
	assert.Equal(t, a.url+PathV0, card.SupportedInterfaces[1].URL)
	assert.Equal(t, "0.3", card.SupportedInterfaces[1].ProtocolVersion)
}

func TestNewHandlerRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
	}{
		{"unknown kind", Options{Kind: "weather", BaseURL: "http://127.0.0.1:1"}},
		{"empty kind", Options{BaseURL: "http://127.0.0.1:1"}},
		{"no base URL", Options{Kind: kindTravel}},
		{"relative base URL", Options{Kind: kindTravel, BaseURL: "/agents/travel"}},
		{"wrong scheme", Options{Kind: kindTravel, BaseURL: "ftp://127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewHandler(tt.opts)
			assert.ErrorIs(t, err, ErrBadOptions)
		})
	}
}

func TestStartServesUntilContextDone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rec := &Recorder{}
	base, done, err := Start(ctx, "127.0.0.1:0", Options{Kind: kindResearch, Recorder: rec})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(base, "http://127.0.0.1:"), base)

	c := newClient(t, base, "1.0")
	task := sendTask(t, c, userMsg("auth please"))
	require.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)

	// A stream left open on the parked task ends with canceled when the server stops.
	streamCtx, stopStream := context.WithCancel(t.Context())
	defer stopStream()
	final := make(chan a2a.TaskState, 1)
	subscribed := make(chan struct{})
	go func() {
		var once sync.Once
		defer once.Do(func() { close(subscribed) })
		var last a2a.TaskState
		for ev, err := range c.SubscribeToTask(streamCtx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
			if err != nil {
				break
			}
			switch v := ev.(type) {
			case *a2a.Task:
				once.Do(func() { close(subscribed) })
			case *a2a.TaskStatusUpdateEvent:
				last = v.Status.State
			}
		}
		final <- last
	}()
	<-subscribed

	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, a2a.TaskStateCanceled, <-final)
	assert.Equal(t, a2a.TaskStateCanceled, rec.LastState(string(task.ID)))
}

func TestStartFailsOnBusyAddress(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	base, done, err := Start(ctx, "127.0.0.1:0", Options{Kind: kindTravel})
	require.NoError(t, err)
	defer func() { cancel(); <-done }()
	_, _, err = Start(t.Context(), strings.TrimPrefix(base, "http://"), Options{Kind: kindTravel})
	assert.Error(t, err)
}

func TestFindDates(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Book a trip to Lisbon", ""},
		{"Book a trip to Lisbon 12–19 May", "12–19 May"},
		{"Rome from 3 to 9 June.", "3 to 9 June"},
		{"on 2026-05-12 please", "2026-05-12"},
		{"12 May to Paris", "12 May"},
		{"(5/6)", "5/6"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, findDates(tt.in))
		})
	}
}

func TestResearchMode(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Fail now", "fail"},
		{"reject and fail", "fail"},
		{"REJECT", "reject"},
		{"needs auth", "auth"},
		{"slow one", "slow"},
		{"a message", "message"},
		{"Go generics", "report"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, researchMode(tt.in), tt.in)
	}
}
