package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/baton-dev/baton/spend"
)

// Option configures New.
type Option func(*options)

type options struct {
	meters metric.MeterProvider
}

// WithMeterProvider records the OpenTelemetry metrics with mp instead of the global meter
// provider (which telemetry.Setup installs with its OTLP exporter).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meters = mp }
}

// InstrumentationName is the instrumentation scope of Baton's OpenTelemetry metrics.
const InstrumentationName = "github.com/baton-dev/baton"

// tokenBuckets are the bucket boundaries the GenAI semantic conventions advise for
// gen_ai.client.token.usage.
var tokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

// spendMetrics are the model usage metrics: OpenTelemetry's GenAI
// gen_ai.client.token.usage and Baton's baton.cost.usd, as OpenTelemetry instruments
// (exported over OTLP) and in Prometheus' spelling (GET /metrics), with the same
// attributes.
type spendMetrics struct {
	tokenUsage *prometheus.HistogramVec
	cost       *prometheus.CounterVec

	otelTokens metric.Int64Histogram
	otelCost   metric.Float64Counter
}

func newSpendMetrics(mp metric.MeterProvider) *spendMetrics {
	s := &spendMetrics{
		tokenUsage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Tokens per model call as the provider reported them (gen_ai.client.token.usage), by provider, requested and answering model, and token type (input, output).",
			Buckets: tokenBuckets,
		}, []string{"gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model", "gen_ai_token_type"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_cost_usd_total",
			Help: "Cost in USD of model calls (baton.cost.usd), priced with llm.prices of the model that answered, by provider, requested and answering model.",
		}, []string{"gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model"}),
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(InstrumentationName)
	var err error
	if s.otelTokens, err = meter.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."), metric.WithExplicitBucketBoundaries(tokenBuckets...)); err != nil {
		otel.Handle(err)
		s.otelTokens, _ = noop.NewMeterProvider().Meter(InstrumentationName).Int64Histogram("gen_ai.client.token.usage")
	}
	if s.otelCost, err = meter.Float64Counter("baton.cost.usd", metric.WithUnit("USD"),
		metric.WithDescription("Cost of model calls, priced with llm.prices of the model that answered.")); err != nil {
		otel.Handle(err)
		s.otelCost, _ = noop.NewMeterProvider().Meter(InstrumentationName).Float64Counter("baton.cost.usd")
	}
	return s
}

func (s *spendMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.tokenUsage, s.cost}
}

// ModelUsage records one model call's tokens and cost. The models are configured names
// (llm.model or a fallback's, and what the pricer names): a bounded set.
func (m *Metrics) ModelUsage(ctx context.Context, c spend.Call) {
	if m == nil {
		return
	}
	provider := closed(c.Provider, Providers)
	in, out, cost := max(c.InputTokens, 0), max(c.OutputTokens, 0), max(c.CostUSD, 0)
	s := m.spend
	s.tokenUsage.WithLabelValues(provider, c.RequestModel, c.ResponseModel, "input").Observe(float64(in))
	s.tokenUsage.WithLabelValues(provider, c.RequestModel, c.ResponseModel, "output").Observe(float64(out))
	s.cost.WithLabelValues(provider, c.RequestModel, c.ResponseModel).Add(cost)

	common := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", c.RequestModel), attribute.String("gen_ai.response.model", c.ResponseModel)}
	s.otelTokens.Record(ctx, in, metric.WithAttributes(append(common, attribute.String("gen_ai.token.type", "input"))...))
	s.otelTokens.Record(ctx, out, metric.WithAttributes(append(common, attribute.String("gen_ai.token.type", "output"))...))
	s.otelCost.Add(ctx, cost, metric.WithAttributes(common...))
}
