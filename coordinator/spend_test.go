package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/metrics"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// spendRig is an engine on the real openai provider against the fake OpenAI-compatible
// model, which reports usage in its streamed usage chunk.
type spendRig struct {
	e     *Engine
	st    store.Store
	fake  *fakellm.Server
	agent *fakeAgent
}

// usageOf is the usage the fake reports for call i (0-based).
func usageOf(i int) llm.Usage { return llm.Usage{InputTokens: 1234 + 97*i, OutputTokens: 56 + 3*i} }

var testPrices = config.Prices{InputPerMTok: 0.4, OutputPerMTok: 1.6}

// newSpendRig answers calls with a research call each (distinct prompts: no loop) until
// calls, then with text.
func newSpendRig(t *testing.T, calls int, mut func(*Config), daily spend.Limits) *spendRig {
	t.Helper()
	var n atomic.Int64
	fake := fakellm.Start(func(fakellm.Request) fakellm.Reply {
		i := int(n.Add(1)) - 1
		u := usageOf(i)
		if i >= calls-1 {
			return fakellm.Reply{Text: "all done", Usage: &u}
		}
		return fakellm.Reply{ToolCalls: []llm.ToolCall{{Name: "research", Arguments: fmt.Sprintf(`{"prompt":"q%d"}`, i)}}, Usage: &u}
	})
	t.Cleanup(fake.Close)
	m, err := openai.New(openai.Config{BaseURL: fake.URL, Model: "fake-model"})
	require.NoError(t, err)
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")}
	meter := spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(config.LLM{Model: "fake-model", Prices: testPrices}),
		Ledger: st.(spend.Ledger), Daily: daily, WarnAt: 0.8})
	e := newEngine(t, m, agent, func(c *Config) {
		c.Store = st
		c.Spend = meter
		c.Limits.MaxIterations = 50
		if mut != nil {
			mut(c)
		}
	})
	return &spendRig{e: e, st: st, fake: fake, agent: agent}
}

// modelCallDetails returns the model_call steps' details of the thread.
func modelCallDetails(t *testing.T, st store.Store, thread string) []map[string]any {
	t.Helper()
	steps, err := st.Steps(context.Background(), thread, 0, 0)
	require.NoError(t, err)
	var out []map[string]any
	for _, s := range steps {
		if s.Kind != store.StepModelCall {
			continue
		}
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(s.Detail), &d), "model_call detail %q", s.Detail)
		out = append(out, d)
	}
	return out
}

