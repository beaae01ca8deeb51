package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP endpoint that records what it is sent.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	types    []string
	names    []string
	services []string
	// metrics are the names of the metrics received (/v1/metrics), apart from the spans.
	metrics []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if r.URL.Path == "/v1/metrics" {
			var msg colmetricpb.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &msg); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rm := range msg.GetResourceMetrics() {
				for _, sm := range rm.GetScopeMetrics() {
					for _, m := range sm.GetMetrics() {
						rc.metrics = append(rc.metrics, m.GetName())
					}
				}
			}
			out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
			return
		}
		rc.types = append(rc.types, r.URL.Path+" "+r.Header.Get("Content-Type"))
		if r.Header.Get("Content-Type") == "application/x-protobuf" {
			var msg coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &msg); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rs := range msg.GetResourceSpans() {
				for _, a := range rs.GetResource().GetAttributes() {
					if a.GetKey() == "service.name" {
						rc.services = append(rc.services, a.GetValue().GetStringValue())
					}
				}
				for _, ss := range rs.GetScopeSpans() {
					for _, s := range ss.GetSpans() {
						rc.names = append(rc.names, s.GetName())
					}
				}
			}
		} else {
			rc.names = append(rc.names, "json:"+string(body))
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		if r.Header.Get("Content-Type") == "application/json" {
			_, _ = w.Write([]byte("{}"))
			return
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() ([]string, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.types...), append([]string(nil), rc.names...)
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSetupOffWithoutEndpoint(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing":        {},
		"sdk disabled":   {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"exporters none": {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"only protocol":  {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"only name":      {"OTEL_SERVICE_NAME": "x"},
		"blank endpoint": {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Setup(context.Background(), Config{Getenv: envOf(env)})
			require.NoError(t, err)
			assert.False(t, p.Enabled())
			_, span := p.Tracer().Start(context.Background(), "x")
			assert.False(t, span.IsRecording())
			span.End()
			require.NoError(t, p.Shutdown(context.Background()))
		})
	}
}

func TestSetupExportsToConfiguredEndpoint(t *testing.T) {
	rc := newReceiver(t)
	p, err := Setup(context.Background(), Config{Endpoint: rc.URL, ServiceName: "baton-test", Getenv: envOf(nil)})
	require.NoError(t, err)
	require.True(t, p.Enabled())
	_, span := p.Tracer().Start(context.Background(), "run")
	span.End()
	require.NoError(t, p.Shutdown(context.Background()), "shutdown flushes the batch")
	types, names := rc.got()
	assert.Equal(t, []string{"/v1/traces application/x-protobuf"}, types)
	assert.Equal(t, []string{"run"}, names)
}

// TestSetupExportsMetrics: metrics recorded through the global meter (as package metrics
// records gen_ai.client.token.usage and baton.cost.usd) reach the collector at
// /v1/metrics, beside the traces; OTEL_METRICS_EXPORTER=none keeps them home.
func TestSetupExportsMetrics(t *testing.T) {
	for name, env := range map[string]map[string]string{"on": nil, "metrics off": {"OTEL_METRICS_EXPORTER": "none"}} {
		t.Run(name, func(t *testing.T) {
			rc := newReceiver(t)
			p, err := Setup(context.Background(), Config{Endpoint: rc.URL, Getenv: envOf(env)})
			require.NoError(t, err)
			c, err := otel.Meter("test").Float64Counter("baton.cost.usd")
			require.NoError(t, err)
			c.Add(context.Background(), 0.25)
			require.NoError(t, p.Shutdown(context.Background()), "shutdown exports what is left")
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if env == nil {
				assert.Equal(t, []string{"baton.cost.usd"}, rc.metrics)
			} else {
				assert.Empty(t, rc.metrics)
			}
		})
	}
}

func TestSetupEnvironmentWins(t *testing.T) {
	fromFile, fromEnv := newReceiver(t), newReceiver(t)
	p, err := Setup(context.Background(), Config{Endpoint: fromFile.URL, Protocol: ProtocolGRPC, Getenv: envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": fromEnv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
	})})
	require.NoError(t, err)
	_, span := p.Tracer().Start(context.Background(), "run")
	span.End()
	require.NoError(t, p.Shutdown(context.Background()))
	types, _ := fromFile.got()
	assert.Empty(t, types)
	types, names := fromEnv.got()
	assert.Equal(t, []string{"/v1/traces application/json"}, types)
	require.Len(t, names, 1)
	assert.Contains(t, names[0], `"name":"run"`)
}

func TestSetupJSONFromConfig(t *testing.T) {
	rc := newReceiver(t)
	p, err := Setup(context.Background(), Config{Endpoint: rc.URL + "/", Protocol: ProtocolHTTPJSON, Getenv: envOf(nil)})
	require.NoError(t, err)
	_, span := p.Tracer().Start(context.Background(), "run")
	span.End()
	require.NoError(t, p.Shutdown(context.Background()))
	types, _ := rc.got()
	assert.Equal(t, []string{"/v1/traces application/json"}, types)
}

func TestSetupRefusesUnknownProtocol(t *testing.T) {
	_, err := Setup(context.Background(), Config{Endpoint: "http://127.0.0.1:1", Getenv: envOf(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"})})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "thrift")
}

func TestSetupGRPCOpensNoConnectionAtStart(t *testing.T) {
	// An unreachable collector must not stop the start: the exporter connects lazily.
	p, err := Setup(context.Background(), Config{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolGRPC, Getenv: envOf(nil)})
	require.NoError(t, err)
	assert.True(t, p.Enabled())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Shutdown(ctx)
}

func testTracer() (trace.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	return tp.Tracer("test"), exp
}

func TestTransportInjectsTraceContext(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	hc := &http.Client{Transport: Transport(nil)}
	tr, _ := testTracer()
	ctx, span := tr.Start(context.Background(), "parent")
	defer span.End()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, req.Header.Get("traceparent"), "the caller's request is not modified")

	req, _ = http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	resp, err = hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	require.Len(t, got, 2)
	sc := span.SpanContext()
	assert.Equal(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", got[0])
	assert.Empty(t, got[1], "no span, no header")
}

func TestExtractAndDetached(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var sc trace.SpanContext
	var detachedErr error
	h := Extract(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		d := Detached(ctx)
		cancel()
		detachedErr = d.Err()
		sc = trace.SpanContextFromContext(d)
	}))
	req := httptest.NewRequest(http.MethodPost, "/agui", nil)
	req.Header.Set("traceparent", tp)
	h.ServeHTTP(httptest.NewRecorder(), req)
	assert.NoError(t, detachedErr, "the request's cancellation does not reach detached work")
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	assert.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
	assert.True(t, sc.IsRemote())

	// A malformed traceparent is ignored: no parent, no error.
	req = httptest.NewRequest(http.MethodPost, "/agui", nil)
	req.Header.Set("traceparent", "00-zz-00-01")
	h.ServeHTTP(httptest.NewRecorder(), req)
	assert.False(t, sc.IsValid())
}

func TestLogHandlerAddsIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).With("component", "x")
	tr, _ := testTracer()
	ctx, span := tr.Start(WithRun(context.Background(), "th-1", "run-1"), "run")
	defer span.End()
	log.InfoContext(ctx, "in a run")
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	sc := span.SpanContext()
	assert.Contains(t, lines[0], "thread_id=th-1 run_id=run-1 trace_id="+sc.TraceID().String()+" span_id="+sc.SpanID().String())
	assert.Contains(t, lines[0], "component=x")
	assert.NotContains(t, lines[1], "trace_id")
	assert.NotContains(t, lines[1], "run_id")
}

