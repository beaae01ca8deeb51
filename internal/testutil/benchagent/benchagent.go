// Package benchagent is an A2A 1.0 JSON-RPC agent for benchmarks and load tests. It answers
// from memory with frames encoded once (no SDK server, no deep copies of tasks, no demo
// work), so that a benchmark through Baton measures Baton. It can hold its streams open
// until released (open runs), and be slow or failing to cancel (cancel confirmation).
package benchagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// Options configures an [Agent].
type Options struct {
	// Chunks are the artifact chunks of every task, one SSE event each (default: one "ok").
	Chunks []string
	// Hold keeps each stream open after the task and its first chunk until [Agent.Release],
	// a CancelTask of the task, or the end of the request.
	Hold bool
	// FailCancels makes the first FailCancels CancelTask calls of every task fail with a
	// JSON-RPC internal error (a failure that retrying may change).
	FailCancels int
	// CancelDelay delays every CancelTask answer (an agent slow to cancel).
	CancelDelay time.Duration
}

// Agent is the benchmark agent; it is an http.Handler. Use New.
type Agent struct {
	opts    Options
	url     string
	card    []byte
	head    []byte // task frame, with marker for the task id
	chunk   [][]byte
	release chan struct{}
	relOnce sync.Once
	seq     atomic.Int64

	mu    sync.Mutex
	tasks map[string]*task
	// changed is closed and replaced whenever a task is canceled (WaitCanceled).
	changed     chan struct{}
	failCancels int

	cancelsInFlight, maxCancelsInFlight atomic.Int64
	cancelCalls                         atomic.Int64
}

type task struct {
	state    sdk.TaskState
	cancels  int
	canceled chan struct{}
}

const marker = "TASKMARKER"

// New returns an agent whose card names url as its JSON-RPC endpoint.
func New(url string, opts Options) *Agent {
	if len(opts.Chunks) == 0 {
		opts.Chunks = []string{"ok"}
	}
	a := &Agent{opts: opts, url: url, release: make(chan struct{}), tasks: make(map[string]*task),
		changed: make(chan struct{}), failCancels: opts.FailCancels}
	a.card, _ = json.Marshal(&sdk.AgentCard{Name: "bench", Description: "Benchmark agent (answers from memory).", Version: "1",
		SupportedInterfaces: []*sdk.AgentInterface{{URL: url, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: "1.0"}},
		Capabilities:        sdk.AgentCapabilities{Streaming: true}, DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []sdk.AgentSkill{{ID: "echo", Name: "echo", Description: "answers at once", Tags: []string{"bench"}}}})
	a.head = split(&sdk.Task{ID: marker, ContextID: "c-" + marker, Status: sdk.TaskStatus{State: sdk.TaskStateWorking}})
	for i, c := range opts.Chunks {
		a.chunk = append(a.chunk, split(&sdk.TaskArtifactUpdateEvent{TaskID: marker, ContextID: "c-" + marker, Append: i > 0,
			Artifact: &sdk.Artifact{ID: "a1", Parts: sdk.ContentParts{sdk.NewTextPart(c)}}}))
	}
	return a
}

// split encodes an event as an SSE frame once, with marker where the task id goes.
func split(ev sdk.Event) []byte {
	b, err := json.Marshal(sdk.StreamResponse{Event: ev})
	if err != nil {
		panic(err)
	}
	return []byte(`data: {"jsonrpc":"2.0","id":"1","result":` + string(b) + "}\n\n")
}

// frame writes a template with the task id in place of the marker.
func (a *Agent) frame(w *bytes.Buffer, f []byte, id string) {
	for {
		before, after, found := bytes.Cut(f, []byte(marker))
		w.Write(before)
		if !found {
			return
		}
		w.WriteString(id)
		f = after
	}
}

// Release lets every held stream finish (now and from now on).
func (a *Agent) Release() { a.relOnce.Do(func() { close(a.release) }) }

// Counts returns how many tasks were created and how many of them are canceled.
func (a *Agent) Counts() (tasks, canceled int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.tasks {
		if t.state == sdk.TaskStateCanceled {
			canceled++
		}
	}
	return len(a.tasks), canceled
}

// SetFailCancels changes Options.FailCancels from now on (counted per task from its first
// CancelTask, as before): an agent that refuses cancels and later applies them.
func (a *Agent) SetFailCancels(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failCancels = n
}

// WaitCanceled waits until at least n tasks are canceled, or ctx is done.
func (a *Agent) WaitCanceled(ctx context.Context, n int) error {
	for {
		a.mu.Lock()
		canceled := 0
		for _, t := range a.tasks {
			if t.state == sdk.TaskStateCanceled {
				canceled++
			}
		}
		ch := a.changed
		a.mu.Unlock()
		if canceled >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d tasks canceled: %w", canceled, n, ctx.Err())
		}
	}
}

