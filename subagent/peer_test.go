package subagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/require"
)

// The test peer: an in-process a2a-go/v2 server with a scripted executor, serving A2A 1.0 on
// /a2a and 0.3 on /a2a/v0, with fault injection in front of both.

// scriptExecutor picks the outcome from the first word of the user's text, like the
// @a2a-js/sdk test peer described in the reference.
type scriptExecutor struct {
	gate     chan struct{} // "drop" and "dropmsg" wait for it after their first frames
	gateOnce sync.Once
	started  chan string   // ids of "slow" tasks, as they start
	lateGate chan struct{} // "late <verb>" waits for it before its first event
	lateOnce sync.Once
	// authGates stand for credentials given out of band, per task: "auth" tasks wait for
	// theirs after auth-required, within the same execution (a2a-go keeps it running).
	authMu    sync.Mutex
	authGates map[sdk.TaskID]chan struct{}
	authAll   bool // every gate is open (cleanup)
}

func newScriptExecutor() *scriptExecutor {
	return &scriptExecutor{gate: make(chan struct{}), started: make(chan string, 16), lateGate: make(chan struct{}),
		authGates: map[sdk.TaskID]chan struct{}{}}
}

func (e *scriptExecutor) openGate() { e.gateOnce.Do(func() { close(e.gate) }) }

func (e *scriptExecutor) openLate() { e.lateOnce.Do(func() { close(e.lateGate) }) }

// authGate returns the gate of a task, creating it.
func (e *scriptExecutor) authGate(id sdk.TaskID) chan struct{} {
	e.authMu.Lock()
	defer e.authMu.Unlock()
	g, ok := e.authGates[id]
	if !ok {
		g = make(chan struct{})
		if e.authAll {
			close(g)
		}
		e.authGates[id] = g
	}
	return g
}

// openAuth opens the gate of one task, or of all tasks for id "".
func (e *scriptExecutor) openAuth(id sdk.TaskID) {
	e.authMu.Lock()
	defer e.authMu.Unlock()
	for tid, g := range e.authGates {
		if id != "" && tid != id {
			continue
		}
		select {
		case <-g:
		default:
			close(g)
		}
	}
	if id == "" {
		e.authAll = true
	}
}

func agentText(ec *a2asrv.ExecutorContext, text string) *sdk.Message {
	return sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, sdk.NewTextPart(text))
}

