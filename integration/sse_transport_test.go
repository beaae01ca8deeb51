package integration

// Differential tests of subagent.NewSSETransport (Baton's JSON-RPC transport, whose streams are
// read with go-sse) against a2a-go's own JSON-RPC transport: the same streams through both,
// from the A2A JS SDK peer (peers/a2a-peer.mjs), an a2a-go agent (internal/demoagent) and
// hostile agents that send chosen bytes, on the 1.0 and the 0.3 wire. Each pair must give
// the same events in the same order and the same error: the same kind, text and details.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/subagent"
)

// streamOutcome is what one streaming call yielded: its events (as JSON, with ids and times
// replaced by their order of first appearance, so that two tasks of the same script
// compare equal) and how it ended.
type streamOutcome struct {
	Events []string
	// Kind is the error's kind ("" for none): an SDK sentinel, "canceled", "network",
	// "unexpected-eof", "too-long", "panic" or "other".
	Kind string
	// Text is the error's text; Details its SDK error details (JSON), if any.
	Text, Details string
}

// diffClients returns two a2a-go clients for the JSON-RPC endpoint url of the given
// protocol version: one on a2a-go's transport, one on Baton's.
func diffClients(t *testing.T, url string, v03 bool) (sdkClient, batonClient *a2aclient.Client) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return diffClientsOver(t, hc, url, v03)
}

// diffClientsOver is diffClients over the HTTP client hc.
func diffClientsOver(t *testing.T, hc *http.Client, url string, v03 bool) (sdkClient, batonClient *a2aclient.Client) {
	t.Helper()
	version := sdk.ProtocolVersion(sdk.Version)
	if v03 {
		version = a2av0.Version
	}
	card := &sdk.AgentCard{
		Name: "diff", Capabilities: sdk.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*sdk.AgentInterface{{URL: url, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: version}},
	}
	ours := a2aclient.TransportFactoryFn(func(_ context.Context, _ *sdk.AgentCard, iface *sdk.AgentInterface) (a2aclient.Transport, error) {
		return subagent.NewSSETransport(iface.URL, hc, v03), nil
	})
	sdkOpt := a2aclient.WithJSONRPCTransport(hc)
	ourOpt := a2aclient.WithTransport(sdk.TransportProtocolJSONRPC, ours)
	if v03 {
		sdkOpt = a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc})
		ourOpt = a2aclient.WithCompatTransport(a2av0.Version, sdk.TransportProtocolJSONRPC, ours)
	}
	var err error
	sdkClient, err = a2aclient.NewFromCard(t.Context(), card, a2aclient.WithDefaultsDisabled(), sdkOpt)
	require.NoError(t, err)
	batonClient, err = a2aclient.NewFromCard(t.Context(), card, a2aclient.WithDefaultsDisabled(), ourOpt)
	require.NoError(t, err)
	return sdkClient, batonClient
}

// streamCall is one streaming call on a client.
type streamCall func(ctx context.Context, c *a2aclient.Client) iter.Seq2[sdk.Event, error]

func sendText(text string) streamCall {
	return func(ctx context.Context, c *a2aclient.Client) iter.Seq2[sdk.Event, error] {
		return c.SendStreamingMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart(text))})
	}
}

func subscribe(taskID string) streamCall {
	return func(ctx context.Context, c *a2aclient.Client) iter.Seq2[sdk.Event, error] {
		return c.SubscribeToTask(ctx, &sdk.SubscribeToTaskRequest{ID: sdk.TaskID(taskID)})
	}
}