// TestUsageAddsUpToTheCent runs 20 model calls on the fake OpenAI-compatible model: the
// streamed usage of each is priced, written in its model_call step, and the run's, the
// thread's and the principal's day totals are the exact sum.
func TestUsageAddsUpToTheCent(t *testing.T) {
	t.Parallel()
	const calls = 20
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg := metrics.New(metrics.WithMeterProvider(mp))
	rig := newSpendRig(t, calls, func(c *Config) {
		c.Metrics = reg
		c.Tracing = Tracing{Provider: "openai", Model: "fake-model"}
	}, spend.Limits{})
	r := mustStart(t, rig.e, input("spend20"))
	evs := collect(t, r)
	require.Len(t, rig.fake.Requests(), calls)
	assert.Equal(t, "completed", r.EndReason())
	assert.Empty(t, customs(evs, CustomBudgetWarning), "no budget, no warning")
	for _, req := range rig.fake.Requests() {
		require.NotNil(t, req.StreamOptions)
		assert.True(t, req.StreamOptions.IncludeUsage, "the usage chunk is asked for")
	}

	// Expected, in integer micro-dollars per token price: in×0.4 + out×1.6 per million.
	var in, out, microCents int64
	for i := range calls {
		u := usageOf(i)
		in += int64(u.InputTokens)
		out += int64(u.OutputTokens)
		microCents += int64(u.InputTokens)*4 + int64(u.OutputTokens)*16 // tenths of a micro-dollar
	}
	want := float64(microCents) / 1e7
	_, _ = waitEnded(t, rig.st, "spend20", r.RunID)
	details := modelCallDetails(t, rig.st, "spend20")
	require.Len(t, details, calls)
	var sum float64
	for i, d := range details {
		u := usageOf(i)
		assert.Equal(t, "fake-model", d["model"])
		assert.EqualValues(t, u.InputTokens, d["inputTokens"])
		assert.EqualValues(t, u.OutputTokens, d["outputTokens"])
		sum += d["costUsd"].(float64)
	}
	assert.InDelta(t, want, sum, 0.005, "the steps add up to the cent")
	thread, err := rig.e.cfg.Spend.ThreadUsage(context.Background(), "spend20")
	require.NoError(t, err)
	assert.Equal(t, in, thread.InputTokens)
	assert.Equal(t, out, thread.OutputTokens)
	assert.InDelta(t, want, thread.CostUSD, 1e-9, "the thread's total")
	day, err := rig.st.(spend.Ledger).DaySpend(context.Background(), "", spend.Day(time.Now()))
	require.NoError(t, err)
	assert.InDelta(t, want, day.CostUSD, 1e-9, "the principal's day")
	assert.Equal(t, fmt.Sprintf("%.2f", want), fmt.Sprintf("%.2f", thread.CostUSD))

	// /metrics: the cost and the token histogram of the answering model.
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	assert.Contains(t, body, fmt.Sprintf(`gen_ai_client_token_usage_sum{gen_ai_provider_name="openai",gen_ai_request_model="fake-model",gen_ai_response_model="fake-model",gen_ai_token_type="input"} %d`, in))
	assert.Contains(t, body, fmt.Sprintf(`gen_ai_client_token_usage_count{gen_ai_provider_name="openai",gen_ai_request_model="fake-model",gen_ai_response_model="fake-model",gen_ai_token_type="output"} %d`, calls))
	costLine := `baton_cost_usd_total{gen_ai_provider_name="openai",gen_ai_request_model="fake-model",gen_ai_response_model="fake-model"} `
	i := strings.Index(body, costLine)
	require.GreaterOrEqual(t, i, 0, "the cost series")
	v, err := strconv.ParseFloat(strings.Fields(body[i+len(costLine):])[0], 64)
	require.NoError(t, err)
	assert.InDelta(t, want, v, 1e-9)

	// OpenTelemetry: gen_ai.client.token.usage per call and token type, baton.cost.usd.
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var otelCost float64
	otelTokens, otelCalls := map[string]int64{}, map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					typ, _ := dp.Attributes.Value("gen_ai.token.type")
					model, _ := dp.Attributes.Value("gen_ai.request.model")
					assert.Equal(t, "fake-model", model.AsString())
					otelTokens[typ.AsString()] += dp.Sum
					otelCalls[typ.AsString()] += dp.Count
				}
			case metricdata.Sum[float64]:
				for _, dp := range d.DataPoints {
					otelCost += dp.Value
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{"input": in, "output": out}, otelTokens)
	assert.Equal(t, map[string]uint64{"input": calls, "output": calls}, otelCalls, "one record per model call")
	assert.InDelta(t, want, otelCost, 1e-9)
}

// TestRunBudgetStopsAtTheLimit: a run's cost budget warns once at 80% (a [BUDGET_WARNING]
// note in the model's next input and CUSTOM baton.budget_warning), then stops before the
// call that would pass it: policy_violation, with a budget_exceeded refusal in the journal
// that names the key to raise.
func TestRunBudgetStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	// Each call costs about $0.0006; the limit is reached on the 10th call.
	var perCall float64
	for i := range 10 {
		perCall += testPrices.Cost(int64(usageOf(i).InputTokens), int64(usageOf(i).OutputTokens))
	}
	limit := perCall - 1e-6
	rig := newSpendRig(t, 50, func(c *Config) {
		c.Guard = failure.GuardPolicy{Budget: failure.Budget{MaxCostUSD: limit, WarnAt: 0.8}}
	}, spend.Limits{})
	r := mustStart(t, rig.e, input("budget"))
	evs := collect(t, r)
	reqs := rig.fake.Requests()
	assert.Len(t, reqs, 10, "no model call after the limit")
	warnings := customs(evs, CustomBudgetWarning)
	require.Len(t, warnings, 1, "exactly one warning")
	w := warnings[0].Value.(spend.Warning)
	assert.Equal(t, "run", w.Budget)
	assert.Equal(t, "usd", w.Unit)
	assert.GreaterOrEqual(t, w.Used, 0.8*limit)
	assert.Less(t, w.Used, limit)
	notes := 0
	for i, req := range reqs {
		if strings.Contains(req.Messages[0].Content, "[BUDGET_WARNING] ") {
			notes++
			assert.Contains(t, req.Messages[0].Content, `"budget":"run","unit":"usd"`)
			assert.Greater(t, i, 0)
		}
	}
	assert.Equal(t, 1, notes, "the note reaches the model's next input once")
	assert.Equal(t, "handoff: policy_violation", r.EndReason())
	fv := failureValues(evs)
	require.NotEmpty(t, fv)
	assert.Equal(t, failure.KindPolicyViolation, fv[len(fv)-1].Kind)
	assert.Contains(t, fv[len(fv)-1].Explanation, "policy.budget.max_cost_usd")

	// The last turn's call was refused: its tool result is the budget_exceeded refusal,
	// whose resolution names the key to raise; the journal records the refusal.
	res := toolResults(evs)
	require.NotEmpty(t, res)
	last := res[len(res)-1]
	assert.True(t, strings.HasPrefix(last, "[RETRY:budget_exceeded] "), last)
	assert.Contains(t, last, `"resolution":{"type":"handoff","raise":"policy.budget.max_cost_usd"}`)
	_, _ = waitEnded(t, rig.st, "budget", r.RunID)
	steps, err := rig.st.Steps(context.Background(), "budget", 0, 0)
	require.NoError(t, err)
	refusals := 0
	for _, s := range steps {
		if s.Kind == store.StepRefusal {
			refusals++
		}
	}
	assert.Equal(t, 1, refusals, "the refusal is in the journal")
}

