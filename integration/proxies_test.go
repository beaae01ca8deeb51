package integration

// The coordinator behind the reverse proxies of deploy/proxies (Debian's nginx, HAProxy and
// Caddy), each run from the committed config with only its two addresses changed:
//   - 50 concurrent streams through the proxy arrive incrementally: every client reads its
//     sub-agent's first step while every sub-agent is still held (so no run can have ended),
//     and then reads its run to the terminal event, ids dense, none cut;
//   - a client that disconnects at the proxy reaches the sub-agent as CancelTask;
//   - a client that lost its stream reconnects through the proxy (GET the run's stream with
//     Last-Event-ID, server.on_disconnect: detach) and reads the rest once, to the end.
// The sub-agent is an a2a-go server in this test that holds each task after its first step
// until the test releases it, so that "before the run ends" is a fact, not a timing.
// A proxy that is not installed skips its subtest (fails when CI is set); under CI
// `make proxies` installs Debian's packages.
//
// Caddy (Debian's 2.6.2) runs with buffer_requests (deploy/proxies/Caddyfile): without it, it
// cut a stream now and then ("reading from backend … use of closed network connection",
// "aborting with incomplete response"). Its transport was still sending the request body to
// the coordinator when the coordinator's response began; net/http's server then ends the
// client's request body, the transport's last read of it fails, and the transport closes the
// backend connection mid-response. Measured with -count=10 -run TestBehindProxies/caddy: 3 of
// 10 iterations failed without buffer_requests, 0 of 30 with it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"iter"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedAgent is an A2A agent whose task for the prompt "<gate>/<name>" streams "step 1 of
// <name>", then waits until gate is released (or the task is cancelled), then streams "step
// 2 of <name>" and completes.
type gatedAgent struct {
	url string

	mu      sync.Mutex
	gates   map[string]chan struct{}
	tasks   map[a2a.TaskID]string // task → prompt
	cancels map[string]int        // prompt → CancelTask requests
	changed chan struct{}         // closed and replaced on every cancel
}

func (h *gatedAgent) gate(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.gates[name]
	if !ok {
		g = make(chan struct{})
		h.gates[name] = g
	}
	return g
}

// release lets every task of gate name go on.
func (h *gatedAgent) release(name string) { close(h.gate(name)) }

// cancelsOf is how many CancelTask requests the task of prompt got.
func (h *gatedAgent) cancelsOf(prompt string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancels[prompt]
}

// waitCancel waits until the task of prompt got a CancelTask; the bound only keeps a broken
// proxy from hanging the test.
func (h *gatedAgent) waitCancel(t *testing.T, prompt string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		h.mu.Lock()
		n, ch := h.cancels[prompt], h.changed
		h.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the sub-agent's task for %q got no CancelTask", prompt)
		}
	}
}

func (h *gatedAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		prompt := strings.TrimSpace(partsText(ec.Message.Parts))
		gate, name, _ := strings.Cut(prompt, "/")
		h.mu.Lock()
		h.tasks[ec.TaskID] = prompt
		h.mu.Unlock()
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		step := func(n int) bool {
			return yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking,
				a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(fmt.Sprintf("step %d of %s", n, name)))), nil)
		}
		if !step(1) {
			return
		}
		select {
		case <-h.gate(gate):
		case <-ctx.Done():
			return
		}
		if !step(2) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done "+name))), nil)
	}
}