// collect runs call on c to its end and returns what it yielded. cancelAfter > 0 cancels the
// call's context once that many events have arrived (a caller that goes away mid-stream).
func collect(t *testing.T, c *a2aclient.Client, call streamCall, cancelAfter int) (out streamOutcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ids := map[string]string{}
	defer func() {
		// a2a-go panics on some answers (a null error detail); both transports must.
		if r := recover(); r != nil {
			out.Kind, out.Text = "panic", fmt.Sprint(r)
		}
	}()
	for ev, err := range call(ctx, c) {
		if err != nil {
			out.Kind, out.Text = errKind(err), err.Error()
			var se *sdk.Error
			if errors.As(err, &se) {
				b, _ := json.Marshal(map[string]any{"details": se.Details, "typed": se.TypedDetails, "info": se.ErrorInfo()})
				out.Details = normalizeIDs(t, b, map[string]string{}) // a2a-go servers stamp the time in
			}
			return out
		}
		b, err := json.Marshal(sdk.StreamResponse{Event: ev})
		require.NoError(t, err)
		e := normalizeIDs(t, b, ids)
		if len(e) > 4<<10 { // large events compare by digest, so that a failure prints them short
			e = fmt.Sprintf("%d bytes, sha256 %x, ends %s", len(e), sha256.Sum256([]byte(e)), e[len(e)-200:])
		}
		out.Events = append(out.Events, e)
		if cancelAfter > 0 && len(out.Events) == cancelAfter {
			cancel()
		}
	}
	return out
}

// normalizeIDs replaces ids and timestamps in an event's JSON by their order of first
// appearance across the stream.
func normalizeIDs(t *testing.T, b []byte, ids map[string]string) string {
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) { // in order: ids are numbered as met
				e := x[k]
				s, isString := e.(string)
				switch {
				case isString && (k == "id" || strings.HasSuffix(k, "Id")):
					if _, ok := ids[s]; !ok {
						ids[s] = fmt.Sprintf("<id%d>", len(ids)+1)
					}
					x[k] = ids[s]
				case isString && k == "timestamp":
					x[k] = "<time>"
				default:
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	require.NoError(t, err)
	return string(out)
}

// errKind names what an error is, as Baton's classification tells errors apart.
func errKind(err error) string {
	for _, s := range []error{
		sdk.ErrParseError, sdk.ErrInvalidRequest, sdk.ErrMethodNotFound, sdk.ErrInvalidParams,
		sdk.ErrInternalError, sdk.ErrServerError, sdk.ErrTaskNotFound, sdk.ErrTaskNotCancelable,
		sdk.ErrPushNotificationNotSupported, sdk.ErrUnsupportedOperation, sdk.ErrUnsupportedContentType,
		sdk.ErrInvalidAgentResponse, sdk.ErrExtendedCardNotConfigured, sdk.ErrExtensionSupportRequired,
		sdk.ErrVersionNotSupported, sdk.ErrUnauthenticated, sdk.ErrUnauthorized,
	} {
		if errors.Is(err, s) {
			return "sdk:" + s.Error()
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected-eof"
	case errors.Is(err, bufio.ErrTooLong):
		return "too-long"
	case errors.As(err, &ne):
		return "network"
	}
	return "other"
}

// diffCase is one stream, run through both transports.
type diffCase struct {
	name        string
	call        streamCall
	cancelAfter int
	// want checks one side's outcome, so that a case proves what it is about (and not only
	// that both transports failed alike).
	want func(t *testing.T, o streamOutcome)
}

// runDiff runs every case through both clients and compares the outcomes.
func runDiff(t *testing.T, sdkClient, batonClient *a2aclient.Client, cases []diffCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := collect(t, sdkClient, tc.call, tc.cancelAfter)
			got := collect(t, batonClient, tc.call, tc.cancelAfter)
			assert.Equal(t, want, got, "a2a-go's transport (expected) and Baton's (actual)")
			if tc.want != nil {
				tc.want(t, got)
			}
		})
	}
}

func endsWith(state string) func(t *testing.T, o streamOutcome) {
	return func(t *testing.T, o streamOutcome) {
		t.Helper()
		require.Empty(t, o.Kind, o.Text)
		require.NotEmpty(t, o.Events)
		assert.Contains(t, o.Events[len(o.Events)-1], state)
	}
}

func failsWith(kind string) func(t *testing.T, o streamOutcome) {
	return func(t *testing.T, o streamOutcome) {
		t.Helper()
		assert.Equal(t, kind, o.Kind, o.Text)
	}
}

