package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Providers are the values of the provider label of the model metrics.
var Providers = []string{"openai", "anthropic", "scripted"}

// callMetrics are the latency and usage metrics of model calls, runs and tool calls. The
// tool-call target label only takes the configured agent and MCP server names
// (SetToolTargets): a name a peer made up is counted as "other".
type callMetrics struct {
	modelLatency *prometheus.HistogramVec
	modelTokens  *prometheus.CounterVec
	runDuration  *prometheus.HistogramVec
	toolCalls    *prometheus.CounterVec
	toolLatency  *prometheus.HistogramVec

	mu      sync.RWMutex
	targets map[string]map[string]bool // kind → configured names
}

func newCallMetrics() *callMetrics {
	return &callMetrics{
		modelLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_model_call_duration_seconds",
			Help:    "Duration of model turns (all attempts of one turn), by provider, model and outcome (ok, error).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"provider", "model", "outcome"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_model_tokens_total",
			Help: "Tokens reported by the model provider, by provider, model and direction (input, output).",
		}, []string{"provider", "model", "direction"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_run_duration_seconds",
			Help:    "Duration of AG-UI runs (one part of a run: up to its end or interrupt), by outcome.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"outcome"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_tool_calls_total",
			Help: "Tool calls to sub-agents and MCP servers, by kind (agent, mcp), configured target name and result tag.",
		}, []string{"kind", "target", "tag"}),
		toolLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_tool_call_duration_seconds",
			Help:    "Duration of tool calls to sub-agents and MCP servers, by kind (agent, mcp) and configured target name.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"kind", "target"}),
		targets: map[string]map[string]bool{},
	}
}

func (c *callMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.modelLatency, c.modelTokens, c.runDuration, c.toolCalls, c.toolLatency}
}

// SetToolTargets names the configured sub-agents and MCP servers: the only values the
// target label of the tool-call metrics takes.
func (m *Metrics) SetToolTargets(agents, mcpServers []string) {
	if m == nil {
		return
	}
	c := m.calls
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targets = map[string]map[string]bool{"agent": {}, "mcp": {}}
	for _, a := range agents {
		c.targets["agent"][a] = true
		c.toolLatency.WithLabelValues("agent", a)
	}
	for _, s := range mcpServers {
		c.targets["mcp"][s] = true
		c.toolLatency.WithLabelValues("mcp", s)
	}
}

// ModelCall records one model turn: its duration, outcome ("ok" or "error") and tokens.
// model is the configured model name (one value per process).
func (m *Metrics) ModelCall(provider, model, outcome string, d time.Duration, inputTokens, outputTokens int) {
	if m == nil {
		return
	}
	c := m.calls
	provider = closed(provider, Providers)
	if outcome != "ok" {
		outcome = "error"
	}
	c.modelLatency.WithLabelValues(provider, model, outcome).Observe(d.Seconds())
	if inputTokens > 0 {
		c.modelTokens.WithLabelValues(provider, model, "input").Add(float64(inputTokens))
	}
	if outputTokens > 0 {
		c.modelTokens.WithLabelValues(provider, model, "output").Add(float64(outputTokens))
	}
}

// RunDuration records how long a run (or the part of it up to an interrupt) took, by
// outcome (the same closed set as baton_runs_total).
func (m *Metrics) RunDuration(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.runDuration.WithLabelValues(closed(outcome, RunOutcomes)).Observe(d.Seconds())
}

// ToolCall records one call to a sub-agent (kind "agent") or an MCP server (kind "mcp"):
// target is the configured name, tag and code the result's tag and retry code (folded like
// ToolResult), tag "INTERRUPT" for a call that waits for the user.
func (m *Metrics) ToolCall(kind, target, tag, code string, d time.Duration) {
	if m == nil {
		return
	}
	c := m.calls
	if kind != "agent" && kind != "mcp" {
		return
	}
	c.mu.RLock()
	known := c.targets[kind][target]
	c.mu.RUnlock()
	if !known {
		target = Other
	}
	folded := Other
	if tag == "INTERRUPT" {
		folded = "INTERRUPT"
	} else if tag != "" {
		folded = ToolLabel(tag, code)
	}
	c.toolCalls.WithLabelValues(kind, target, folded).Inc()
	c.toolLatency.WithLabelValues(kind, target).Observe(d.Seconds())
}

// init creates the run duration series of every outcome at zero.
func (c *callMetrics) init() {
	for _, v := range slices.Concat(RunOutcomes, []string{Other}) {
		c.runDuration.WithLabelValues(v)
	}
}
