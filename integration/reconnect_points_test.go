package integration

// Reconnect mid-run at every kind of point, through both official AG-UI clients,
// against the coordinator binary, the @a2a-js/sdk peer and the fake model.
//
// A connection is cut at a point: right after RUN_STARTED, inside a tool call (after
// TOOL_CALL_START, and after TOOL_CALL_END before its result), inside a delegation (sub-agent
// text streaming between SUBAGENT_STARTED and SUBAGENT_FINISHED), inside the coordinator's own
// streaming text, and around an interrupt outcome (the client missed it, or saw it). At the
// moment the live stream passes the point, the test opens the reconnect stream with
// Last-Event-ID = the last id seen, while the run goes on (server.on_disconnect: detach keeps
// the run alive once the POST itself is dropped, at the last point). Each official client then
// gets, on one agent, the events up to the cut as one response and the reconnect stream as the
// next (after an interrupt outcome the client has seen, a new agent gets the reconnect stream,
// as after a page reload: an agent holding an interrupt refuses to run again without resuming
// it). Checked: the client accepts both (no failure, no warning), the second ends with the
// terminal event, and by event identity (SSE ids) the part before the cut plus the reconnect
// stream's events after the cut are exactly the run's log read from 0: nothing missing,
// nothing twice. Frames that restate the open state carry the cut's id and must be copies of
// logged events.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
)

// pointsText is the coordinator's answer after the delegation, streamed a word at a time.
var pointsText = strings.TrimSpace(strings.Repeat("word ", 40))

// pointsModel: "<agent>: <prompt>" calls the agent; after a tool result it answers with
// pointsText, slowly enough for a cut inside it.
func pointsModel(req fakellm.Request) fakellm.Reply {
	if req.Last().Role == "tool" {
		return fakellm.Reply{Text: pointsText, Delay: 40 * time.Millisecond}
	}
	var user string
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	agent, prompt, ok := strings.Cut(user, ":")
	if !ok {
		return fakellm.Reply{Text: "nothing to call"}
	}
	args, _ := json.Marshal(map[string]string{"prompt": strings.TrimSpace(prompt)})
	return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_p%d", cancelModelSeq.Add(1)), Name: strings.TrimSpace(agent), Arguments: string(args)}}}
}

// frameField returns a top-level string field of an event frame's JSON.
func frameField(f sseFrame, key string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(f.Data), &m)
	s, _ := m[key].(string)
	return s
}

// cutPoint is a place to cut a stream: match is given each live frame with the frames seen
// before it, and is true for the frame after which the connection is cut.
// With beforeTerminal the cut is instead just before the run's terminal event. With fresh the
// reconnect stream goes to a new agent (a reloaded page) rather than to the one that had the
// events before the cut: an agent that saw an interrupt outcome refuses to run again
// without resuming it.
type cutPoint struct {
	name           string
	match          func(f sseFrame, seen []sseFrame) bool
	beforeTerminal bool
	fresh          bool
	// text: the client's assistant message must hold the whole answer, assembled from both
	// connections.
	text bool
	// restates are the event types the reconnect stream must restate (what is open at the cut).
	restates []string
}

// cut is a cut made: the frames the client had, and the reconnect stream opened at that
// moment (its body is read by the client).
type cut struct {
	name     string
	fresh    bool
	restates []string
	text     bool
	prefix   []sseFrame
	relay    *http.Response
}

// openReconnect opens the run's reconnect stream after id, as a client that lost its
// connection there does.
func openReconnect(t *testing.T, base, thread, run string, id int64) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/agui/threads/"+thread+"/runs/"+run+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(id, 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "reconnect after %d", id)
	return resp
}

