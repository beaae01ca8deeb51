package metrics

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/baton-dev/baton/spend"
)

func call(provider, model string, in, out int64, cost float64) spend.Call {
	return spend.Call{Provider: provider, RequestModel: model, ResponseModel: model, Usage: spend.Usage{InputTokens: in, OutputTokens: out, CostUSD: cost}}
}

// TestModelUsage: each model call's tokens and cost reach /metrics
// (gen_ai_client_token_usage, baton_cost_usd_total) and the OpenTelemetry instruments
// (gen_ai.client.token.usage with gen_ai.token.type and gen_ai.request.model,
// baton.cost.usd), with the same numbers.
func TestModelUsage(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m := New(WithMeterProvider(mp))
	ctx := context.Background()
	m.ModelUsage(ctx, call("openai", "gpt-4.1-mini", 1200, 300, 0.25))
	m.ModelUsage(ctx, call("openai", "gpt-4.1-mini", 800, 100, 0.5))
	fb := call("made-up", "claude-sonnet-4-5", 10, 1, 0.125)
	fb.RequestModel = "claude-sonnet-4-5"
	m.ModelUsage(ctx, fb)
	m.ModelUsage(ctx, call("openai", "gpt-4.1-mini", -5, -5, -1)) // never negative

	s := scrape(t, m)
	const labels = `gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1-mini",gen_ai_response_model="gpt-4.1-mini"`
	assert.Equal(t, 2000.0, s[`gen_ai_client_token_usage_sum{`+labels+`,gen_ai_token_type="input"}`])
	assert.Equal(t, 400.0, s[`gen_ai_client_token_usage_sum{`+labels+`,gen_ai_token_type="output"}`])
	assert.Equal(t, 3.0, s[`gen_ai_client_token_usage_count{`+labels+`,gen_ai_token_type="output"}`])
	assert.Equal(t, 0.75, s[`baton_cost_usd_total{`+labels+`}`])
	assert.Equal(t, 0.125, s[`baton_cost_usd_total{gen_ai_provider_name="other",gen_ai_request_model="claude-sonnet-4-5",gen_ai_response_model="claude-sonnet-4-5"}`],
		"an unknown provider folds to other")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	tokens := map[string]int64{} // by token type and request model: the sum
	counts := map[string]uint64{}
	costs := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, met := range sm.Metrics {
			switch data := met.Data.(type) {
			case metricdata.Histogram[int64]:
				require.Equal(t, "gen_ai.client.token.usage", met.Name)
				assert.Equal(t, "{token}", met.Unit)
				for _, dp := range data.DataPoints {
					typ, _ := dp.Attributes.Value(attribute.Key("gen_ai.token.type"))
					model, _ := dp.Attributes.Value(attribute.Key("gen_ai.request.model"))
					key := typ.AsString() + " " + model.AsString()
					tokens[key] += dp.Sum
					counts[key] += dp.Count
				}
			case metricdata.Sum[float64]:
				require.Equal(t, "baton.cost.usd", met.Name)
				assert.True(t, data.IsMonotonic)
				for _, dp := range data.DataPoints {
					model, _ := dp.Attributes.Value(attribute.Key("gen_ai.request.model"))
					costs[model.AsString()] += dp.Value
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{"input gpt-4.1-mini": 2000, "output gpt-4.1-mini": 400, "input claude-sonnet-4-5": 10, "output claude-sonnet-4-5": 1}, tokens)
	assert.Equal(t, uint64(3), counts["input gpt-4.1-mini"])
	assert.Equal(t, map[string]float64{"gpt-4.1-mini": 0.75, "claude-sonnet-4-5": 0.125}, costs)

	var nilM *Metrics
	nilM.ModelUsage(ctx, call("openai", "m", 1, 1, 1)) // a nil recorder does nothing
}
