package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ErrInvalid is wrapped by the errors of Setup about bad settings.
var ErrInvalid = errors.New("telemetry: invalid setting")

// Protocols of the OTLP exporter (telemetry.otlp_protocol, OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolHTTPJSON     = "http/json"
	ProtocolGRPC         = "grpc"
)

// InstrumentationName names Baton's tracer (the instrumentation scope of its spans).
const InstrumentationName = "github.com/baton-dev/baton"

// Config is the telemetry section of the configuration. The standard OTEL_* variables
// win over it, as operators expect of any OpenTelemetry SDK.
type Config struct {
	// Endpoint is the OTLP base URL (e.g. http://localhost:4318; for grpc
	// http://localhost:4317). Empty, with no OTEL_EXPORTER_OTLP_ENDPOINT, means no tracing.
	Endpoint string
	// Protocol is http/protobuf (default), http/json or grpc.
	Protocol string
	// ServiceName is the service.name resource attribute; default "baton".
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// Getenv reads the environment; default os.Getenv. Tests replace it.
	Getenv func(string) string
	// Logger receives the SDK's own errors (an unreachable collector); default
	// slog.Default().
	Logger *slog.Logger
}

// Provider is the tracing and metrics export set up by Setup. The zero value is not
// usable; a Provider with tracing off hands out no-op tracers.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	// mp exports metrics (gen_ai.client.token.usage, baton.cost.usd: package metrics
	// records them through the global meter provider, which Setup installs); nil: none.
	mp *sdkmetric.MeterProvider
}

// Propagator is W3C trace context plus baggage, the format every peer of Baton reads.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Setup builds the tracer and meter providers from cfg and the OTEL_* variables and
// installs them, with the W3C propagator, as the process-wide defaults (the Anthropic SDK
// reads the global tracer; package metrics records through the global meter). Metrics
// go to the same collector as traces (/v1/metrics), unless OTEL_METRICS_EXPORTER is
// "none" or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT says otherwise. With nothing configured
// it returns a Provider that records nothing: no exporter, no connection. Exporters connect lazily, so an unreachable collector never stops the start.
func Setup(ctx context.Context, cfg Config) (*Provider, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	otel.SetTextMapPropagator(Propagator)
	p := &Provider{tracer: noop.NewTracerProvider().Tracer(InstrumentationName)}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return p, nil
	}
	traces, tracesFull := signalEndpoint(getenv, cfg, "TRACES")
	metrics, metricsFull := signalEndpoint(getenv, cfg, "METRICS")
	if traces == "" && metrics == "" {
		return p, nil
	}
	name := cfg.ServiceName
	if name == "" {
		name = "baton"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// WithFromEnv comes last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("%w: resource: %v", ErrInvalid, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	// Export failures go to Baton's log (at warn: telemetry never stops a run), not to
	// the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry", "err", err) }))
	if traces != "" {
		exp, err := newExporter(ctx, signalProtocol(getenv, cfg, "TRACES"), traces, tracesFull)
		if err != nil {
			return nil, err
		}
		// No WithSampler: the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		p.tp, p.tracer = tp, tp.Tracer(InstrumentationName)
	}
	if metrics != "" {
		exp, err := newMetricExporter(ctx, signalProtocol(getenv, cfg, "METRICS"), metrics, metricsFull)
		if err != nil {
			return nil, err
		}
		// The periodic reader reads OTEL_METRIC_EXPORT_INTERVAL (default 60 s).
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		p.mp = mp
	}
	return p, nil
}

// signalEndpoint is the OTLP endpoint of one signal (TRACES or METRICS): its own variable
// (a whole URL: full), else the general variable or the config key (a base URL); "" when
// none is set or the signal's exporter is "none" (OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER).
func signalEndpoint(getenv func(string) string, cfg Config, signal string) (endpoint string, full bool) {
	if strings.TrimSpace(getenv("OTEL_"+signal+"_EXPORTER")) == "none" {
		return "", false
	}
	if e := firstEnv(getenv, "OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT"); e != "" {
		return e, true
	}
	if e := firstEnv(getenv, "OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		return e, false
	}
	return strings.TrimSpace(cfg.Endpoint), false
}

// signalProtocol is the OTLP protocol of one signal: its own variable, the general one,
// the config key, or http/protobuf.
func signalProtocol(getenv func(string) string, cfg Config, signal string) string {
	if p := firstEnv(getenv, "OTEL_EXPORTER_OTLP_"+signal+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" {
		return p
	}
	if cfg.Protocol != "" {
		return cfg.Protocol
	}
	return ProtocolHTTPProtobuf
}

// newExporter builds the OTLP exporter for protocol. The endpoint and the protocol are
// passed explicitly (they were resolved with the environment first); the exporter still
// reads the other OTEL_EXPORTER_OTLP_* variables (headers, timeout, TLS) itself.
func newExporter(ctx context.Context, protocol, endpoint string, full bool) (sdktrace.SpanExporter, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, err
	}
	switch protocol {
	case ProtocolGRPC:
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	case ProtocolHTTPProtobuf, ProtocolHTTPJSON:
		if !full {
			endpoint = strings.TrimRight(endpoint, "/") + "/v1/traces"
		}
		enc := otlptracehttp.EncodingProtobuf
		if protocol == ProtocolHTTPJSON {
			enc = otlptracehttp.EncodingJSON
		}
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithEncoding(enc))
	default:
		return nil, fmt.Errorf("%w: OTLP protocol %q (use http/protobuf, http/json or grpc)", ErrInvalid, protocol)
	}
}

// newMetricExporter builds the OTLP metric exporter for protocol, as newExporter.
func newMetricExporter(ctx context.Context, protocol, endpoint string, full bool) (sdkmetric.Exporter, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, err
	}
	switch protocol {
	case ProtocolGRPC:
		return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(endpoint))
	case ProtocolHTTPProtobuf, ProtocolHTTPJSON:
		// The Go SDK's metric exporter speaks only protobuf over HTTP; an OTLP/HTTP
		// receiver takes both encodings.
		if !full {
			endpoint = strings.TrimRight(endpoint, "/") + "/v1/metrics"
		}
		return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint))
	default:
		return nil, fmt.Errorf("%w: OTLP protocol %q (use http/protobuf, http/json or grpc)", ErrInvalid, protocol)
	}
}

// checkEndpoint refuses an endpoint that is not an http or https URL.
func checkEndpoint(endpoint string) error {
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is not repeated: it may hold credentials.
		return fmt.Errorf("%w: the OTLP endpoint must be an http:// or https:// URL", ErrInvalid)
	}
	return nil
}

func firstEnv(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p.tp != nil }

// Tracer returns Baton's tracer (a no-op one when tracing is off).
func (p *Provider) Tracer() trace.Tracer { return p.tracer }

// Shutdown exports the spans and metrics still buffered and stops the exporters; call it
// once, at the end of the process (after the runs have ended), with a deadline.
func (p *Provider) Shutdown(ctx context.Context) error {
	var errs []error
	if p.tp != nil {
		errs = append(errs, p.tp.Shutdown(ctx))
	}
	if p.mp != nil {
		errs = append(errs, p.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