// MaxCancelsInFlight is the largest number of CancelTask calls the agent served at once.
func (a *Agent) MaxCancelsInFlight() int { return int(a.maxCancelsInFlight.Load()) }

// CancelCalls is the number of CancelTask calls received.
func (a *Agent) CancelCalls() int { return int(a.cancelCalls.Load()) }

type rpcRequest struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		ID string `json:"id"`
	} `json:"params"`
}

// ServeHTTP implements http.Handler.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(a.card)
		return
	}
	var req rpcRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	switch req.Method {
	case "SendStreamingMessage":
		a.stream(w, r)
	case "CancelTask":
		a.cancel(w, req)
	case "GetTask":
		a.get(w, req)
	default:
		writeRPC(w, req.ID, "", `{"code":-32601,"message":"method not found"}`)
	}
}

func (a *Agent) stream(w http.ResponseWriter, r *http.Request) {
	id := "t-" + strconv.FormatInt(a.seq.Add(1), 10)
	t := &task{state: sdk.TaskStateWorking, canceled: make(chan struct{})}
	a.mu.Lock()
	a.tasks[id] = t
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	var buf bytes.Buffer
	a.frame(&buf, a.head, id)
	a.frame(&buf, a.chunk[0], id)
	send := func() bool {
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		if fl != nil {
			fl.Flush()
		}
		return err == nil
	}
	if !send() {
		return
	}
	if a.opts.Hold {
		select {
		case <-a.release:
		case <-t.canceled:
			fmt.Fprintf(&buf, "data: {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{\"statusUpdate\":{\"contextId\":\"c-%s\",\"status\":{\"state\":\"TASK_STATE_CANCELED\"},\"taskId\":%q}}}\n\n", id, id)
			send()
			return
		case <-r.Context().Done():
			return
		}
	}
	for _, c := range a.chunk[1:] {
		a.frame(&buf, c, id)
	}
	a.mu.Lock()
	done := t.state == sdk.TaskStateWorking
	if done {
		t.state = sdk.TaskStateCompleted
	}
	final := t.state
	a.mu.Unlock()
	fmt.Fprintf(&buf, "data: {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{\"statusUpdate\":{\"contextId\":\"c-%s\",\"status\":{\"state\":%q},\"taskId\":%q}}}\n\n", id, stateJSON(final), id)
	send()
}

func stateJSON(s sdk.TaskState) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func (a *Agent) cancel(w http.ResponseWriter, req rpcRequest) {
	a.cancelCalls.Add(1)
	n := a.cancelsInFlight.Add(1)
	defer a.cancelsInFlight.Add(-1)
	for {
		m := a.maxCancelsInFlight.Load()
		if n <= m || a.maxCancelsInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if a.opts.CancelDelay > 0 {
		time.Sleep(a.opts.CancelDelay)
	}
	a.mu.Lock()
	t := a.tasks[req.Params.ID]
	if t == nil {
		a.mu.Unlock()
		writeRPC(w, req.ID, "", `{"code":-32001,"message":"task not found"}`)
		return
	}
	t.cancels++
	if t.cancels <= a.failCancels {
		a.mu.Unlock()
		writeRPC(w, req.ID, "", `{"code":-32603,"message":"busy, try again"}`)
		return
	}
	if t.state != sdk.TaskStateWorking {
		state := t.state
		a.mu.Unlock()
		if state == sdk.TaskStateCanceled {
			writeRPC(w, req.ID, taskJSON(req.Params.ID, state), "")
			return
		}
		writeRPC(w, req.ID, "", `{"code":-32002,"message":"task is not cancelable"}`)
		return
	}
	t.state = sdk.TaskStateCanceled
	close(t.canceled)
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
	writeRPC(w, req.ID, taskJSON(req.Params.ID, sdk.TaskStateCanceled), "")
}

func (a *Agent) get(w http.ResponseWriter, req rpcRequest) {
	a.mu.Lock()
	t := a.tasks[req.Params.ID]
	var state sdk.TaskState
	if t != nil {
		state = t.state
	}
	a.mu.Unlock()
	if t == nil {
		writeRPC(w, req.ID, "", `{"code":-32001,"message":"task not found"}`)
		return
	}
	writeRPC(w, req.ID, taskJSON(req.Params.ID, state), "")
}

func taskJSON(id string, state sdk.TaskState) string {
	b, _ := json.Marshal(&sdk.Task{ID: sdk.TaskID(id), ContextID: "c-" + id, Status: sdk.TaskStatus{State: state}})
	return string(b)
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result, rpcErr string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	if rpcErr != "" {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id, rpcErr)
		return
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}
