package telemetry

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// MCPMiddleware returns go-sdk sending middleware for the MCP server named server (its
// config name: never a name a peer chose). Every request sent in a traced context gets
// a client span named "{mcp.method.name} {target}" (MCP semantic conventions), and every
// request, traced or not, carries the W3C trace context in params._meta (traceparent,
// tracestate, baggage, as MCP 2026-07-28 reserves them), on stdio and HTTP alike.
// Requests sent outside any trace (the background tools/list of a reconnect) get no span
// of their own. transport is "pipe" for stdio and "tcp" for HTTP (network.transport).
func MCPMiddleware(tracer trace.Tracer, server, transport string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				return next(ctx, method, req)
			}
			notification := strings.HasPrefix(method, "notifications/")
			var span trace.Span
			if !notification {
				name, attrs := mcpSpan(method, req, server, transport)
				ctx, span = tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
			}
			injectMeta(ctx, req)
			res, err := next(ctx, method, req)
			if span != nil {
				endMCPSpan(span, req, res, err)
			}
			return res, err
		}
	}
}

func mcpSpan(method string, req mcp.Request, server, transport string) (string, []attribute.KeyValue) {
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", method),
		attribute.String("baton.mcp.server", server),
		attribute.String("network.transport", transport),
	}
	name := method
	if p, ok := req.GetParams().(*mcp.CallToolParams); ok && p != nil {
		name += " " + p.Name
		attrs = append(attrs, attribute.String("gen_ai.tool.name", p.Name), attribute.String("gen_ai.operation.name", "execute_tool"))
	}
	if s := req.GetSession(); s != nil {
		if id := s.ID(); id != "" {
			attrs = append(attrs, attribute.String("mcp.session.id", id))
		}
	}
	return name, attrs
}

func endMCPSpan(span trace.Span, req mcp.Request, res mcp.Result, err error) {
	defer span.End()
	if s := req.GetSession(); s != nil {
		if cs, ok := s.(*mcp.ClientSession); ok {
			if ir := cs.InitializeResult(); ir != nil {
				span.SetAttributes(attribute.String("mcp.protocol.version", ir.ProtocolVersion))
			}
		}
	}
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &we):
		code := strconv.FormatInt(we.Code, 10)
		span.SetAttributes(attribute.String("error.type", code), attribute.String("rpc.response.status_code", code))
		span.SetStatus(codes.Error, "JSON-RPC error "+code)
	case err != nil:
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, errorType(err))
	default:
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			span.SetAttributes(attribute.String("error.type", "tool_error"))
			span.SetStatus(codes.Error, "tool_error")
		}
	}
}

// errorType names a transport-level failure without its message (which may hold a URL).
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "_OTHER"
	}
}

// injectMeta writes the trace context of ctx into the request's params._meta.
func injectMeta(ctx context.Context, req mcp.Request) {
	p := req.GetParams()
	if p == nil || isNilParams(p) {
		return
	}
	m := p.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	Propagator.Inject(ctx, metaCarrier(m))
	p.SetMeta(m)
}

// isNilParams reports a typed nil inside the Params interface (a request built without
// params), which GetMeta would dereference.
func isNilParams(p mcp.Params) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// metaCarrier is a TextMapCarrier over an MCP _meta object.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
