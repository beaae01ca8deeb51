package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCallMetrics(t *testing.T) {
	t.Parallel()
	m := New()
	m.SetToolTargets([]string{"research"}, []string{"demo"})
	m.ModelCall("openai", "gpt-4.1-mini", "ok", 300*time.Millisecond, 120, 30)
	m.ModelCall("openai", "gpt-4.1-mini", "boom", time.Second, 0, 0)
	m.ModelCall("made-up", "x", "ok", time.Millisecond, 1, 0)
	m.RunDuration("completed", 2*time.Second)
	m.RunDuration("weird", time.Second)
	m.ToolCall("agent", "research", "FAILED", "", 50*time.Millisecond)
	m.ToolCall("mcp", "demo", "RETRY", "tool_error", 10*time.Millisecond)
	m.ToolCall("mcp", "peer-chosen-name", "OK", "", 10*time.Millisecond)
	m.ToolCall("agent", "research", "INTERRUPT", "", time.Millisecond)
	m.ToolCall("frontend", "x", "OK", "", time.Millisecond) // not a target kind: ignored

	s := scrape(t, m)
	assert.Equal(t, 1.0, s[`baton_model_call_duration_seconds_count{model="gpt-4.1-mini",outcome="ok",provider="openai"}`])
	assert.Equal(t, 1.0, s[`baton_model_call_duration_seconds_count{model="gpt-4.1-mini",outcome="error",provider="openai"}`])
	assert.Equal(t, 120.0, s[`baton_model_tokens_total{direction="input",model="gpt-4.1-mini",provider="openai"}`])
	assert.Equal(t, 30.0, s[`baton_model_tokens_total{direction="output",model="gpt-4.1-mini",provider="openai"}`])
	assert.Equal(t, 1.0, s[`baton_model_tokens_total{direction="input",model="x",provider="other"}`])
	assert.Equal(t, 1.0, s[`baton_run_duration_seconds_count{outcome="completed"}`])
	assert.Equal(t, 1.0, s[`baton_run_duration_seconds_count{outcome="other"}`])
	assert.Equal(t, 0.0, s[`baton_run_duration_seconds_count{outcome="handoff"}`])
	assert.Contains(t, s, `baton_run_duration_seconds_count{outcome="handoff"}`, "created at zero")
	assert.Equal(t, 1.0, s[`baton_tool_calls_total{kind="agent",tag="FAILED",target="research"}`])
	assert.Equal(t, 1.0, s[`baton_tool_calls_total{kind="agent",tag="INTERRUPT",target="research"}`])
	assert.Equal(t, 1.0, s[`baton_tool_calls_total{kind="mcp",tag="RETRY:tool_error",target="demo"}`])
	assert.Equal(t, 1.0, s[`baton_tool_calls_total{kind="mcp",tag="OK",target="other"}`], "names not from the config are folded")
	assert.Equal(t, 2.0, s[`baton_tool_call_duration_seconds_count{kind="agent",target="research"}`])
	for k := range s {
		assert.NotContains(t, k, "peer-chosen-name")
		assert.NotContains(t, k, `kind="frontend"`)
	}
}

func TestNilMetricsCallRecorders(t *testing.T) {
	t.Parallel()
	var m *Metrics
	assert.NotPanics(t, func() {
		m.SetToolTargets([]string{"a"}, nil)
		m.ModelCall("openai", "m", "ok", time.Second, 1, 1)
		m.RunDuration("completed", time.Second)
		m.ToolCall("agent", "a", "OK", "", time.Second)
	})
}
