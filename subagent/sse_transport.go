package subagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"github.com/tmaxmax/go-sse"
)

// maxSSEEvent bounds one SSE event of a stream, its lines and the blank line that ends it.
// a2a-go bounds one line, its newline included, to 10 MiB: one byte more for the blank
// line, and an event of one line is refused exactly when a2a-go refuses it. An event of
// several lines is refused past the same bound, which a2a-go does not bound at all.
const maxSSEEvent = 10<<20 + 1

// sseTransport is a2a-go's JSON-RPC transport (1.0, or 0.3 through a2av0) whose two
// streaming calls read the response body with go-sse instead of a2a-go's reader, which
// gives every stream a 64 KiB buffer up front for as long as it is open (design/
// a2a-transport.md). Everything else is a2a-go's: every other call; the streaming
// request itself (a2a-go builds and sends it, and judges its HTTP status); and every
// JSON-RPC error in a stream, which a2a-go's own codec turns into an error.
type sseTransport struct {
	a2aclient.Transport // a2a-go's, on the agent's client: the calls that do not stream

	// opener is a2a-go's transport on a client that keeps the body of a stream's
	// successful response for the caller (keepStream) and hands a2a-go an empty one.
	opener a2aclient.Transport
	// v03 tells how a result is decoded: a 1.0 StreamResponse or a 0.3 event.
	v03 bool
	// rejecter builds a2a-go's transport over a client that answers one request with the
	// given JSON-RPC response, to turn a JSON-RPC error into a2a-go's error for it.
	rejecter func(hc *http.Client) a2aclient.Transport
}

// NewSSETransport returns a2a-go's JSON-RPC transport for url (A2A 1.0, or 0.3 when v03)
// over hc, whose streaming calls read the agent's server-sent events with go-sse: a buffer
// that starts at 4 KiB and grows with the events, up to 10 MiB an event, instead of a2a-go's
// 64 KiB held from the start. Events and errors are those of a2a-go's own transport for
// the same stream. hc must not set a Timeout (it would cover the whole stream).
func NewSSETransport(url string, hc *http.Client, v03 bool) a2aclient.Transport {
	keeper := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	keeper.Transport = keepStream{base: base}
	if v03 {
		return &sseTransport{
			Transport: a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: url, Client: hc}),
			opener:    a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: url, Client: &keeper}),
			v03:       true,
			rejecter: func(rc *http.Client) a2aclient.Transport {
				return a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: url, Client: rc})
			},
		}
	}
	return &sseTransport{
		Transport: a2aclient.NewJSONRPCTransport(url, hc),
		opener:    a2aclient.NewJSONRPCTransport(url, &keeper),
		rejecter:  func(rc *http.Client) a2aclient.Transport { return a2aclient.NewJSONRPCTransport(url, rc) },
	}
}

// sseTransportOption makes a client use [NewSSETransport] for the JSON-RPC binding of the
// chosen protocol version. A client with a Timeout keeps a2a-go's own transport: its
// deadline covers a stream's body, which only a2a-go's reading of it would honour.
func sseTransportOption(hc *http.Client, v03 bool) a2aclient.FactoryOption {
	if hc.Timeout > 0 {
		if v03 {
			return a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc})
		}
		return a2aclient.WithJSONRPCTransport(hc)
	}
	factory := a2aclient.TransportFactoryFn(func(_ context.Context, _ *sdk.AgentCard, iface *sdk.AgentInterface) (a2aclient.Transport, error) {
		return NewSSETransport(iface.URL, hc, v03), nil
	})
	if v03 {
		return a2aclient.WithCompatTransport(a2av0.Version, sdk.TransportProtocolJSONRPC, factory)
	}
	return a2aclient.WithTransport(sdk.TransportProtocolJSONRPC, factory)
}

// SendStreamingMessage implements a2aclient.Transport.
func (t *sseTransport) SendStreamingMessage(ctx context.Context, params a2aclient.ServiceParams, req *sdk.SendMessageRequest) iter.Seq2[sdk.Event, error] {
	return t.stream(ctx, func(ctx context.Context) iter.Seq2[sdk.Event, error] {
		return t.opener.SendStreamingMessage(ctx, params, req)
	})
}

// SubscribeToTask implements a2aclient.Transport.
func (t *sseTransport) SubscribeToTask(ctx context.Context, params a2aclient.ServiceParams, req *sdk.SubscribeToTaskRequest) iter.Seq2[sdk.Event, error] {
	return t.stream(ctx, func(ctx context.Context) iter.Seq2[sdk.Event, error] {
		return t.opener.SubscribeToTask(ctx, params, req)
	})
}

// keptKey is the context key of the *http.Response slot keepStream fills.
type keptKey struct{}

// keepStream passes requests to base. A successful response to a request whose context
// holds a slot (keptKey) goes into the slot, and the caller (a2a-go's transport) gets the
// same response with an empty body: it reads no stream, so it allocates no buffer that lives
// as long as the stream. Any other response goes to the caller as it is.
type keepStream struct{ base http.RoundTripper }

