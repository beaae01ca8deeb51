package coordinator

import (
	"context"
	"encoding/json"
	"iter"
	"math"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
)

// Usage, cost, budgets and the fallback chain of a run's model calls (DESIGN §4, §7;
// design/spend.md). The run budget is the guard's (failure.Guard, kept in the run's
// state); the principal's day is the store's (spend.Meter).

// CustomBudgetWarning is the CUSTOM event of a budget that passed its warn_at.
const CustomBudgetWarning = "baton.budget_warning"

// SpendMetrics is implemented by a Metrics that also records token usage and cost
// (package metrics does).
type SpendMetrics interface {
	ModelUsage(ctx context.Context, c spend.Call)
}

// fallbackChain is a model with fallbacks (llm.Chain).
type fallbackChain interface {
	Len() int
	Link(i int) llm.Link
	At(i int) llm.Model
}

// runSpend is the run's model bookkeeping. link and attempt are owned by the run's loop
// goroutine; the rest is also written by its sub-agent calls (which may run in
// parallel), under mu.
type runSpend struct {
	// link is the model of the fallback chain the run is on: it stays on the one it
	// switched to.
	link int
	// attempt is what the current attempt at a model call streamed.
	attempt attemptMeter
	// limits are the run's token and cost budget: policy.budget, or the smaller budget a
	// calling Baton gave (set once, with the run's guard, before any tool call).
	limits spend.Limits

	mu sync.Mutex
	// notes are [BUDGET_WARNING] notes for the model's next input.
	notes []string
	// principalOver is the principal's spent day, seen by the last call's increment.
	principalOver *spend.Exceeded
	// used is what this run (not its thread's earlier runs) used: its model calls and
	// its sub-agents' reports. A run another Baton started reports it (baton.usage).
	used spend.Usage
}

// The run's usage, budgets and fallbacks are functions over the run below (and in
// spend_tree.go): they read the run's guard, failure state and input as they are at the
// call, and keep their own bookkeeping in its runSpend.

// runModel is the model the run's turns go to, metered (see meteredModel).
func runModel(r *Run) llm.Model {
	m := r.e.cfg.Model
	if c, ok := m.(fallbackChain); ok {
		m = c.At(r.sp.link)
	}
	return meteredModel{m: m, sp: &r.sp}
}

// attemptMeter is what one attempt at a model call streamed: enough to estimate the
// usage of an attempt cut before the provider reported it.
type attemptMeter struct {
	inputBytes  int
	outputBytes int
	deltas      int
}

// meteredModel notes, in the run's bookkeeping, what each attempt streamed. The
// iterator runs on the run's loop goroutine, as everything that reads sp.
type meteredModel struct {
	m  llm.Model
	sp *runSpend
}

func (mm meteredModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	in := 0
	for _, msg := range req.Messages {
		in += len(msg.Content)
		for _, c := range msg.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	mm.sp.attempt = attemptMeter{inputBytes: in}
	return func(yield func(llm.Delta, error) bool) {
		for d, err := range mm.m.Stream(ctx, req) {
			if err == nil {
				a := &mm.sp.attempt
				a.deltas++
				a.outputBytes += len(d.Text)
				if d.ToolCall != nil {
					a.outputBytes += len(d.ToolCall.Name) + len(d.ToolCall.Arguments)
				}
			}
			if !yield(d, err) {
				return
			}
		}
	}
}

// bytesPerToken is the estimate of a cut attempt's tokens from its bytes.
const bytesPerToken = 4

// estimate is the usage of an attempt that streamed something but never completed: the
// provider answered, so it bills the request and what it sent, but its usage report
// (the stream's last chunk) never came. Zero for an attempt that streamed nothing.
func (a attemptMeter) estimate() (llm.Usage, bool) {
	if a.deltas == 0 {
		return llm.Usage{}, false
	}
	return llm.Usage{InputTokens: (a.inputBytes + bytesPerToken - 1) / bytesPerToken, OutputTokens: (a.outputBytes + bytesPerToken - 1) / bytesPerToken}, true
}

// runProvider is gen_ai.provider.name of the model the run is on.
func runProvider(r *Run) string {
	if c, ok := r.e.cfg.Model.(fallbackChain); ok {
		return c.Link(r.sp.link).Provider
	}
	return r.e.cfg.Tracing.Provider
}

// runRequestModel is gen_ai.request.model of the model the run is on: the chain's link, or
// the configured model.
func runRequestModel(r *Run) string {
	if c, ok := r.e.cfg.Model.(fallbackChain); ok {
		return c.Link(r.sp.link).Name
	}
	return r.e.cfg.Tracing.Model
}

// accountCall counts a completed model call: priced with the answering model's prices, added
// to the run's budget and to the principal's day, exported, and warned about once per
// budget and threshold. It returns the model_call step's detail.
func accountCall(ctx context.Context, r *Run, c *llm.Completion) string {
	estimated := false
	if c == nil {
		u, ok := r.sp.attempt.estimate()
		if !ok {
			return ""
		}
		// The stream was cut before its usage arrived: counted as estimated, priced
		// with the prices of the model the run is on.
		model := ""
		if ch, ok := r.e.cfg.Model.(fallbackChain); ok {
			model = ch.Link(r.sp.link).Name
		}
		c, estimated = &llm.Completion{Model: model, Usage: u}, true
	}
	r.sp.attempt = attemptMeter{}
	m := r.e.cfg.Spend
	u := m.Price(c.Model, c.Usage)
	model := m.Model(c.Model)
	if model == "" {
		model = r.e.cfg.Tracing.Model
	}
	countUsage(ctx, r, u)
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("gen_ai.response.model", model), attribute.Float64("baton.cost.usd", u.CostUSD))
	if sm, ok := r.e.cfg.Metrics.(SpendMetrics); ok {
		sm.ModelUsage(ctx, spend.Call{Provider: runProvider(r), RequestModel: runRequestModel(r), ResponseModel: model, Usage: u})
	}
	detail, _ := json.Marshal(struct {
		Model string `json:"model"`
		spend.Usage
		Estimated bool `json:"estimated,omitempty"`
	}{model, u, estimated})
	return string(detail)
}