func TestSSETransportJSPeer(t *testing.T) {
	t.Parallel()
	base := startA2APeerEnv(t, "A2A_LEGACY=1", "BIG_BYTES=1048576")
	for _, v03 := range []bool{false, true} {
		t.Run(map[bool]string{false: "1.0", true: "0.3"}[v03], func(t *testing.T) {
			protocol := subagent.Protocol10
			if v03 {
				protocol = subagent.Protocol03
			}
			ag, err := subagent.Resolve(t.Context(), subagent.AgentConfig{Name: "peer", URL: base, Protocol: protocol}, subagent.Options{})
			require.NoError(t, err)
			endpoint := ag.Endpoint()
			require.NoError(t, ag.Close())
			sdkClient, batonClient := diffClients(t, endpoint, v03)
			runDiff(t, sdkClient, batonClient, []diffCase{
				{name: "complete", call: sendText("complete please"), want: endsWith("COMPLETED")},
				{name: "fail", call: sendText("fail"), want: endsWith("FAILED")},
				{name: "reject", call: sendText("reject"), want: endsWith("REJECTED")},
				{name: "canceled", call: sendText("canceled"), want: endsWith("CANCELED")},
				{name: "input", call: sendText("input"), want: endsWith("INPUT_REQUIRED")},
				// The JS SDK keeps the stream of an auth-required task open: the caller leaves.
				{name: "auth", call: sendText("auth"), cancelAfter: 3, want: func(t *testing.T, o streamOutcome) {
					require.Len(t, o.Events, 3)
					assert.Contains(t, o.Events[2], "AUTH_REQUIRED")
				}},
				{name: "message", call: sendText("message"), want: func(t *testing.T, o streamOutcome) {
					require.Len(t, o.Events, 1)
					assert.Contains(t, o.Events[0], "echo: message")
				}},
				{name: "forge", call: sendText("forge"), want: endsWith("COMPLETED")},
				{name: "big", call: sendText("big"), want: func(t *testing.T, o streamOutcome) {
					assert.Greater(t, len(o.Events), 128, "1 MiB in 8 KiB chunks")
				}},
				{name: "unsupported", call: sendText("unsupported"), want: failsWith("sdk:" + sdk.ErrUnsupportedOperation.Error())},
				{name: "slow, caller gone", call: sendText("slow"), cancelAfter: 3, want: failsWith("canceled")},
				// The JS SDK answers with a JSON body, not a stream (1.0), or an error event (0.3).
				{name: "subscribe unknown", call: subscribe("no-such-task"), want: func(t *testing.T, o streamOutcome) {
					assert.Empty(t, o.Events)
					if v03 {
						assert.Equal(t, "sdk:"+sdk.ErrTaskNotFound.Error(), o.Kind, o.Text)
					}
				}},
			})
		})
	}
}

func TestSSETransportA2AGoAgent(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(nil)
		scheme := "http://"
		if h2 {
			scheme = "https://"
		}
		h, err := demoagent.NewHandler(demoagent.Options{Kind: "research", BaseURL: scheme + srv.Listener.Addr().String(), ChunkDelay: time.Millisecond, SlowStep: time.Hour})
		require.NoError(t, err)
		srv.Config.Handler = h
		if h2 {
			srv.EnableHTTP2 = true
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(func() {
			_ = h.(io.Closer).Close()
			srv.Close()
		})
		// The server's own client (its certificate trusted, HTTP/2 when the server has it),
		// counting the responses that came over HTTP/2.
		base := srv.Client().Transport
		var overH2 atomic.Int64
		hc := &http.Client{Transport: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := base.RoundTrip(req)
			if err == nil && resp.ProtoMajor == 2 {
				overH2.Add(1)
			}
			return resp, err
		})}
		t.Cleanup(srv.Client().CloseIdleConnections)
		for _, v03 := range []bool{false, true} {
			t.Run(map[bool]string{false: "HTTP/1.1 ", true: "HTTP/2 "}[h2]+map[bool]string{false: "1.0", true: "0.3"}[v03], func(t *testing.T) {
				endpoint := srv.URL + demoagent.PathV1
				if v03 {
					endpoint = srv.URL + demoagent.PathV0
				}
				sdkClient, batonClient := diffClientsOver(t, hc, endpoint, v03)
				a2aGoCases(t, sdkClient, batonClient)
			})
		}
		assert.Equal(t, h2, overH2.Load() > 0, "streams over HTTP/2: %d", overH2.Load())
	}
}