func (k keepStream) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(req)
	slot, ok := req.Context().Value(keptKey{}).(**http.Response)
	if err != nil || !ok || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	*slot = resp
	empty := *resp
	empty.Body = http.NoBody
	empty.ContentLength = 0
	return &empty, nil
}

// CloseIdleConnections forwards to base (http.Client looks for it).
func (k keepStream) CloseIdleConnections() {
	if c, ok := k.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// stream runs open (a2a-go's streaming call) with a slot for the response, then reads the
// kept body's events. An error of open is a2a-go's own (the request could not be sent, or
// the status was not 200) and is passed on as it is.
func (t *sseTransport) stream(ctx context.Context, open func(context.Context) iter.Seq2[sdk.Event, error]) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		body, err := t.start(ctx, open)
		if err != nil {
			yield(nil, err)
			return
		}
		if body == nil {
			return // a2a-go read the stream itself (it cannot, keepStream kept it): nothing
		}
		defer body.Close()
		t.read(ctx, body, yield)
	}
}

// start opens the stream and returns its body (nil with no error when there is none). It is
// a function of its own so that what opening needs is not held on the stack of the
// goroutine that then waits on the stream.
func (t *sseTransport) start(ctx context.Context, open func(context.Context) iter.Seq2[sdk.Event, error]) (io.ReadCloser, error) {
	var kept *http.Response
	for ev, err := range open(context.WithValue(ctx, keptKey{}, &kept)) {
		if err != nil || ev != nil {
			if kept != nil {
				_ = kept.Body.Close()
			}
			if err == nil {
				err = fmt.Errorf("a2a: the SDK read an event from a stream it should not have read")
			}
			return nil, err
		}
	}
	if kept == nil {
		return nil, nil
	}
	return kept.Body, nil
}

// read yields the events of body as a2a-go's transport does: one per SSE event with data
// (the data lines joined by "\n"), an error ending the stream. An event pending when the body
// ends without its blank line is dispatched, as a2a-go does (go-sse, as the SSE spec says,
// would drop it): the body is followed by one.
func (t *sseTransport) read(ctx context.Context, body io.Reader, yield func(sdk.Event, error) bool) {
	events := sse.Read(io.MultiReader(body, strings.NewReader("\n\n")), &sse.ReadConfig{MaxEventSize: maxSSEEvent})
	for e, err := range events {
		if err != nil {
			yield(nil, fmt.Errorf("SSE stream error: %w", err))
			return
		}
		// a2a-go drops the empty data lines that come before the first line with data (and
		// so an event whose data lines are all empty); go-sse keeps them as newlines.
		data := strings.TrimLeft(e.Data, "\n")
		if data == "" {
			continue
		}
		ev, err := t.decode(ctx, data)
		if err != nil {
			yield(nil, err)
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// decode turns one SSE data payload, a JSON-RPC response, into an event or an error. A
// result is decoded with a2a-go's exported types (1.0's StreamResponse; 0.3's event and its
// conversion), as a2a-go's transport decodes it; a JSON-RPC error goes to a2a-go's own codec.
func (t *sseTransport) decode(ctx context.Context, data string) (sdk.Event, error) {
	// The shape and the names of a2a-go's JSON-RPC response types (not exported), so that
	// what a2a-go fails to decode fails here too, with the same text (it names the types).
	type Error struct {
		Code    int                   `json:"code"`
		Message string                `json:"message"`
		Data    []*errordetails.Typed `json:"data,omitempty"`
	}
	type ClientResponse struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      string          `json:"id"`
		Result  json.RawMessage `json:"result,omitempty"`
		Error   *Error          `json:"error,omitempty"`
	}
	var resp ClientResponse
	if err := json.Unmarshal([]byte(data), &resp); err != nil {
		return nil, fmt.Errorf("failed to parse SSE data: %w", err)
	}
	if resp.Error != nil {
		return nil, t.rejection(ctx, data)
	}
	if t.v03 {
		legacy, err := a2alegacy.UnmarshalEventJSON(resp.Result)
		if err != nil {
			return nil, err
		}
		return a2av0.ToV1Event(legacy)
	}
	var sr sdk.StreamResponse
	if err := json.Unmarshal(resp.Result, &sr); err != nil {
		return nil, err
	}
	return sr.Event, nil
}

// rejection is a2a-go's error for a JSON-RPC response that carries one: a2a-go's transport
// is asked for a task over a client whose only answer is that response, so that its own
// codec (codes, messages, details) makes the error. The stream ends with it.
func (t *sseTransport) rejection(ctx context.Context, data string) error {
	answer := func(req *http.Request) (*http.Response, error) {
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"application/json"}},
			Body:    io.NopCloser(bytes.NewReader([]byte(data))),
			Request: req,
		}, nil
	}
	// Not the stream's context: the answer is here already, whatever became of the caller.
	_, err := t.rejecter(&http.Client{Transport: roundTripFunc(answer)}).GetTask(context.WithoutCancel(ctx), nil, &sdk.GetTaskRequest{})
	if err == nil {
		// Unreachable: the response holds an error, which a2a-go's codec reports.
		err = fmt.Errorf("a2a: a JSON-RPC error the SDK did not report")
	}
	return err
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
