package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"sync/atomic"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/baton-dev/baton/internal/sse"
)

// maxSSEEvent bounds one event of the lean SSE reader (all its data lines), as a2a-go
// bounds one line (design/lean-transport.md).
const maxSSEEvent = 10 << 20

// leanTransport is a2a-go's JSON-RPC transport (1.0, or 0.3 through a2av0) with its own
// reader for the two streaming methods: a2a-go's reader allocates a 64 KiB scanner
// buffer per stream, which was half of the heap of an open streaming run. Every other
// method is the SDK's.
type leanTransport struct {
	a2aclient.Transport
	url  string
	http *http.Client
	v03  bool
}

// leanTransportOption is the factory option that makes a client use leanTransport for the
// JSON-RPC binding.
func leanTransportOption(hc *http.Client, v03 bool) a2aclient.FactoryOption {
	factory := a2aclient.TransportFactoryFn(func(_ context.Context, _ *sdk.AgentCard, iface *sdk.AgentInterface) (a2aclient.Transport, error) {
		if v03 {
			base := a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: iface.URL, Client: hc})
			return &leanTransport{Transport: base, url: iface.URL, http: hc, v03: true}, nil
		}
		return &leanTransport{Transport: a2aclient.NewJSONRPCTransport(iface.URL, hc), url: iface.URL, http: hc}, nil
	})
	if v03 {
		return a2aclient.WithCompatTransport(a2av0.Version, sdk.TransportProtocolJSONRPC, factory)
	}
	return a2aclient.WithTransport(sdk.TransportProtocolJSONRPC, factory)
}

// SendStreamingMessage implements a2aclient.Transport.
func (t *leanTransport) SendStreamingMessage(ctx context.Context, params a2aclient.ServiceParams, req *sdk.SendMessageRequest) iter.Seq2[sdk.Event, error] {
	if t.v03 {
		return t.stream(ctx, "message/stream", params, a2av0.FromV1SendMessageRequest(req))
	}
	return t.stream(ctx, "SendStreamingMessage", params, req)
}

// SubscribeToTask implements a2aclient.Transport.
func (t *leanTransport) SubscribeToTask(ctx context.Context, params a2aclient.ServiceParams, req *sdk.SubscribeToTaskRequest) iter.Seq2[sdk.Event, error] {
	if t.v03 {
		return t.stream(ctx, "tasks/resubscribe", params, a2av0.FromV1SubscribeToTaskRequest(req))
	}
	return t.stream(ctx, "SubscribeToTask", params, req)
}

var rpcSeq atomic.Uint64

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
	ID      string `json:"id"`
}

type rpcResponse struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int                   `json:"code"`
	Message string                `json:"message"`
	Data    []*errordetails.Typed `json:"data,omitempty"`
}

// stream posts one streaming request and yields its events, as a2a-go's transport does
// (same request, same errors), reading the SSE body with a small buffer.
func (t *leanTransport) stream(ctx context.Context, method string, params a2aclient.ServiceParams, payload any) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		req, err := t.newStreamRequest(ctx, method, params, payload)
		if err != nil {
			yield(nil, err)
			return
		}
		resp, err := t.http.Do(req)
		if err != nil {
			yield(nil, fmt.Errorf("failed to send HTTP request: %w", err))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			yield(nil, fmt.Errorf("unexpected HTTP status: %s", resp.Status))
			return
		}
		for data, err := range sse.Read(resp.Body, maxSSEEvent) {
			if err != nil {
				yield(nil, fmt.Errorf("SSE stream error: %w", err))
				return
			}
			ev, err := t.decode(data)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// newStreamRequest is the HTTP request of a streaming call. Built apart from the reading,
// so that what building it needs (the encoded body, the header iteration) is not held on the
// stack of a goroutine that waits on the stream for as long as the task runs.
func (t *leanTransport) newStreamRequest(ctx context.Context, method string, params a2aclient.ServiceParams, payload any) (*http.Request, error) {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method, Params: payload, ID: strconv.FormatUint(rpcSeq.Add(1), 36)})
	if err != nil {
		return nil, fmt.Errorf("failed to marshal request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("failed to create HTTP request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	hdr := map[string][]string(params)
	if t.v03 {
		hdr = a2av0.FromServiceParams(params)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req, nil
}

// decode turns one SSE data payload (a JSON-RPC response) into an event or an error.
func (t *leanTransport) decode(data []byte) (sdk.Event, error) {
	var resp rpcResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("failed to parse SSE data: %w", err)
	}
	if resp.Error != nil {
		return nil, fromRPCError(resp.Error)
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

// rpcCodes maps JSON-RPC error codes to the SDK's errors, as a2a-go's transport does.
var rpcCodes = map[int]error{
	-32700: sdk.ErrParseError,
	-32600: sdk.ErrInvalidRequest,
	-32601: sdk.ErrMethodNotFound,
	-32602: sdk.ErrInvalidParams,
	-32603: sdk.ErrInternalError,
	-32000: sdk.ErrServerError,
	-32001: sdk.ErrTaskNotFound,
	-32002: sdk.ErrTaskNotCancelable,
	-32003: sdk.ErrPushNotificationNotSupported,
	-32004: sdk.ErrUnsupportedOperation,
	-32005: sdk.ErrUnsupportedContentType,
	-32006: sdk.ErrInvalidAgentResponse,
	-32007: sdk.ErrExtendedCardNotConfigured,
	-32008: sdk.ErrExtensionSupportRequired,
	-32009: sdk.ErrVersionNotSupported,
	-31401: sdk.ErrUnauthenticated,
	-31403: sdk.ErrUnauthorized,
}

// fromRPCError converts a JSON-RPC error to an *sdk.Error (code, message and the first
// structured detail; error-info metadata is not needed by this client and is dropped).
func fromRPCError(e *rpcError) error {
	base, ok := rpcCodes[e.Code]
	if !ok {
		base = sdk.ErrInternalError
	}
	msg := e.Message
	if msg == "" {
		msg = base.Error()
	}
	out := sdk.NewError(base, msg)
	first := true
	for _, d := range e.Data {
		if d == nil || d.TypeURL == errordetails.ErrorInfoType {
			continue
		}
		if first {
			out = out.WithDetails(d.Value)
			first = false
		}
		out.TypedDetails = append(out.TypedDetails, d)
	}
	return out
}
