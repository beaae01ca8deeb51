package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/anthropic"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/metrics"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// anthropicFake is an Anthropic-shaped model: POST /v1/messages answered with an SSE
// stream, the first request with a tool_use, the next ones with text.
type anthropicFake struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []map[string]any
}

func startAnthropicFake(t *testing.T) *anthropicFake {
	f := &anthropicFake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		n := len(f.reqs)
		f.mu.Unlock()
		ev := []any{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-fake",
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 2000, "output_tokens": 1}}}}
		stop := "end_turn"
		if n == 1 {
			stop = "tool_use"
			ev = append(ev,
				"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_2", "name": "research", "input": map[string]any{}}},
				"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"prompt":"second"}`}},
				"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		} else {
			ev = append(ev,
				"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}},
				"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "both done"}},
				"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		}
		ev = append(ev, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 100}},
			"message_stop", map[string]any{"type": "message_stop"})
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i+1 < len(ev); i += 2 {
			data, _ := json.Marshal(ev[i+1])
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[i], data)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *anthropicFake) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.reqs...)
}

// fallbackRig: the primary is the fake OpenAI-compatible model, which makes one tool call
// and then answers every request with status; the fallback is the Anthropic-shaped fake.
func fallbackRig(t *testing.T, status int, mut ...func(*Config)) (*Engine, store.Store, *fakellm.Server, *anthropicFake, *fakeAgent) {
	t.Helper()
	var n atomic.Int64
	primary := fakellm.Start(func(fakellm.Request) fakellm.Reply {
		if n.Add(1) == 1 {
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "research", Arguments: `{"prompt":"first"}`}}}
		}
		return fakellm.Reply{Status: status, Text: "down"}
	})
	t.Cleanup(primary.Close)
	fb := startAnthropicFake(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	om, err := openai.New(openai.Config{BaseURL: primary.URL, Model: "fake-model", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	am, err := anthropic.New(anthropic.Config{BaseURL: fb.srv.URL + "/v1", Model: "claude-fake", APIKey: "k", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	chain := llm.NewChain(llm.Link{Provider: "openai", Name: "fake-model", Model: om}, llm.Link{Provider: "anthropic", Name: "claude-fake", Model: am})
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	meter := spend.NewMeter(spend.MeterConfig{Pricer: spend.NewPricer(config.LLM{Model: "fake-model",
		Fallback: []config.FallbackModel{{Provider: "anthropic", Model: "claude-fake", Prices: config.Prices{InputPerMTok: 3, OutputPerMTok: 15}}}})})
	agent := &fakeAgent{send: finalResult(subagent.StateCompleted, "ok")}
	e := newEngine(t, chain, agent, append([]func(*Config){fastPolicy, func(c *Config) { c.Store = st; c.Spend = meter }}, mut...)...)
	return e, st, primary, fb, agent
}

// TestFallbackOn503KeepsTheConversation: the primary answers 503 after a first turn with a
// tool call; after its retries the run switches to the Anthropic-shaped fallback, which
// gets the conversation with the call and its result intact, and completes with a call of
// its own. The switch is a model_fallback step; the run stays on the fallback.
func TestFallbackOn503KeepsTheConversation(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reg := metrics.New()
	e, st, primary, fb, agent := fallbackRig(t, http.StatusServiceUnavailable, func(c *Config) {
		c.Tracing = Tracing{Tracer: tp.Tracer("test"), Provider: "openai", Model: "fake-model"}
		c.Metrics = reg
	})
	r := mustStart(t, e, input("fb"))
	collect(t, r)
	// The chat spans: the one that switched, and the next, name the fallback; each
	// completed call carries its cost and the model that answered.
	var requested, answered []string
	switched := 0
	for _, s := range exp.GetSpans().Snapshots() {
		if !strings.HasPrefix(s.Name(), "chat") {
			continue
		}
		for _, a := range s.Attributes() {
			switch a.Key {
			case "gen_ai.request.model":
				requested = append(requested, a.Value.AsString())
			case "gen_ai.response.model":
				answered = append(answered, a.Value.AsString())
			}
		}
		for _, ev := range s.Events() {
			if ev.Name == "baton.model_fallback" {
				switched++
			}
		}
	}
	assert.Equal(t, 1, switched)
	// The call-duration metric names the model each turn ended on: the turn that switched
	// and the next one are the fallback's.
	turns := map[string]uint64{}
	mfs, err := reg.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "baton_model_call_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			turns[labels["provider"]+"/"+labels["model"]+"/"+labels["outcome"]] += m.GetHistogram().GetSampleCount()
		}
	}
	assert.Equal(t, map[string]uint64{"openai/fake-model/ok": 1, "anthropic/claude-fake/ok": 2}, turns)
	assert.Contains(t, requested, "claude-fake")
	assert.ElementsMatch(t, []string{"fake-model", "claude-fake", "claude-fake"}, answered)
	assert.Equal(t, "completed", r.EndReason())
	assert.Len(t, primary.Requests(), 1+4, "the first turn, then the failing turn and its 3 retries")
	reqs := fb.requests()
	require.Len(t, reqs, 2, "the fallback answers the rest of the run")
	assert.Len(t, agent.sent, 2, "both calls ran: the primary's and the fallback's")

	// The Anthropic request holds the OpenAI turn's tool call and its result.
	raw, _ := json.Marshal(reqs[0]["messages"])
	msgs := string(raw)
	assert.Contains(t, msgs, `"type":"tool_use"`)
	assert.Contains(t, msgs, `"id":"call_1"`)
	assert.Contains(t, msgs, `"name":"research"`)
	assert.Contains(t, msgs, `"tool_use_id":"call_1"`)
	assert.Contains(t, msgs, "[COMPLETED]")
	raw, _ = json.Marshal(reqs[1]["messages"])
	assert.Contains(t, string(raw), `"tool_use_id":"toolu_2"`, "the fallback's own call and result")

	_, _ = waitEnded(t, st, "fb", r.RunID)
	steps, err := st.Steps(context.Background(), "fb", 0, 0)
	require.NoError(t, err)
	var fallbacks []store.Step
	var models []string
	for _, s := range steps {
		switch s.Kind {
		case store.StepModelFallback:
			fallbacks = append(fallbacks, s)
		case store.StepModelCall:
			if s.Outcome == store.StepOK {
				var d map[string]any
				require.NoError(t, json.Unmarshal([]byte(s.Detail), &d))
				models = append(models, d["model"].(string))
			}
		}
	}
	require.Len(t, fallbacks, 1)
	assert.Equal(t, "claude-fake", fallbacks[0].Target)
	assert.Equal(t, "transient_provider", fallbacks[0].FailureKind)
	assert.True(t, strings.Contains(fallbacks[0].Detail, `"from":"fake-model"`), fallbacks[0].Detail)
	assert.Equal(t, []string{"fake-model", "claude-fake", "claude-fake"}, models, "usage priced per answering model")
}

// TestNoFallbackOnUnauthorised: a 401 of the primary is not a reason to switch.
func TestNoFallbackOnUnauthorised(t *testing.T) {
	t.Parallel()
	e, st, primary, fb, _ := fallbackRig(t, http.StatusUnauthorized)
	r := mustStart(t, e, input("nofb"))
	collect(t, r)
	assert.NotEqual(t, "completed", r.EndReason())
	assert.Len(t, primary.Requests(), 2, "no retry of an auth failure")
	assert.Empty(t, fb.requests(), "the fallback is never asked")
	_, _ = waitEnded(t, st, "nofb", r.RunID)
	steps, err := st.Steps(context.Background(), "nofb", 0, 0)
	require.NoError(t, err)
	for _, s := range steps {
		assert.NotEqual(t, store.StepModelFallback, s.Kind)
	}
}