// liveCuts starts a run for the client lane (v1: protocolVersion 1.0; legacy: none), reads
// its live stream and makes a cut at each point as the stream passes it. The POST is
// dropped at the last point when drop is set (the run goes on, detached), else read to its
// end. It returns the cuts in order.
func liveCuts(t *testing.T, base, lane, thread, run, text string, points []cutPoint, drop bool) []cut {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	version := `"protocolVersion":"1.0",`
	if lane == "legacy" {
		version = ""
	}
	body := `{"threadId":"` + thread + `","runId":"` + run + `",` + version + `"messages":[{"id":"u1","role":"user","content":"` + text + `"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/agui", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	live, sc := openSSE(t, req)
	defer live.Body.Close()

	var seen []sseFrame
	var cuts []cut
	next := 0
	readFrames(t, sc, func(f sseFrame) bool {
		prior := seen
		seen = append(seen, f)
		terminal := frameField(f, "type") == "RUN_FINISHED" || frameField(f, "type") == "RUN_ERROR"
		for next < len(points) {
			p := points[next]
			had := seen
			switch {
			case p.beforeTerminal && terminal:
				had = prior
			case p.beforeTerminal || !p.match(f, prior):
				return drop && next == len(points)
			}
			cuts = append(cuts, cut{name: p.name, fresh: p.fresh, restates: p.restates, text: p.text, prefix: append([]sseFrame(nil), had...),
				relay: openReconnect(t, base, thread, run, had[len(had)-1].ID)})
			next++
		}
		return drop && next == len(points)
	})
	require.Equal(t, len(points), next, "the live stream did not pass every cut point (reached %d of %d; frames: %v)", next, len(points), framesData(seen))
	return cuts
}

// pointResult is what one official client made of a cut and its reconnection.
type pointResult struct {
	cut   string
	lane  string
	res   aguiResult
	err   error
	relay []byte // the reconnect stream's bytes as the client got them
}

// replayToClient serves one official client, on one agent, the cut's frames as a first
// response and the reconnect stream as the second, and reports what it made of them.
func replayToClient(ctx context.Context, node, dir, lane, thread string, c cut) pointResult {
	var prefix bytes.Buffer
	for _, f := range c.prefix {
		fmt.Fprintf(&prefix, "id: %d\ndata: %s\n\n", f.ID, f.Data)
	}
	var mu sync.Mutex
	var relayed bytes.Buffer
	posts := 0
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		posts++
		n := posts
		if c.fresh {
			n++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 1: // the connection that was cut
			_, _ = w.Write(prefix.Bytes())
		case 2: // the reconnection, relayed as it arrives
			src := c.relay.Body
			buf := make([]byte, 4096)
			for {
				k, err := src.Read(buf)
				if k > 0 {
					mu.Lock()
					relayed.Write(buf[:k])
					mu.Unlock()
					_, _ = w.Write(buf[:k])
					w.(http.Flusher).Flush()
				}
				if err != nil {
					return
				}
			}
		default:
			http.Error(w, "unexpected third request", http.StatusConflict)
		}
	}))
	defer front.Close()
	res, stderr, err := runAGUIClientCtx(ctx, node, dir, lane, front.URL, map[string]any{"threadId": thread, "messages": []any{}, "again": !c.fresh})
	if err != nil {
		err = fmt.Errorf("%w\nstderr:\n%s", err, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	return pointResult{cut: c.name, lane: lane, res: res, err: err, relay: append([]byte(nil), relayed.Bytes()...)}
}

// checkPoint checks one client's view of one cut against the run's whole log.
func checkPoint(t *testing.T, whole []sseFrame, c cut, pr pointResult, outcome string) {
	t.Helper()
	require.NoError(t, pr.err)
	var first, second aguiResult
	if c.fresh {
		require.Len(t, pr.res.Runs, 1, "the new client made the reconnect run")
		second = pr.res.Runs[0]
	} else {
		require.Len(t, pr.res.Runs, 2, "the client made the cut run and the reconnect run")
		first, second = pr.res.Runs[0], pr.res.Runs[1]
		if !assert.Nil(t, first.Failed, "the client rejected the stream before the cut") {
			t.Logf("rejected: %s", *first.Failed)
		}
		assert.Empty(t, first.Warnings, "the client warned about the stream before the cut")
		assert.Equal(t, eventTypesOf(c.prefix), eventTypes(first.Events), "the client took every event before the cut, once")
	}
	if !assert.Nil(t, second.Failed, "the client rejected the reconnect stream") {
		t.Logf("rejected: %s\nevents: %v", *second.Failed, eventTypes(second.Events))
	}
	assert.Empty(t, second.Warnings, "the client warned about the reconnect stream")
	assert.Empty(t, pr.res.Warnings)
	assert.True(t, second.Terminal, "the reconnect stream ends with the run's terminal event")
	assert.Nil(t, second.RunError)
	if assert.NotNil(t, second.Outcome, "the reconnect run reports its outcome") {
		assert.Equal(t, outcome, *second.Outcome)
	}

	cutID := c.prefix[len(c.prefix)-1].ID
	got := readFrames(t, bufio.NewScanner(bytes.NewReader(pr.relay)), func(sseFrame) bool { return false })
	require.NotEmpty(t, got)
	assert.Equal(t, eventTypesOf(got), eventTypes(second.Events), "the client took every event of the reconnect stream, once")

	// Restated frames come first, carry the cut's id, and copy logged events at or before it.
	logged := map[string]bool{}
	for _, f := range whole[:cutID] {
		logged[f.Data] = true
	}
	var after []sseFrame
	var restated []string
	for i, f := range got {
		if f.ID == cutID {
			restated = append(restated, frameField(f, "type"))
			assert.Empty(t, after, "a restated frame after the replay began: %s", f.Data)
			assert.True(t, logged[f.Data], "restated frame is not a logged event up to the cut: %s", f.Data)
			if i == 0 {
				assert.Equal(t, "RUN_STARTED", frameField(f, "type"), "the reconnect stream starts with RUN_STARTED")
			}
			continue
		}
		after = append(after, f)
	}
	for _, typ := range c.restates {
		assert.Contains(t, restated, typ, "what is open at the cut is restated")
	}
	assert.Equal(t, cutID, got[0].ID, "the reconnect stream opens with its restatement")
	if c.text {
		var texts []string
		for _, m := range second.Messages {
			if _, sub := m["subagentRunId"]; m["role"] == "assistant" && !sub {
				if s, ok := m["content"].(string); ok && s != "" {
					texts = append(texts, s)
				}
			}
		}
		assert.Equal(t, []string{pointsText}, texts, "the client assembled the coordinator's answer once, whole, across the cut")
	}
	// Identity: the frames before the cut and the ones after it are the whole log, once.
	assert.Equal(t, whole, append(append([]sseFrame(nil), c.prefix...), after...), "cut + reconnect differ from the run's log")
}

func eventTypesOf(fs []sseFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = frameField(f, "type")
	}
	return out
}

// wholeLog reads the run's log from the start once it has ended, and checks its ids are
// 1, 2, 3, ...
func wholeLog(t *testing.T, base, thread, run string) []sseFrame {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/agui/threads/"+thread+"/runs/"+run+"/events?after=0", nil)
	require.NoError(t, err)
	resp, sc := openSSE(t, req)
	defer resp.Body.Close()
	whole := readFrames(t, sc, func(f sseFrame) bool {
		typ := frameField(f, "type")
		return typ == "RUN_FINISHED" || typ == "RUN_ERROR"
	})
	for i, f := range whole {
		require.Equal(t, int64(i+1), f.ID, "the log's ids are its sequence")
	}
	return whole
}

func TestReconnectAtEveryPoint(t *testing.T) {
	t.Parallel()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	peer := startA2APeerEnv(t)
	model := fakellm.Start(pointsModel)
	t.Cleanup(model.Close)
	b := startBatonForCancel(t, cancelConfig{LLMURL: model.URL,
		Agents:       []agentEntry{{Name: "peer", URL: peer}, {Name: "asker", URL: peer, InputRequired: "ask_user"}},
		OnDisconnect: "detach", ReconnectGrace: "10m"})

	typeIs := func(typ string) func(sseFrame, []sseFrame) bool {
		return func(f sseFrame, _ []sseFrame) bool { return frameField(f, "type") == typ }
	}
	// nthContent matches the n-th TEXT_MESSAGE_CONTENT of a sub-agent (sub) or of the
	// coordinator itself (!sub).
	nthContent := func(n int, sub bool) func(sseFrame, []sseFrame) bool {
		return func(f sseFrame, seen []sseFrame) bool {
			is := func(g sseFrame) bool {
				return frameField(g, "type") == "TEXT_MESSAGE_CONTENT" && (frameField(g, "subagentRunId") != "") == sub
			}
			if !is(f) {
				return false
			}
			k := 1
			for _, g := range seen {
				if is(g) {
					k++
				}
			}
			return k == n
		}
	}
	type runCase struct {
		thread, text, outcome string
		points                []cutPoint
		drop                  bool
	}
	delegation := runCase{thread: "points-delegation", text: "peer: slow please", outcome: "success", drop: true,
		points: []cutPoint{
			{name: "right after RUN_STARTED", match: typeIs("RUN_STARTED")},
			{name: "inside a tool call (after TOOL_CALL_START)", match: typeIs("TOOL_CALL_START"), restates: []string{"TOOL_CALL_START"}},
			{name: "after TOOL_CALL_END, before its result", match: typeIs("TOOL_CALL_END")},
			{name: "inside a delegation (sub-agent text streaming)", match: nthContent(3, true),
				restates: []string{"SUBAGENT_STARTED", "TEXT_MESSAGE_START"}},
			{name: "inside streaming text", match: nthContent(3, false), restates: []string{"TEXT_MESSAGE_START"}, text: true},
		}}
	interrupt := runCase{thread: "points-interrupt", text: "asker: input please", outcome: "interrupt",
		points: []cutPoint{
			// The client saw everything up to the outcome but not the outcome itself; the
			// run has ended with the interrupt by the time it reconnects.
			{name: "just before the interrupt outcome", beforeTerminal: true},
			{name: "after the interrupt outcome (reload)", match: typeIs("RUN_FINISHED"), fresh: true},
		}}

	for _, lane := range []string{"v1", "legacy"} {
		t.Run(lane, func(t *testing.T) {
			t.Parallel()
			// Both runs, cut live; each client is started as soon as its cut is made, while
			// the run goes on.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			type pending struct {
				rc     runCase
				thread string
				c      cut
				out    chan pointResult
			}
			var all []pending
			threads := map[string]string{}
			for _, rc := range []runCase{delegation, interrupt} {
				thread := newThreadID(rc.thread + "-" + lane)
				threads[rc.thread] = thread
				for _, c := range liveCuts(t, b.URL, lane, thread, "r1", rc.text, rc.points, rc.drop) {
					p := pending{rc: rc, thread: thread, c: c, out: make(chan pointResult, 1)}
					go func() { p.out <- replayToClient(ctx, node, dir, lane, thread, c) }()
					all = append(all, p)
				}
			}
			for _, p := range all {
				pr := <-p.out
				_ = p.c.relay.Body.Close()
				t.Run(p.rc.outcome+"/"+p.c.name, func(t *testing.T) {
					checkPoint(t, wholeLog(t, b.URL, p.thread, "r1"), p.c, pr, p.rc.outcome)
				})
			}

			// The delegation went on after its POST was dropped: the sub-agent's last step
			// and the whole answer are in the log.
			whole := wholeLog(t, b.URL, threads[delegation.thread], "r1")
			assert.Contains(t, strings.Join(framesData(whole), "\n"), "step 20", "the sub-agent's last step is missing")
			var text strings.Builder
			for _, f := range whole {
				if frameField(f, "type") == "TEXT_MESSAGE_CONTENT" && frameField(f, "subagentRunId") == "" {
					text.WriteString(frameField(f, "delta"))
				}
			}
			assert.Equal(t, pointsText, strings.TrimSpace(text.String()))
		})
	}
}