// a2aGoCases are the streams of the demo agent's research scripts.
func a2aGoCases(t *testing.T, sdkClient, batonClient *a2aclient.Client) {
	runDiff(t, sdkClient, batonClient, []diffCase{
		{name: "report", call: sendText("research Go generics"), want: endsWith("COMPLETED")},
		{name: "fail", call: sendText("fail"), want: endsWith("FAILED")},
		{name: "reject", call: sendText("reject"), want: endsWith("REJECTED")},
		// The execution parks, its stream stays open: the caller leaves.
		{name: "auth", call: sendText("auth"), cancelAfter: 2, want: func(t *testing.T, o streamOutcome) {
			require.Len(t, o.Events, 2)
			assert.Contains(t, o.Events[1], "AUTH_REQUIRED")
		}},
		{name: "message", call: sendText("message"), want: func(t *testing.T, o streamOutcome) {
			require.Len(t, o.Events, 1)
			assert.Contains(t, o.Events[0], "echo: message")
		}},
		{name: "slow, caller gone", call: sendText("slow"), cancelAfter: 3, want: failsWith("canceled")},
		{name: "subscribe unknown", call: subscribe("no-such-task"), want: func(t *testing.T, o streamOutcome) {
			assert.NotEmpty(t, o.Kind)
		}},
	})
}

