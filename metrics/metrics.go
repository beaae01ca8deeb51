// Package metrics holds Baton's Prometheus metrics (DESIGN §3, GET /metrics): runs by
// outcome, tool results by tag, A2A task states, downstream cancellations and their latency,
// open interrupts, and retries by failure kind.
//
// Design note: every label value is folded into a closed set before it reaches a metric
// (tool results carry task ids, run end reasons carry free text), so that no caller can
// grow the number of series without bound; anything unrecognised is counted as "other". The
// known label values are created at zero when the Metrics is built, so that a dashboard or
// a test sees a series before its first event and rate() works from the first increment.
// The metrics live in a registry of their own, never the global one, so that several
// coordinators in one process (tests) do not collide; the registry also carries the Go
// runtime and process collectors.
package metrics

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Other is the label value of everything outside a label's closed set.
const Other = "other"

// Closed label sets. They follow DESIGN §5–§7 and §10.
var (
	// RunOutcomes are the values of baton_runs_total{outcome}.
	RunOutcomes = []string{"completed", "interrupt", "cancelled", "error", "stopped", "handoff"}
	// ToolTags are the values of baton_tool_results_total{tag} besides the RETRY:<code> ones.
	ToolTags = []string{"COMPLETED", "FAILED", "REJECTED", "CANCELED", "INPUT_REQUIRED", "AUTH_REQUIRED",
		"TIMEOUT", "UNREACHABLE", "OK", "ERROR", "ANSWERED", "DECLINED", "REFUSED"}
	// RetryCodes are the codes of "[RETRY:<code>]" tool results (DESIGN §7).
	RetryCodes = []string{"unknown_action", "invalid_transition", "validation_failed", "action_timeout",
		"tool_error", "policy_deny", "rate_exceeded", "budget_exceeded"}
	// TaskStates are the values of baton_a2a_task_states_total{state}: the A2A task states
	// plus "message" (a direct reply without a task) and "error" (no state: the delegation
	// failed at the protocol level).
	TaskStates = []string{"submitted", "working", "completed", "failed", "rejected", "canceled",
		"input-required", "auth-required", "message", "error"}
	// CancelResults are the values of baton_cancellations_total{result} (the results of
	// package cancel): "cancelled" (the downstream piece acknowledged the cancel, or was
	// already terminal), "failed" (the cancel call failed), "no_task_id" (the A2A task id never
	// arrived before the deadline, so nothing could be cancelled); and for A2A tasks whose
	// cancellation is followed until the agent confirms it, the final outcome only:
	// "confirmed", "already_terminal" (the task had ended on its own) or "abandoned" (not
	// confirmed within limits.cancel_horizon); "moved": not sent, because the run was taken
	// over by another replica, which follows the piece.
	CancelResults = []string{"cancelled", "failed", "no_task_id", "confirmed", "already_terminal", "abandoned", "moved"}
	// FailureKinds are the values of baton_retries_total{kind} (DESIGN §6).
	FailureKinds = []string{"transient_provider", "output_truncated", "output_refused", "tool_error",
		"no_progress", "loop_detected", "capability_gap", "policy_violation", "ambiguous_input",
		"iteration_limit", "time_limit"}
)

// Metrics records what the engine does. The zero value is not usable; use New. A nil
// *Metrics is a valid no-op recorder, so that callers need no checks.
type Metrics struct {
	reg            *prometheus.Registry
	runs           *prometheus.CounterVec
	toolResults    *prometheus.CounterVec
	taskStates     *prometheus.CounterVec
	cancellations  *prometheus.CounterVec
	cancelLatency  *prometheus.HistogramVec
	interruptsOpen prometheus.Gauge
	retries        *prometheus.CounterVec
	calls          *callMetrics
	spend          *spendMetrics
}