// wait blocks until ch is closed, ctx is done or a safety timeout passes; it reports
// whether ch was closed.
func wait(ctx context.Context, ch <-chan struct{}) bool {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

func (e *scriptExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		said := PartsText(ec.Message.Parts)
		status := func(state sdk.TaskState, text string) bool {
			var msg *sdk.Message
			if text != "" {
				msg = agentText(ec, text)
			}
			return yield(sdk.NewStatusUpdateEvent(ec, state, msg), nil)
		}
		artifact := func(id sdk.ArtifactID, appendChunk, last bool, parts ...*sdk.Part) bool {
			ev := sdk.NewArtifactUpdateEvent(ec, id, parts...)
			ev.Append, ev.LastChunk = appendChunk, last
			return yield(ev, nil)
		}

		if ec.StoredTask != nil && len(adkPendingCalls(ec.StoredTask.Status.Message)) > 0 {
			// ADK's convention (reference adk-a2a.md §3): only function responses answer.
			calls := adkPendingCalls(ec.StoredTask.Status.Message)
			answers := map[string]string{}
			for _, p := range ec.Message.Parts {
				d, ok := p.Content.(sdk.Data)
				m, _ := d.Value.(map[string]any)
				if !ok || adkMeta(p) != adkFunctionResp {
					continue
				}
				id, _ := m["id"].(string)
				resp, _ := m["response"].(map[string]any)
				if name, _ := m["name"].(string); resp != nil && name != "" {
					answers[id], _ = resp["answer"].(string)
				}
			}
			for _, c := range calls {
				if _, ok := answers[c.ID]; !ok {
					msg := sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, adkCallPart(c.ID, c.Name, c.Args["question"].(string)),
						sdk.NewTextPart(fmt.Sprintf("no input provided for function call ID %q", c.ID)))
					_ = yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateInputRequired, msg), nil)
					return
				}
			}
			if calls[0].ID == "call-ask-1" && strings.HasPrefix(PartsText(ec.StoredTask.History[0].Parts), "adk2") {
				_ = status(sdk.TaskStateWorking, "") &&
					yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateInputRequired, adkAsk(ec, "call-ask-2", "which size?")), nil)
				return
			}
			_ = status(sdk.TaskStateWorking, "") &&
				artifact("answer", false, true, sdk.NewTextPart("adk got: "+answers[calls[0].ID])) &&
				status(sdk.TaskStateCompleted, "")
			return
		}
		if ec.StoredTask != nil { // a continuation: no new Task event
			_ = status(sdk.TaskStateWorking, "") &&
				artifact("answer", false, true, sdk.NewTextPart("got: "+said)) &&
				status(sdk.TaskStateCompleted, "thanks")
			return
		}

		verb, rest, _ := strings.Cut(said, " ")
		if verb == "late" {
			// Nothing at all before the gate opens: no task yet.
			if !wait(ctx, e.lateGate) {
				return
			}
			verb, _, _ = strings.Cut(rest, " ")
		}
		switch verb {
		case "depth": // answers with the caller's baton/depth metadata as it arrived
			reply := sdk.NewMessage(sdk.MessageRoleAgent, sdk.NewTextPart(fmt.Sprintf("depth=%v", ec.Message.Metadata[DepthKey])))
			reply.ContextID = ec.ContextID
			yield(reply, nil)
			return
		case "budget": // a task whose final status reports usage; its text is the budget received
			b, _ := json.Marshal(ec.Message.Metadata[BudgetKey])
			msgID := ec.Message.ID
			if strings.Contains(rest, "stale") {
				msgID = "another-message"
			}
			in := 7.0
			if strings.Contains(rest, "negative") {
				in = -5e12
			}
			if strings.Contains(rest, "huge") {
				in = 1e300
			}
			final := sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCompleted, nil)
			final.Metadata = map[string]any{UsageKey: map[string]any{"inputTokens": in, "outputTokens": 3, "costUsd": 0.25, "messageId": msgID}}
			_ = yield(sdk.NewSubmittedTask(ec, ec.Message), nil) &&
				artifact("answer", false, true, sdk.NewTextPart("budget="+string(b))) &&
				yield(final, nil)
			return
		case "message":
			reply := sdk.NewMessage(sdk.MessageRoleAgent, sdk.NewTextPart("echo: "+said))
			reply.ContextID = ec.ContextID
			yield(reply, nil)
			return
		case "unsupported":
			yield(nil, sdk.NewError(sdk.ErrUnsupportedOperation, "not supported"))
			return
		case "contenttype":
			yield(nil, sdk.NewError(sdk.ErrUnsupportedContentType, "no such content type"))
			return
		case "denied":
			yield(nil, sdk.NewError(sdk.ErrUnauthenticated, "who are you"))
			return
		case "broken":
			yield(nil, sdk.NewError(sdk.ErrInternalError, "internal detail: /srv/x.go:12"))
			return
		}

		if !yield(sdk.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		switch verb {
		case "drop": // frames: task, alpha, beta (cut here), then gamma, delta after the gate
			_ = artifact("out", false, false, sdk.NewTextPart("alpha ")) &&
				artifact("out", true, false, sdk.NewTextPart("beta ")) &&
				wait(ctx, e.gate) &&
				artifact("out", true, false, sdk.NewTextPart("gamma ")) &&
				artifact("out", true, true, sdk.NewTextPart("delta")) &&
				status(sdk.TaskStateCompleted, "")
			return
		case "dropmsg": // a status message and a second artifact while disconnected
			_ = artifact("out", false, false, sdk.NewTextPart("alpha ")) &&
				status(sdk.TaskStateWorking, "halfway") &&
				artifact("out", true, false, sdk.NewTextPart("beta")) &&
				artifact("more", false, true, sdk.NewTextPart("second")) &&
				wait(ctx, e.gate) &&
				status(sdk.TaskStateWorking, "almost") &&
				status(sdk.TaskStateCompleted, "done")
			return
		}
		if !status(sdk.TaskStateWorking, "thinking") {
			return
		}
		switch verb {
		case "fail":
			status(sdk.TaskStateFailed, "scripted failure")
		case "reject":
			status(sdk.TaskStateRejected, "scripted rejection")
		case "cancelself":
			status(sdk.TaskStateCanceled, "canceled by the agent")
		case "input":
			status(sdk.TaskStateInputRequired, "need more input: what colour?")
		case "adk", "adk2":
			yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateInputRequired, adkAsk(ec, "call-ask-1", "which colour?")), nil)
		case "auth":
			// The stream stays open meanwhile: a client that waits for its end gets
			// "failed" after the safety timeout instead of auth-required at once.
			if !status(sdk.TaskStateAuthRequired, "please authenticate") {
				return
			}
			if wait(ctx, e.authGate(ec.TaskID)) {
				_ = status(sdk.TaskStateWorking, "") && status(sdk.TaskStateCompleted, "authenticated")
			} else if ctx.Err() == nil {
				status(sdk.TaskStateFailed, "credentials never came")
			}
		case "slow":
			e.started <- string(ec.TaskID)
			if !wait(ctx, nil) && ctx.Err() == nil {
				status(sdk.TaskStateFailed, "slow task was never canceled")
			}
		case "data":
			raw := sdk.NewRawPart([]byte("%PDF"))
			raw.Filename, raw.MediaType = "report.pdf", "application/pdf"
			_ = artifact("data", false, true,
				sdk.NewDataPart(map[string]any{"answer": 42, "q": "a<b"}),
				raw,
				sdk.NewFileURLPart("https://example.com/chart.png", "image/png"),
				sdk.NewTextPart("text after files")) &&
				status(sdk.TaskStateCompleted, "")
		default:
			_ = artifact("answer", false, false, sdk.NewTextPart("chunk one ")) &&
				artifact("answer", true, false, sdk.NewTextPart("chunk two ")) &&
				artifact("answer", true, true, sdk.NewTextPart("chunk three")) &&
				status(sdk.TaskStateCompleted, "done")
		}
	}
}