// budgetCheck is the check before a model call: the run's token and cost budget and the
// principal's day. Nil while both last.
func budgetCheck(ctx context.Context, r *Run) *failure.Failure {
	f := r.guard.AddTokens(0)
	var ex *spend.Exceeded // the principal's spent day, when it is what refuses the call
	if f == nil {
		r.sp.mu.Lock()
		ex = r.sp.principalOver
		r.sp.mu.Unlock()
		if ex == nil && r.e.cfg.Spend.DailyBudget() {
			// Other runs of the principal spend the same day, on any replica.
			dctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
			var err error
			if ex, err = r.e.cfg.Spend.DayOver(dctx, r.owner); err != nil {
				r.log.Warn("read the principal's day", "err", err)
			}
			cancel()
		}
		if ex == nil {
			return nil
		}
		f = &failure.Failure{Kind: failure.KindPolicyViolation, Code: "RETRY:budget_exceeded", Explanation: ex.Message()}
	}
	// The refusal in the journal: what was refused, and how it resolves.
	res := bridge.Resolution{Type: failure.ResolutionHandoff}
	if ex != nil {
		res = bridge.Resolution{Type: failure.ResolutionWait, ResetsAt: ex.ResetsAt.UTC().Format(time.RFC3339),
			RetryAfterSeconds: math.Ceil(time.Until(ex.ResetsAt).Seconds())}
	} else if o := r.guard.Over(); o != nil {
		res.Raise = o.Raise()
	}
	detail, _ := json.Marshal(struct {
		Message    string            `json:"message"`
		Resolution bridge.Resolution `json:"resolution"`
	}{f.Explanation, res})
	r.dur.step(store.StepRefusal, "model", "", store.StepEnd{Outcome: store.StepError, Tag: "RETRY:budget_exceeded", FailureKind: string(failure.KindPolicyViolation), Detail: string(detail)})
	return f
}

// takeNotes returns the pending [BUDGET_WARNING] notes for the next model input, once.
func (sp *runSpend) takeNotes() string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := strings.Join(sp.notes, "\n")
	sp.notes = nil
	return n
}

// withNotes adds the budget notes to the lessons' addendum.
func withNotes(addendum, notes string) string {
	switch {
	case notes == "":
		return addendum
	case addendum == "":
		return notes
	}
	return addendum + "\n\n" + notes
}

// fallBack switches the run to the next model of the chain after its model failed with
// transient_provider and the policy gave up on it. It reports whether it switched; the
// switch is a model_fallback journal step and the span's gen_ai.request.model.
func fallBack(r *Run, span trace.Span, f failure.Failure) bool {
	c, ok := r.e.cfg.Model.(fallbackChain)
	if !ok || f.Kind != failure.KindTransientProvider || r.sp.link+1 >= c.Len() {
		return false
	}
	from := c.Link(r.sp.link)
	r.sp.link++
	to := c.Link(r.sp.link)
	r.log.Warn("model fallback", "from", from.Name, "to", to.Name, "kind", f.Kind)
	detail, _ := json.Marshal(map[string]string{"from": from.Name, "to": to.Name, "provider": to.Provider, "failureKind": string(f.Kind)})
	r.dur.step(store.StepModelFallback, to.Name, "", store.StepEnd{Outcome: store.StepOK, FailureKind: string(f.Kind), Detail: string(detail)})
	span.SetAttributes(attribute.String("gen_ai.request.model", to.Name), attribute.String("gen_ai.provider.name", to.Provider),
		attribute.String("baton.fallback.from", from.Name))
	span.AddEvent("baton.model_fallback", trace.WithAttributes(attribute.String("from", from.Name), attribute.String("to", to.Name)))
	// The fallback gets retries of its own.
	r.fs.Recovered(failure.KindTransientProvider, "")
	return true
}

// BudgetExceededError refuses a run of a principal whose day is spent (AG-UI: 429
// BUDGET_EXCEEDED). Its message is safe to show: the budget and when it resets.
type BudgetExceededError = runs.BudgetExceededError

// admitSpend refuses a run of a principal over its day before it starts. A day the store
// cannot read admits the run (its model calls check again).
func admitSpend(e *Engine, principal string) error {
	if !e.cfg.Spend.DailyBudget() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	ex, err := e.cfg.Spend.DayOver(ctx, principal)
	if err != nil {
		e.log.Warn("read the principal's day", "err", err)
		return nil
	}
	if ex == nil {
		return nil
	}
	return &BudgetExceededError{ResetsAt: ex.ResetsAt, Message: ex.Message()}
}

// spanModel names, on a chat span, the fallback model the run is on (the span starts
// with the configured model's name).
func spanModel(r *Run, span trace.Span) {
	if provider, model := onFallback(r); model != "" {
		span.SetAttributes(attribute.String("gen_ai.request.model", model), attribute.String("gen_ai.provider.name", provider))
	}
}

// onFallback is the provider and model of the fallback the run is on; "" while it is on
// the configured model.
func onFallback(r *Run) (provider, model string) {
	if c, ok := r.e.cfg.Model.(fallbackChain); ok && r.sp.link > 0 {
		l := c.Link(r.sp.link)
		return l.Provider, l.Name
	}
	return "", ""
}
