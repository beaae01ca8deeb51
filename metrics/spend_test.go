package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestModelUsage(t *testing.T) {
	t.Parallel()
	m := New()
	m.ModelUsage("openai", "gpt-4.1-mini", 1200, 300, 0.25)
	m.ModelUsage("openai", "gpt-4.1-mini", 800, 100, 0.5)
	m.ModelUsage("made-up", "claude-sonnet-4-5", 10, 1, 0.125)
	s := scrape(t, m)
	assert.Equal(t, 2000.0, s[`gen_ai_client_token_usage_sum{gen_ai_provider_name="openai",gen_ai_response_model="gpt-4.1-mini",gen_ai_token_type="input"}`])
	assert.Equal(t, 400.0, s[`gen_ai_client_token_usage_sum{gen_ai_provider_name="openai",gen_ai_response_model="gpt-4.1-mini",gen_ai_token_type="output"}`])
	assert.Equal(t, 2.0, s[`gen_ai_client_token_usage_count{gen_ai_provider_name="openai",gen_ai_response_model="gpt-4.1-mini",gen_ai_token_type="output"}`])
	assert.Equal(t, 0.75, s[`baton_cost_usd_total{gen_ai_provider_name="openai",gen_ai_response_model="gpt-4.1-mini"}`])
	assert.Equal(t, 0.125, s[`baton_cost_usd_total{gen_ai_provider_name="other",gen_ai_response_model="claude-sonnet-4-5"}`], "an unknown provider folds to other")
	var nilM *Metrics
	nilM.ModelUsage("openai", "m", 1, 1, 1) // a nil recorder does nothing
}