func (e *scriptExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCanceled, agentText(ec, "canceled on request")), nil)
	}
}

// cardKind selects the agent card the peer serves.
type cardKind int

const (
	cardDual     cardKind = iota // 1.0 and 0.3 interfaces, 0.3 union JSON (a2av0 producer)
	cardV10Only                  // 1.0 interface only, plain v1 card
	cardV03Only                  // 0.3 interface only (a2av0 producer)
	cardLegacy                   // hand-written 0.3 card: url/preferredTransport, no supportedInterfaces
	cardRESTOnly                 // 1.0 HTTP+JSON interface only (a2a-go's REST handler)
)

type peerOptions struct {
	card      cardKind
	streaming bool
	// cardNeedsVersion, when set, answers a card request without an A2A-Version header
	// with this status and a JSON-RPC error, like @a2a-js/sdk without 0.3 interfaces.
	cardNeedsVersion int
	// addr, when set, is the address to listen on.
	addr string
	// user, when set, is the authenticated user every call is made as (a2a-go refuses
	// ListTasks to anonymous callers).
	user string
}

// asUser is a call interceptor that authenticates every call as one user.
type asUser string

func (u asUser) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	callCtx.User = a2asrv.NewAuthenticatedUser(string(u), nil)
	return ctx, nil, nil
}

func (asUser) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

// testPeer is the server plus its fault injection. Counters are guarded by mu.
type testPeer struct {
	srv  *httptest.Server
	URL  string
	exec *scriptExecutor
	mux  *http.ServeMux

	mu      sync.Mutex
	methods []string
	// failSends answers that many send requests (blocking or streaming) with 503 and
	// Retry-After: retryAfter.
	failSends  int
	retryAfter string
	// cutStreams cuts that many streaming send responses after cutAfter SSE frames;
	// cutAbort aborts the connection instead of ending the response cleanly.
	cutStreams int
	cutAfter   int
	cutAbort   bool
	// failResubscribe answers every resubscribe with 503.
	failResubscribe bool
	// failGets answers that many GetTask requests with 503.
	failGets int
	// notFoundFollow answers every GetTask and resubscribe with 404.
	notFoundFollow bool
	// hdrs are the headers of every request.
	hdrs []http.Header
}