func (h *gatedAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		h.mu.Lock()
		h.cancels[h.tasks[ec.TaskID]]++
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// startGatedAgent serves a gatedAgent on loopback until the test ends.
func startGatedAgent(t *testing.T) *gatedAgent {
	t.Helper()
	h := &gatedAgent{gates: map[string]chan struct{}{}, tasks: map[a2a.TaskID]string{}, cancels: map[string]int{}, changed: make(chan struct{})}
	var card a2a.AgentCard
	mux := http.NewServeMux()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(h)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2a.AgentCard, error) { return &card, nil })))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	h.url = "http://" + ln.Addr().String()
	card = a2a.AgentCard{
		Name: "held", Description: "streams a step, waits until released, then completes", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(h.url+"/a2a", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "work", Name: "work", Description: "works until released", Tags: []string{"test"}}},
	}
	t.Cleanup(func() {
		h.mu.Lock()
		for _, g := range h.gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return h
}

// proxyKind is one reverse proxy: its binary and how to run its committed config.
type proxyKind struct {
	name string // the subtest, the package and the binary
	file string // under deploy/proxies
	// argv runs the config at path in the foreground, with its state under dir.
	argv func(bin, path, dir string) []string
}

var proxyKinds = []proxyKind{
	{name: "nginx", file: "nginx.conf", argv: func(bin, path, dir string) []string {
		return []string{bin, "-p", dir, "-c", path, "-g", "daemon off; pid " + filepath.Join(dir, "nginx.pid") + "; error_log stderr warn;"}
	}},
	{name: "haproxy", file: "haproxy.cfg", argv: func(bin, path, _ string) []string { return []string{bin, "-db", "-f", path} }},
	{name: "caddy", file: "Caddyfile", argv: func(bin, path, _ string) []string {
		return []string{bin, "run", "--adapter", "caddyfile", "--config", path}
	}},
}

// proxyBinary finds the proxy's binary on PATH or in /usr/sbin (Debian's nginx and haproxy).
func proxyBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found on PATH or in /usr/sbin: install Debian's package (`CI=true make proxies` does, as root)", name)
	}
	return p, nil
}

// startProxy runs the committed config of k in front of upstream (a coordinator's base URL)
// on a free port, and returns the proxy's base URL once a request through it is answered.
func startProxy(t *testing.T, k proxyKind, bin, upstream string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "proxies", k.file))
	require.NoError(t, err)
	up := strings.TrimPrefix(upstream, "http://")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
		// The committed config says 127.0.0.1:8080 (the proxy) and 127.0.0.1:8081 (the
		// coordinator); only those change.
		require.Contains(t, string(raw), "127.0.0.1:8080", "%s: the listen address the test replaces", k.file)
		require.Contains(t, string(raw), "127.0.0.1:8081", "%s: the upstream address the test replaces", k.file)
		conf := strings.ReplaceAll(strings.ReplaceAll(string(raw), "127.0.0.1:8081", up), "127.0.0.1:8080", listen)
		dir := t.TempDir()
		path := filepath.Join(dir, k.file)
		require.NoError(t, os.WriteFile(path, []byte(conf), 0o644))
		// Caddy keeps its state under XDG dirs: the test's, not the user's.
		env := []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"), "HOME=" + dir}
		base := "http://" + listen
		var p *proc
		p, lastErr = startProcErr(t, k.name, k.argv(bin, path, dir), env, readyOnURL(base+"/healthz"))
		if lastErr == nil {
			t.Cleanup(func() { p.Stop() })
			// Streams open only once the proxy serves a request through to the coordinator.
			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				resp, err := http.Get(base + "/healthz")
				if assert.NoError(c, err) {
					_ = resp.Body.Close()
					assert.Equal(c, http.StatusOK, resp.StatusCode, "GET /healthz through %s", k.name)
				}
			}, 30*time.Second, 50*time.Millisecond)
			return base
		}
	}
	t.Fatalf("starting %s: %v", k.name, lastErr)
	return ""
}

// sseEvent is one event of a stream, with its SSE id.
type sseEvent struct {
	id int64
	ev map[string]any
}

func (e sseEvent) typ() string  { s, _ := e.ev["type"].(string); return s }
func (e sseEvent) text() string { s, _ := e.ev["delta"].(string); return s }