// roundTripperFunc is an http.RoundTripper made of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// rawAgent answers every JSON-RPC request with status, the SSE content type and body (or
// with abort: body, then the connection cut mid-response).
func rawAgent(t *testing.T, status int, body string, abort bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush()
		if abort {
			panic(http.ErrAbortHandler)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// rpcFrame is one SSE event carrying a JSON-RPC response with the given result or error.
func rpcFrame(field, value string) string {
	return `data: {"jsonrpc":"2.0","id":"1","` + field + `":` + value + "}\n\n"
}

func TestSSETransportHostile(t *testing.T) {
	t.Parallel()
	task := `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`
	done := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	chunk := func(i int) string {
		return fmt.Sprintf(`{"artifactUpdate":{"taskId":"t1","contextId":"c1","append":%t,"artifact":{"artifactId":"a","parts":[{"text":"part %d "}]}}}`, i > 0, i)
	}
	task03 := `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"working"}}`
	done03 := `{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"completed"},"final":true}`
	chunk03 := `{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"hi"}]}}`
	var flood, flood03 strings.Builder
	for i := range 2000 {
		flood.WriteString(rpcFrame("result", fmt.Sprintf(`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m%d","role":"ROLE_AGENT","parts":[{"text":"step %d"}]}}}}`, i, i)))
		flood03.WriteString(rpcFrame("result", fmt.Sprintf(`{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working","message":{"kind":"message","messageId":"m%d","role":"agent","parts":[{"kind":"text","text":"step %d"}]}},"final":false}`, i, i)))
	}
	multiLine := func(result string) string {
		return "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":\"1\",\ndata:\"result\":" + result + "}\n\n"
	}
	errorInfo := `{"code":-32001,"message":"task t1 is gone","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"k":"v"}},{"@type":"type.googleapis.com/google.protobuf.Struct","hint":"ask again"}]}`
	hugeLine := "data: " + strings.Repeat("x", 10<<20+1) + "\n\n"
	largeEvent := func(result string) string { // 1 MiB of text in one event: the buffer grows
		return rpcFrame("result", strings.Replace(result, "hi", strings.Repeat("y", 1<<20), 1))
	}

	type rawCase struct {
		name, body string
		status     int
		abort      bool
		want       func(t *testing.T, o streamOutcome)
	}
	common := []rawCase{
		{name: "not json", body: "data: <html>not json</html>\n\n", want: failsWith("other")},
		{name: "error with details", body: rpcFrame("error", errorInfo), want: failsWith("sdk:" + sdk.ErrTaskNotFound.Error())},
		{name: "error unknown code", body: rpcFrame("error", `{"code":-1,"message":"odd"}`), want: failsWith("sdk:" + sdk.ErrInternalError.Error())},
		{name: "error without message", body: rpcFrame("error", `{"code":-31401}`), want: failsWith("sdk:" + sdk.ErrUnauthenticated.Error())},
		{name: "error empty", body: rpcFrame("error", `{}`), want: failsWith("sdk:" + sdk.ErrInternalError.Error())},
		{name: "error with a null detail", body: rpcFrame("error", `{"code":-32603,"message":"x","data":[null]}`), want: failsWith("panic")},
		{name: "error of the wrong shape", body: rpcFrame("error", `{"code":"x"}`), want: failsWith("other")},
		{name: "id of the wrong type", body: `data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n", want: failsWith("other")},
		{name: "event too long", body: hugeLine, want: failsWith("too-long")},
		// a2a-go's bound is 10 MiB a line, its newline included.
		{name: "longest line", body: "data: " + strings.Repeat("x", 10<<20-7) + "\n\n", want: failsWith("other")},
		{name: "line one byte too long", body: "data: " + strings.Repeat("x", 10<<20-6) + "\n\n", want: failsWith("too-long")},
		{name: "comments and empty events only", body: ": keep-alive\n\nevent: ping\n\nid: 7\n\ndata:\n\n", want: func(t *testing.T, o streamOutcome) {
			assert.Empty(t, o.Events)
			assert.Empty(t, o.Kind)
		}},
		{name: "status 500", status: http.StatusInternalServerError, body: "oops", want: failsWith("other")},
		{name: "status 429", status: http.StatusTooManyRequests, body: "slow down", want: failsWith("other")},
		{name: "status 404", status: http.StatusNotFound, want: failsWith("other")},
	}
	v10 := append([]rawCase{
		{name: "events", body: rpcFrame("result", task) + rpcFrame("result", chunk(0)) + rpcFrame("result", chunk(1)) + rpcFrame("result", done), want: endsWith("COMPLETED")},
		{name: "no blank line at the end", body: rpcFrame("result", task) + strings.TrimSuffix(rpcFrame("result", done), "\n"), want: endsWith("COMPLETED")},
		{name: "no newline at the end", body: rpcFrame("result", task) + strings.TrimSuffix(rpcFrame("result", done), "\n\n"), want: endsWith("COMPLETED")},
		{name: "crlf, fields and comments", body: ": hello\r\nid: 1\r\nevent: message\r\n" + strings.ReplaceAll(rpcFrame("result", task), "\n", "\r\n") + "retry: 10\n\n" + rpcFrame("result", done), want: endsWith("COMPLETED")},
		{name: "multi-line data", body: multiLine(task) + multiLine(done), want: endsWith("COMPLETED")},
		{name: "empty data lines", body: "data:\ndata:\n\ndata:\n" + rpcFrame("result", task) + "data: \n" + rpcFrame("result", done), want: endsWith("COMPLETED")},
		{name: "no space after the colon", body: strings.Replace(rpcFrame("result", task), "data: ", "data:", 1) + rpcFrame("result", done), want: endsWith("COMPLETED")},
		{name: "large event", body: rpcFrame("result", task) + largeEvent(`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"text":"hi"}]}}}`) + rpcFrame("result", done), want: endsWith("COMPLETED")},
		{name: "status flood", body: rpcFrame("result", task) + flood.String() + rpcFrame("result", done), want: func(t *testing.T, o streamOutcome) {
			assert.Len(t, o.Events, 2002)
		}},
		{name: "error after events", body: rpcFrame("result", task) + rpcFrame("error", errorInfo), want: func(t *testing.T, o streamOutcome) {
			assert.Len(t, o.Events, 1)
			assert.Equal(t, "sdk:"+sdk.ErrTaskNotFound.Error(), o.Kind)
		}},
		{name: "error null with a result", body: rpcFrame("result", task)[:len(rpcFrame("result", task))-3] + `,"error":null}` + "\n\n", want: endsWith("WORKING")},
		{name: "result not an event", body: rpcFrame("result", `{"nothing":{}}`), want: failsWith("other")},
		{name: "cut mid-event", body: rpcFrame("result", task) + `data: {"jsonrpc":"2.0","id":"1","res`, abort: true, want: func(t *testing.T, o streamOutcome) {
			assert.Len(t, o.Events, 1)
			assert.Equal(t, "unexpected-eof", o.Kind)
		}},
	}, common...)
	v03 := append([]rawCase{
		{name: "events", body: rpcFrame("result", task03) + rpcFrame("result", chunk03) + rpcFrame("result", done03), want: endsWith("COMPLETED")},
		{name: "no blank line at the end", body: rpcFrame("result", task03) + strings.TrimSuffix(rpcFrame("result", done03), "\n"), want: endsWith("COMPLETED")},
		{name: "multi-line data", body: multiLine(task03) + multiLine(done03), want: endsWith("COMPLETED")},
		{name: "empty data lines", body: "data:\ndata:\n\ndata:\n" + rpcFrame("result", task03) + "data: \n" + rpcFrame("result", done03), want: endsWith("COMPLETED")},
		{name: "status flood", body: rpcFrame("result", task03) + flood03.String() + rpcFrame("result", done03), want: func(t *testing.T, o streamOutcome) {
			assert.Len(t, o.Events, 2002)
		}},
		{name: "unknown kind", body: rpcFrame("result", task03) + rpcFrame("result", `{"kind":"bogus"}`), want: func(t *testing.T, o streamOutcome) {
			assert.Len(t, o.Events, 1)
			assert.Equal(t, "other", o.Kind)
		}},
		{name: "unknown state", body: rpcFrame("result", `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"sleeping"}}`)},
		{name: "cut mid-event", body: rpcFrame("result", task03) + `data: {"jsonrpc":"2.0","id":"1","res`, abort: true, want: func(t *testing.T, o streamOutcome) {
			assert.Len(t, o.Events, 1)
			assert.Equal(t, "unexpected-eof", o.Kind)
		}},
	}, common...)

	for _, wire := range []struct {
		name  string
		v03   bool
		cases []rawCase
	}{{"1.0", false, v10}, {"0.3", true, v03}} {
		t.Run(wire.name, func(t *testing.T) {
			for _, rc := range wire.cases {
				status := rc.status
				if status == 0 {
					status = http.StatusOK
				}
				url := rawAgent(t, status, rc.body, rc.abort)
				sdkClient, batonClient := diffClients(t, url, wire.v03)
				runDiff(t, sdkClient, batonClient, []diffCase{
					{name: rc.name, call: sendText("go"), want: rc.want},
					{name: rc.name + ", subscribe", call: subscribe("t1"), want: rc.want},
				})
			}
		})
	}
}