// headerLog returns the headers of every request so far.
func (p *testPeer) headerLog() []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]http.Header(nil), p.hdrs...)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func startPeer(t *testing.T, opt peerOptions) *testPeer {
	t.Helper()
	p := &testPeer{exec: newScriptExecutor(), mux: http.NewServeMux()}
	p.srv = httptest.NewUnstartedServer(p)
	if opt.addr != "" {
		l, err := net.Listen("tcp", opt.addr)
		require.NoError(t, err)
		_ = p.srv.Listener.Close()
		p.srv.Listener = l
	}
	p.URL = "http://" + p.srv.Listener.Addr().String()

	hopts := []a2asrv.RequestHandlerOption{a2asrv.WithLogger(quietLogger())}
	if opt.user != "" {
		hopts = append(hopts, a2asrv.WithCallInterceptors(asUser(opt.user)))
	}
	h := a2asrv.NewHandler(p.exec, hopts...)
	p.mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(h))
	p.mux.Handle("/a2a/v0", a2av0.NewJSONRPCHandler(h))
	p.mux.Handle("/rest/", http.StripPrefix("/rest", a2asrv.NewRESTHandler(h)))

	v1 := &sdk.AgentInterface{URL: p.URL + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: sdk.Version}
	v0 := &sdk.AgentInterface{URL: p.URL + "/a2a/v0", ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version}
	card := &sdk.AgentCard{
		Name: "peer", Description: "scripted test peer", Version: "1.0.0",
		Capabilities:       sdk.AgentCapabilities{Streaming: opt.streaming},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []sdk.AgentSkill{{ID: "script", Name: "script", Description: "first word picks the outcome",
			Tags: []string{"test"}, Examples: []string{"complete", "fail"}}},
	}
	switch opt.card {
	case cardDual:
		card.SupportedInterfaces = []*sdk.AgentInterface{v1, v0}
		p.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
	case cardV10Only:
		card.SupportedInterfaces = []*sdk.AgentInterface{v1}
		p.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	case cardRESTOnly:
		card.SupportedInterfaces = []*sdk.AgentInterface{{URL: p.URL + "/rest", ProtocolBinding: sdk.TransportProtocolHTTPJSON, ProtocolVersion: sdk.Version}}
		p.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	case cardV03Only:
		card.SupportedInterfaces = []*sdk.AgentInterface{v0}
		p.mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
	case cardLegacy:
		legacy := map[string]any{
			"name": "peer", "description": "legacy 0.3 peer", "version": "1.0.0",
			"protocolVersion": "0.3.0", "url": v0.URL, "preferredTransport": "JSONRPC",
			"capabilities":      map[string]any{"streaming": opt.streaming},
			"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
			"skills": []map[string]any{{"id": "script", "name": "script", "description": "first word picks the outcome", "tags": []string{"test"}}},
		}
		raw, err := json.Marshal(legacy)
		require.NoError(t, err)
		p.mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw)
		})
	}
	if opt.cardNeedsVersion != 0 {
		mux := p.mux
		p.mux = http.NewServeMux()
		p.mux.Handle("/", mux)
		p.mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(sdk.SvcParamVersion) == "" {
				w.WriteHeader(opt.cardNeedsVersion)
				_, _ = w.Write([]byte(`{"code":-32009,"message":"AgentCard must have at least one interface with a protocol version in [0.3, 1.0)."}`))
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	p.srv.Start()
	t.Cleanup(func() {
		p.exec.openAuth("") // let parked "auth" executions finish
		p.exec.openLate()
		p.srv.Close()
	})
	return p
}

func isSendMethod(m string) bool {
	return m == "SendMessage" || m == "SendStreamingMessage" || m == "message/send" || m == "message/stream"
}

func isStreamMethod(m string) bool { return m == "SendStreamingMessage" || m == "message/stream" }

func isResubscribeMethod(m string) bool { return m == "SubscribeToTask" || m == "tasks/resubscribe" }

func isGetMethod(m string) bool { return m == "GetTask" || m == "tasks/get" }

func (p *testPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var rpc struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Message struct {
				TaskID string `json:"taskId"`
			} `json:"message"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &rpc)
	method := rpc.Method
	if isSendMethod(method) && rpc.Params.Message.TaskID != "" {
		// A continuation: credentials count as given once the server has seen it (after
		// it answered, so that a task parked in auth-required is still parked then).
		defer p.exec.openAuth(sdk.TaskID(rpc.Params.Message.TaskID))
	}

	p.mu.Lock()
	p.hdrs = append(p.hdrs, r.Header.Clone())
	if method != "" {
		p.methods = append(p.methods, method)
	}
	notFound := p.notFoundFollow && (isGetMethod(method) || isResubscribeMethod(method))
	var fail, cut bool
	var retryAfter string
	switch {
	case isSendMethod(method) && p.failSends > 0:
		p.failSends--
		fail, retryAfter = true, p.retryAfter
	case isResubscribeMethod(method) && p.failResubscribe:
		fail = true
	case isGetMethod(method) && p.failGets > 0:
		p.failGets--
		fail = true
	case isStreamMethod(method) && p.cutStreams > 0:
		p.cutStreams--
		cut = true
	}
	cutAfter, abort := p.cutAfter, p.cutAbort
	p.mu.Unlock()

	if isResubscribeMethod(method) || isGetMethod(method) {
		p.exec.openGate() // the client is back: let the dropped task go on
	}
	if notFound {
		http.NotFound(w, r)
		return
	}
	if fail {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	if cut {
		w = &cutWriter{ResponseWriter: w, after: cutAfter, abort: abort}
	}
	if isStreamMethod(method) && rpc.Params.Message.TaskID != "" && bytes.Contains(body, []byte(`"replay`)) {
		w = &replayWriter{ResponseWriter: w, frame: p.taskFrame(r, rpc.ID, rpc.Params.Message.TaskID)}
	}
	p.mux.ServeHTTP(w, r)
}