// readEvents reads an SSE body, sending each event to out, until the body ends; it closes
// out and returns the read error (nil at a clean end).
func readEvents(body interface{ Read([]byte) (int, error) }, out chan<- sseEvent) error {
	defer close(out)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var id int64
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("bad SSE frame %q: %w", data, err)
		}
		out <- sseEvent{id: id, ev: ev}
	}
	return sc.Err()
}

// stream is one run's stream as a client reads it.
type stream struct {
	thread, run string
	events      chan sseEvent
	done        chan error // the read error, once the stream has ended
	cancel      context.CancelFunc
}

// openRun posts a run whose prompt makes the model delegate prompt to the held agent, and
// starts reading its stream.
func openRun(t *testing.T, client *http.Client, base, prompt string) *stream {
	t.Helper()
	s := &stream{thread: "t-" + randomID(), run: "r-" + randomID(), events: make(chan sseEvent, 1024), done: make(chan error, 1)}
	body, _ := json.Marshal(map[string]any{"threadId": s.thread, "runId": s.run, "messages": []any{
		map[string]any{"id": "u1", "role": "user", "content": "held: " + prompt}}, "tools": []any{}, "context": []any{}, "state": map[string]any{}, "forwardedProps": map[string]any{}})
	return s.start(t, client, http.MethodPost, base+"/agui", body, "")
}

// follow starts reading the run's stream from after lastID (the reconnect endpoint).
func (s *stream) follow(t *testing.T, client *http.Client, base string, lastID int64) *stream {
	t.Helper()
	f := &stream{thread: s.thread, run: s.run, events: make(chan sseEvent, 1024), done: make(chan error, 1)}
	return f.start(t, client, http.MethodGet, base+"/agui/threads/"+s.thread+"/runs/"+s.run+"/events", nil, strconv.FormatInt(lastID, 10))
}

func (s *stream) start(t *testing.T, client *http.Client, method, url string, body []byte, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err, "%s %s", method, url)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		_ = resp.Body.Close()
		t.Fatalf("%s %s: %s", method, url, resp.Status)
	}
	go func() {
		defer resp.Body.Close()
		s.done <- readEvents(resp.Body, s.events)
	}()
	t.Cleanup(cancel)
	return s
}

// until reads events until match; it returns them, the last one matching. The bound only
// keeps a buffering proxy from hanging the test.
func (s *stream) until(t *testing.T, what string, match func(sseEvent) bool) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				t.Fatalf("run %s: the stream ended before %s (read: %v)", s.run, what, typesOf(got))
			}
			got = append(got, e)
			if match(e) {
				return got
			}
		case <-deadline:
			t.Fatalf("run %s: %s did not arrive (read: %v)", s.run, what, typesOf(got))
		}
	}
}

// rest reads the stream to its end and returns the events and the read error.
func (s *stream) rest(t *testing.T) ([]sseEvent, error) {
	t.Helper()
	var got []sseEvent
	deadline := time.After(90 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				return got, <-s.done
			}
			got = append(got, e)
		case <-deadline:
			t.Fatalf("run %s: the stream did not end (read: %v)", s.run, typesOf(got))
		}
	}
}

func typesOf(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.typ()
	}
	return out
}

func isStep(n int, name string) func(sseEvent) bool {
	want := fmt.Sprintf("step %d of %s", n, name)
	return func(e sseEvent) bool { return strings.Contains(e.text(), want) }
}

// assertWhole checks that a stream that was read from its first event is whole: ids dense
// from 1, one terminal event, last, and it is a success.
func assertWhole(t assert.TestingT, run string, evs []sseEvent, err error) {
	assert.NoError(t, err, "run %s: read error", run)
	if !assert.NotEmpty(t, evs, "run %s: no events", run) {
		return
	}
	for i, e := range evs {
		if !assert.Equal(t, int64(i+1), e.id, "run %s: event %d (%s) has id %d: ids are dense from 1", run, i, e.typ(), e.id) {
			break
		}
	}
	last := evs[len(evs)-1]
	assert.Equal(t, "RUN_FINISHED", last.typ(), "run %s: cut: the last event is %s, not the terminal one (%v)", run, last.typ(), typesOf(evs))
	n := 0
	for _, e := range evs {
		if e.typ() == "RUN_FINISHED" || e.typ() == "RUN_ERROR" {
			n++
		}
	}
	assert.Equal(t, 1, n, "run %s: terminal events", run)
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}