// TestSSETransportHostileAgents runs the integration suite's hostile agent (a2a_boundary_test.go)
// through both transports: a task and then silence until the caller goes away.
func TestSSETransportHostileAgents(t *testing.T) {
	t.Parallel()
	working := startHostileAgent(t, func(h *hostileAgent) { h.mode = "working" })
	sdkClient, batonClient := diffClients(t, working.URL+"/a2a", false)
	runDiff(t, sdkClient, batonClient, []diffCase{{name: "caller gone", call: sendText("go"), cancelAfter: 1, want: func(t *testing.T, o streamOutcome) {
		assert.Len(t, o.Events, 1)
		assert.Equal(t, "canceled", o.Kind)
	}}})
}

// TestSSETransportBoundsAnEvent is where the two transports differ on purpose: a2a-go bounds
// a line, not an event, so an event of many lines grows its buffer without end; Baton's
// transport refuses an event past the bound of a line.
func TestSSETransportBoundsAnEvent(t *testing.T) {
	t.Parallel()
	line := "data: " + strings.Repeat("x", 6<<20) + "\n"
	url := rawAgent(t, http.StatusOK, line+line+"\n", false)
	sdkClient, batonClient := diffClients(t, url, false)
	assert.Equal(t, "other", collect(t, sdkClient, sendText("go"), 0).Kind, "a2a-go reads the 12 MiB event (and fails on its JSON)")
	assert.Equal(t, "too-long", collect(t, batonClient, sendText("go"), 0).Kind, "Baton's transport refuses it")
}

// TestSSETransportRedirect: an endpoint that redirects (307, the request kept) to one that
// streams is followed by a2a-go's client policy on both transports, and the stream is read.
func TestSSETransportRedirect(t *testing.T) {
	t.Parallel()
	target := rawAgent(t, http.StatusOK, `data: {"jsonrpc":"2.0","id":"1","result":{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}}`+"\n\n", false)
	var hops atomic.Int64
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	sdkClient, batonClient := diffClients(t, redirect.URL, false)
	runDiff(t, sdkClient, batonClient, []diffCase{{name: "307", call: sendText("go"), want: endsWith("COMPLETED")}})
	assert.Equal(t, int64(2), hops.Load(), "each transport was redirected once")
}