// taskFrame reads a task through the server itself and returns it as the SSE frame of a
// stream event, in the protocol version of r: what @a2a-js/sdk streams first when a
// message continues a parked task.
func (p *testPeer) taskFrame(r *http.Request, id json.RawMessage, taskID string) []byte {
	v0 := strings.HasSuffix(r.URL.Path, "/v0")
	method := "GetTask"
	if v0 {
		method = "tasks/get"
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "snap", "method": method, "params": map[string]any{"id": taskID}})
	req := httptest.NewRequest(http.MethodPost, r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, req)
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Result) == 0 {
		panic("test peer: cannot read task " + taskID + ": " + rec.Body.String())
	}
	result := resp.Result
	if !v0 {
		result, _ = json.Marshal(map[string]json.RawMessage{"task": resp.Result})
	}
	frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return append(append([]byte("data: "), frame...), "\n\n"...)
}

// replayWriter writes one extra SSE frame before the first frame of the response.
type replayWriter struct {
	http.ResponseWriter
	frame []byte
	done  bool
}

func (w *replayWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.done = true
		if _, err := w.ResponseWriter.Write(w.frame); err != nil {
			return 0, err
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *replayWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// seen returns the JSON-RPC methods received so far.
func (p *testPeer) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.methods...)
}

func (p *testPeer) count(match func(string) bool) int {
	n := 0
	for _, m := range p.seen() {
		if match(m) {
			n++
		}
	}
	return n
}

func (p *testPeer) set(f func(p *testPeer)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

var errCut = errors.New("test: stream cut")

// cutWriter lets `after` SSE data frames through, then fails every write (the handler ends
// the response cleanly: the client sees EOF) or aborts the connection (the client sees an
// unexpected EOF).
type cutWriter struct {
	http.ResponseWriter
	after  int
	frames int
	abort  bool
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("data:")) {
		w.frames++
	}
	if w.frames > w.after {
		if w.abort {
			panic(http.ErrAbortHandler)
		}
		return 0, errCut
	}
	return w.ResponseWriter.Write(b)
}

func (w *cutWriter) Flush() {
	if w.frames > w.after {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// adkCallPart is a long-running function call part as ADK sends it (adk-a2a.md §2).
func adkCallPart(id, name, question string) *sdk.Part {
	p := sdk.NewDataPart(map[string]any{"id": id, "name": name, "args": map[string]any{"question": question}})
	p.SetMeta(adkLongRunningKey, true)
	p.SetMeta(adkTypeKey, adkFunctionCall)
	return p
}

// adkAsk is ADK's input-required status message: the call and its pending response,
// role agent, no task or context id.
func adkAsk(ec *a2asrv.ExecutorContext, id, question string) *sdk.Message {
	resp := sdk.NewDataPart(map[string]any{"id": id, "name": "ask_human", "response": map[string]any{"status": "pending"}})
	resp.SetMeta(adkTypeKey, adkFunctionResp)
	_ = ec
	return sdk.NewMessage(sdk.MessageRoleAgent, adkCallPart(id, "ask_human", question), resp)
}