func TestBehindProxies(t *testing.T) {
	t.Parallel()
	agent := startGatedAgent(t)
	model := startCancelLLM(t)
	agents := []agentEntry{{Name: "held", URL: agent.url}}
	cancelling := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: agents})
	detaching := startBatonForCancel(t, cancelConfig{LLMURL: model.URL, Agents: agents, OnDisconnect: "detach", ReconnectGrace: "10m"})

	for _, k := range proxyKinds {
		t.Run(k.name, func(t *testing.T) {
			bin, err := proxyBinary(k.name)
			if err != nil {
				skipOrFail(t, err.Error())
			}
			front := startProxy(t, k, bin, cancelling.URL)
			frontDetach := startProxy(t, k, bin, detaching.URL)
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}

			t.Run("50 concurrent streams arrive incrementally and whole", func(t *testing.T) {
				const n = 50
				gate := k.name + "-streams"
				streams := make([]*stream, n)
				for i := range streams {
					streams[i] = openRun(t, client, front, fmt.Sprintf("%s/s%d", gate, i))
				}
				// Every sub-agent is held after its first step: a client that reads it has it
				// before its run can end.
				first := make([][]sseEvent, n)
				for i, s := range streams {
					first[i] = s.until(t, "the first step, while the sub-agent is held", isStep(1, fmt.Sprintf("s%d", i)))
				}
				agent.release(gate)
				for i, s := range streams {
					evs, err := s.rest(t)
					all := append(first[i], evs...)
					assertWhole(t, s.run, all, err)
					var step2 bool
					for _, e := range evs {
						step2 = step2 || isStep(2, fmt.Sprintf("s%d", i))(e)
					}
					assert.True(t, step2, "run %s: the step after the release arrived", s.run)
					assert.Zero(t, agent.cancelsOf(fmt.Sprintf("%s/s%d", gate, i)), "run %s: nothing was cancelled", s.run)
				}
			})

			t.Run("a disconnect at the proxy reaches the sub-agent as CancelTask", func(t *testing.T) {
				prompt := k.name + "-cancel/c"
				s := openRun(t, client, front, prompt)
				s.until(t, "the first step", isStep(1, "c"))
				s.cancel() // the client goes away: only its connection to the proxy closes
				agent.waitCancel(t, prompt)
				assertRunEndedBy(t, cancelling, s.thread, reasonClientGone)
			})

			t.Run("reconnect through the proxy with Last-Event-ID", func(t *testing.T) {
				gate := k.name + "-reconnect"
				prompt := gate + "/r"
				s := openRun(t, client, frontDetach, prompt)
				before := s.until(t, "the first step", isStep(1, "r"))
				lastID := before[len(before)-1].id
				s.cancel() // the stream is lost; under detach the run goes on
				<-s.done
				f := s.follow(t, client, frontDetach, lastID)
				agent.release(gate)
				after, err := f.rest(t)
				// The reconnect stream starts by restating the open state (RUN_STARTED first),
				// in frames that carry the id of the last event read; then it goes on from there.
				require.NotEmpty(t, after, "events after the reconnect")
				assert.Equal(t, "RUN_STARTED", after[0].typ(), "the reconnect stream starts as a stream")
				var restated int
				for restated < len(after) && after[restated].id == lastID {
					restated++
				}
				all := append(before, after[restated:]...)
				assertWhole(t, s.run, all, err)
				assert.Zero(t, agent.cancelsOf(prompt), "the lost stream did not cancel the run")
			})
		})
	}
}
