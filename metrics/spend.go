package metrics

import "github.com/prometheus/client_golang/prometheus"

// spendMetrics are the model usage metrics named after OpenTelemetry's GenAI
// conventions (gen_ai.client.token.usage) and Baton's cost (baton.cost.usd), in
// Prometheus' spelling.
type spendMetrics struct {
	tokenUsage *prometheus.HistogramVec
	cost       *prometheus.CounterVec
}

func newSpendMetrics() *spendMetrics {
	return &spendMetrics{
		tokenUsage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Tokens per model call as the provider reported them (gen_ai.client.token.usage), by provider, model and token type (input, output).",
			Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304},
		}, []string{"gen_ai_provider_name", "gen_ai_response_model", "gen_ai_token_type"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_cost_usd_total",
			Help: "Cost in USD of model calls (baton.cost.usd), priced with llm.prices of the model that answered, by provider and model.",
		}, []string{"gen_ai_provider_name", "gen_ai_response_model"}),
	}
}

func (s *spendMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.tokenUsage, s.cost}
}

// ModelUsage records one model call's tokens and cost. model is a configured model name
// (llm.model or a fallback's): a bounded set.
func (m *Metrics) ModelUsage(provider, model string, inputTokens, outputTokens int64, costUSD float64) {
	if m == nil {
		return
	}
	provider = closed(provider, Providers)
	m.spend.tokenUsage.WithLabelValues(provider, model, "input").Observe(float64(inputTokens))
	m.spend.tokenUsage.WithLabelValues(provider, model, "output").Observe(float64(outputTokens))
	m.spend.cost.WithLabelValues(provider, model).Add(max(costUSD, 0))
}