func TestMCPMiddleware(t *testing.T) {
	type seen struct{ method, traceparent string }
	var mu sync.Mutex
	var got []seen
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			tp := ""
			if p := req.GetParams(); p != nil && !isNilParams(p) {
				tp, _ = p.GetMeta()["traceparent"].(string)
			}
			mu.Lock()
			got = append(got, seen{method, tp})
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(server, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil, nil
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	require.NoError(t, err)
	defer ss.Close()

	tr, exp := testTracer()
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	client.AddSendingMiddleware(MCPMiddleware(tr, "demo", "pipe"))
	cs, err := client.Connect(context.Background(), ct, nil)
	require.NoError(t, err)
	defer cs.Close()

	ctx, parent := tr.Start(context.Background(), "execute_tool demo__fail")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "missing"})
	require.Error(t, err)
	parent.End()

	spans := exp.GetSpans()
	require.Len(t, spans, 3, "two tools/call spans and the parent; the untraced initialize has none")
	call := spans[0]
	assert.Equal(t, "tools/call fail", call.Name)
	assert.Equal(t, trace.SpanKindClient, call.SpanKind)
	assert.Equal(t, parent.SpanContext().SpanID(), call.Parent.SpanID())
	attrs := map[string]string{}
	for _, a := range call.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	assert.Equal(t, "tools/call", attrs["mcp.method.name"])
	assert.Equal(t, "fail", attrs["gen_ai.tool.name"])
	assert.Equal(t, "tool_error", attrs["error.type"])
	assert.Equal(t, "pipe", attrs["network.transport"])
	assert.NotEmpty(t, attrs["mcp.protocol.version"])

	attrs = map[string]string{}
	for _, a := range spans[1].Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	assert.Equal(t, "tools/call missing", spans[1].Name)
	assert.Equal(t, "-32602", attrs["error.type"], "the JSON-RPC error code")
	assert.Equal(t, "-32602", attrs["rpc.response.status_code"])

	mu.Lock()
	defer mu.Unlock()
	var calls []seen
	for _, s := range got {
		if s.method == "tools/call" {
			calls = append(calls, s)
		}
	}
	require.Len(t, calls, 2)
	assert.Equal(t, "00-"+call.SpanContext.TraceID().String()+"-"+call.SpanContext.SpanID().String()+"-01", calls[0].traceparent, "_meta.traceparent names the request's span")
}

func TestSetupServiceNameAndSignalEndpointFromEnvironment(t *testing.T) {
	rc := newReceiver(t)
	t.Setenv("OTEL_SERVICE_NAME", "baton-from-env")
	p, err := Setup(context.Background(), Config{ServiceName: "baton-from-config", Getenv: envOf(map[string]string{
		// The signal-specific variable is the whole URL: no /v1/traces is added.
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rc.URL + "/custom/traces",
	})})
	require.NoError(t, err)
	_, span := p.Tracer().Start(context.Background(), "run")
	span.End()
	require.NoError(t, p.Shutdown(context.Background()))
	types, _ := rc.got()
	assert.Equal(t, []string{"/custom/traces application/x-protobuf"}, types)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	assert.Equal(t, []string{"baton-from-env"}, rc.services, "OTEL_SERVICE_NAME wins over the config")
}

func TestSetupRefusesBadEndpoint(t *testing.T) {
	_, err := Setup(context.Background(), Config{Getenv: envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})})
	require.ErrorIs(t, err, ErrInvalid)
	assert.NotContains(t, err.Error(), "collector:4318", "the endpoint may hold credentials: it is not repeated")
}