// New builds the metrics in a registry of their own.
func New(opts ...Option) *Metrics {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_runs_total",
			Help: "AG-UI runs that ended, by outcome (completed, interrupt, cancelled, error, stopped, handoff, other).",
		}, []string{"outcome"}),
		toolResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_tool_results_total",
			Help: "Tool results given to the model, by tag (COMPLETED, OK, RETRY:validation_failed, ...).",
		}, []string{"tag"}),
		taskStates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_a2a_task_states_total",
			Help: "Delegations to A2A sub-agents, by the state the remote task settled in.",
		}, []string{"state"}),
		cancellations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_cancellations_total",
			Help: "Downstream cancellations (A2A CancelTask) sent when a run was cancelled or timed out, by result.",
		}, []string{"result"}),
		cancelLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "baton_cancellation_latency_seconds",
			Help: "Time from the decision to cancel to the sub-agent's answer to CancelTask, by result.",
			// From well under the 25 ms target (DESIGN §13) up to the 5 s cancel deadline.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"result"}),
		interruptsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_interrupts_open",
			Help: "Interrupts raised and not yet resumed, cancelled or expired.",
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_retries_total",
			Help: "Retries decided by the failure policy, by failure kind (DESIGN §6).",
		}, []string{"kind"}),
		calls: newCallMetrics(),
		spend: newSpendMetrics(o.meters),
	}
	m.reg.MustRegister(m.calls.collectors()...)
	m.reg.MustRegister(m.spend.collectors()...)
	m.calls.init()
	m.reg.MustRegister(m.runs, m.toolResults, m.taskStates, m.cancellations, m.cancelLatency, m.interruptsOpen, m.retries,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, v := range slices.Concat(RunOutcomes, []string{Other}) {
		m.runs.WithLabelValues(v)
	}
	for _, v := range ToolTags {
		m.toolResults.WithLabelValues(v)
	}
	for _, c := range RetryCodes {
		m.toolResults.WithLabelValues("RETRY:" + c)
	}
	m.toolResults.WithLabelValues(Other)
	for _, v := range slices.Concat(TaskStates, []string{Other}) {
		m.taskStates.WithLabelValues(v)
	}
	for _, v := range slices.Concat(CancelResults, []string{Other}) {
		m.cancellations.WithLabelValues(v)
		m.cancelLatency.WithLabelValues(v)
	}
	for _, v := range slices.Concat(FailureKinds, []string{Other}) {
		m.retries.WithLabelValues(v)
	}
	return m
}

// Handler serves the metrics in the Prometheus exposition formats (text, or OpenMetrics
// when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Registry returns the registry the metrics live in, to add collectors to it.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// RunFinished counts a run that ended. outcome is the run's typed outcome ("completed",
// "interrupt", "cancelled", "error", "stopped" or "handoff"); anything else is counted as
// Other, so that the label set stays closed.
func (m *Metrics) RunFinished(outcome string) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(closed(outcome, RunOutcomes)).Inc()
}

// ToolResult counts a tool result given to the model: tag is the result's tag without
// brackets ("COMPLETED", "RETRY", ...) and code the retry code when tag is "RETRY" (ignored
// otherwise). Both are typed values from the engine, never a rendered result parsed back.
func (m *Metrics) ToolResult(tag, code string) {
	if m == nil {
		return
	}
	m.toolResults.WithLabelValues(ToolLabel(tag, code)).Inc()
}

// ToolLabel is the label value of a tool result: the tag when it is one of ToolTags,
// "RETRY:<code>" for a known retry code, Other for anything else.
func ToolLabel(tag, code string) string {
	if tag == "RETRY" {
		if c := closed(code, RetryCodes); c != Other {
			return "RETRY:" + c
		}
		return Other
	}
	return closed(tag, ToolTags)
}

// A2ATaskState counts a delegation by the state its remote task settled in ("completed",
// "input-required", ...; "message" for a direct reply, "error" when the delegation failed
// without a state). SDK spellings such as "TASK_STATE_INPUT_REQUIRED" are accepted.
func (m *Metrics) A2ATaskState(state string) {
	if m == nil {
		return
	}
	s := strings.ToLower(strings.TrimSpace(state))
	s = strings.TrimPrefix(s, "task_state_")
	s = strings.ReplaceAll(s, "_", "-")
	if s == "cancelled" {
		s = "canceled"
	}
	m.taskStates.WithLabelValues(closed(s, TaskStates)).Inc()
}

// Cancellation records one downstream cancellation: result is "cancelled", "failed" or
// "no_task_id" ("ok" and "error" are read as "cancelled" and "failed"); d is the time from
// the decision to cancel to the downstream acknowledgement (including the wait for a task
// id that had not arrived yet).
func (m *Metrics) Cancellation(result string, d time.Duration) {
	if m == nil {
		return
	}
	r := strings.ToLower(strings.TrimSpace(result))
	switch r {
	case "ok", "canceled":
		r = "cancelled"
	case "error":
		r = "failed"
	}
	r = closed(r, CancelResults)
	m.cancellations.WithLabelValues(r).Inc()
	m.cancelLatency.WithLabelValues(r).Observe(d.Seconds())
}

// InterruptsOpen adds delta (positive when interrupts are raised, negative when they are
// resumed, cancelled or expire) to the number of open interrupts.
func (m *Metrics) InterruptsOpen(delta int) {
	if m == nil {
		return
	}
	m.interruptsOpen.Add(float64(delta))
}

// SetInterruptsOpen sets the number of open interrupts, as the store holds them at start:
// interrupts raised before a restart are resumed (and counted down) after it.
func (m *Metrics) SetInterruptsOpen(n int) {
	if m == nil {
		return
	}
	m.interruptsOpen.Set(float64(n))
}

// Retry counts a retry decided by the failure policy; kind is a failure kind of DESIGN §6
// ("transient_provider", "tool_error", ...).
func (m *Metrics) Retry(kind string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(closed(strings.ToLower(strings.TrimSpace(kind)), FailureKinds)).Inc()
}

// closed returns v when it is one of set, else Other.
func closed(v string, set []string) string {
	if slices.Contains(set, v) {
		return v
	}
	return Other
}