// TestPrincipalDayStopsRunsAndAdmission: the principal's daily token budget is counted in
// the store: a run stops when the day is spent, and the next run is refused before it
// starts.
func TestPrincipalDayStopsRunsAndAdmission(t *testing.T) {
	t.Parallel()
	// warn_at 0.8 is passed by the 4th call, the limit by the 5th.
	var four int64
	for i := range 4 {
		four += int64(usageOf(i).InputTokens + usageOf(i).OutputTokens)
	}
	rig := newSpendRig(t, 50, nil, spend.Limits{Tokens: four * 5 / 4})
	r := mustStart(t, rig.e, input("day1"))
	evs := collect(t, r)
	assert.Len(t, rig.fake.Requests(), 5, "no model call once the day is spent")
	warnings := customs(evs, CustomBudgetWarning)
	require.Len(t, warnings, 1)
	assert.Equal(t, "principal", warnings[0].Value.(spend.Warning).Budget)
	assert.Equal(t, "handoff: policy_violation", r.EndReason())
	fv := failureValues(evs)
	require.NotEmpty(t, fv)
	assert.Contains(t, fv[len(fv)-1].Explanation, "daily budget of")
	_, _ = waitEnded(t, rig.st, "day1", r.RunID)
	steps, err := rig.st.Steps(context.Background(), "day1", 0, 0)
	require.NoError(t, err)
	var refusal string
	for _, s := range steps {
		if s.Kind == store.StepRefusal && s.Tag == "RETRY:budget_exceeded" {
			refusal = s.Detail
		}
	}
	assert.Contains(t, refusal, `"type":"wait"`, "the refusal says when the day resets")
	assert.Contains(t, refusal, `"resets_at":"`)

	_, err = rig.e.StartRun(context.Background(), input("day2"), "")
	var be *BudgetExceededError
	require.ErrorAs(t, err, &be, "a new run of the principal is refused before it starts")
	assert.Contains(t, be.Error(), "resets at")
	assert.Len(t, rig.fake.Requests(), 5)
}

var _ agui.Event = (*agui.Custom)(nil)

// TestCutStreamIsEstimated: an attempt cut before its usage chunk is counted from what it
// streamed, marked estimated; the retry's reported usage is exact.
func TestCutStreamIsEstimated(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	u := llm.Usage{InputTokens: 500, OutputTokens: 20}
	fake := fakellm.Start(func(fakellm.Request) fakellm.Reply {
		if n.Add(1) == 1 {
			return fakellm.Reply{Text: strings.Repeat("word ", 40), CutAfter: 5}
		}
		return fakellm.Reply{Text: "done", Usage: &u}
	})
	t.Cleanup(fake.Close)
	m, err := openai.New(openai.Config{BaseURL: fake.URL, Model: "fake-model"})
	require.NoError(t, err)
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	meter := spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(config.LLM{Model: "fake-model", Prices: testPrices}), Ledger: st.(spend.Ledger)})
	e := newEngine(t, m, &fakeAgent{}, fastPolicy, func(c *Config) { c.Store = st; c.Spend = meter })
	r := mustStart(t, e, input("cut"))
	collect(t, r)
	require.Equal(t, "completed", r.EndReason())
	_, _ = waitEnded(t, st, "cut", r.RunID)
	d := modelCallDetails(t, st, "cut")
	require.Len(t, d, 2)
	assert.Equal(t, true, d[0]["estimated"], "the cut attempt is estimated")
	assert.Positive(t, d[0]["inputTokens"])
	assert.Positive(t, d[0]["outputTokens"])
	assert.Nil(t, d[1]["estimated"], "the completed attempt is exact")
	assert.EqualValues(t, 500, d[1]["inputTokens"])
	thread, err := meter.ThreadUsage(context.Background(), "cut")
	require.NoError(t, err)
	assert.Equal(t, int64(500)+int64(d[0]["inputTokens"].(float64)), thread.InputTokens, "both attempts are counted")
}
