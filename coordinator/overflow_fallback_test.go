package coordinator

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/store"
)

// windowRig is a fallback chain of fake OpenAI-compatible models, each enforcing its
// window (characters, four a token) and answering with its own name; the engine's history
// window is the first model's. A request too long for every compaction is the user's own
// message (never summarised away) of userChars characters.
func windowRig(t *testing.T, windows ...int) (*Engine, store.Store, []*fakellm.Server) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	var links []llm.Link
	var srvs []*fakellm.Server
	for i, w := range windows {
		name := []string{"small-model", "mid-model", "large-model"}[i]
		srv := fakellm.Start(fakellm.WithWindow(4*w, func(req fakellm.Request) fakellm.Reply {
			if strings.HasPrefix(req.Messages[0].Content, "You maintain the memory") {
				return fakellm.Reply{Text: "Summary: the user asked for a reading."}
			}
			return fakellm.Reply{Text: "answered by " + name}
		}))
		t.Cleanup(srv.Close)
		m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: name, HTTPClient: &http.Client{Transport: tr}})
		require.NoError(t, err)
		links = append(links, llm.Link{Provider: "openai", Name: name, Model: m, Window: w})
		srvs = append(srvs, srv)
	}
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := newEngine(t, llm.NewChain(links[0], links[1:]...), &fakeAgent{}, fastPolicy, func(c *Config) {
		c.Store = st
		c.History = history.Options{Window: windows[0], KeepRecentTurns: 1}.WithDefaults()
	})
	return e, st, srvs
}

// longInput is a run whose user message is chars characters long.
func longInput(thread string, chars int) *agui.RunAgentInput {
	in := input(thread)
	in.Messages[0].Content, _ = json.Marshal(strings.Repeat("read all of this ", chars/17+1)[:chars])
	return in
}

// fallbackSteps are the run's model_fallback journal steps.
func fallbackSteps(t *testing.T, st store.Store, thread, run string) []store.Step {
	t.Helper()
	_, _ = waitEnded(t, st, thread, run)
	steps, err := st.Steps(context.Background(), thread, 0, 0)
	require.NoError(t, err)
	var out []store.Step
	for _, s := range steps {
		if s.Kind == store.StepModelFallback {
			out = append(out, s)
		}
	}
	return out
}

// TestContextOverflowFallsBackToLargerWindow: the user's message is too long for the
// first model's window (5,000 tokens) and cannot be compacted (it is the user's last
// request); after compaction and one retry did not fix it, the run switches to the first
// fallback whose window is larger, skipping one that is no larger (4,000 tokens): a
// model_fallback step with context_overflow, and the answer is the larger model's.
func TestContextOverflowFallsBackToLargerWindow(t *testing.T) {
	t.Parallel()
	e, st, srvs := windowRig(t, 5000, 4000, 50000)
	in := longInput("overflow-larger", 30000) // 7,500 tokens
	evs := startAndCollect(t, e, in)
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "events: %v", types(evs))
	var text strings.Builder
	for _, ev := range evs {
		if c, ok := ev.(*agui.TextMessageContent); ok {
			text.WriteString(c.Delta)
		}
	}
	assert.Equal(t, "answered by large-model", text.String())
	assert.NotEmpty(t, srvs[0].Requests(), "the first model was asked")
	assert.Empty(t, srvs[1].Requests(), "a fallback whose window is no larger is skipped")
	require.Len(t, srvs[2].Requests(), 1, "the larger model answers")
	for _, req := range srvs[2].Requests() {
		assert.LessOrEqual(t, req.Chars(), 4*50000)
	}
	fbs := fallbackSteps(t, st, in.ThreadID, in.RunID)
	require.Len(t, fbs, 1)
	assert.Equal(t, "large-model", fbs[0].Target)
	assert.Equal(t, "context_overflow", fbs[0].FailureKind)
	assert.Contains(t, fbs[0].Detail, `"from":"small-model"`)
	assert.Contains(t, fbs[0].Detail, `"toWindow":50000`)
}

// TestContextOverflowNoLargerWindowEnds: when no fallback has a larger window (or even
// the larger one refuses), the run ends with the handoff that says what to do, after at
// most one switch.
func TestContextOverflowNoLargerWindowEnds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		windows   []int
		fallbacks int
	}{
		{"none larger", []int{5000, 4000}, 0},
		{"larger still too small", []int{5000, 4000, 6000}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, st, srvs := windowRig(t, c.windows...)
			in := longInput("overflow-"+strings.ReplaceAll(c.name, " ", "-"), 40000) // 10,000 tokens
			evs := startAndCollect(t, e, in)
			require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "a handoff, not RUN_ERROR: %v", types(evs))
			fails := failureValues(evs)
			require.NotEmpty(t, fails)
			last := fails[len(fails)-1]
			assert.Equal(t, "context_overflow", string(last.Kind))
			assert.Equal(t, "handoff", string(last.Action))
			assert.Contains(t, last.Explanation, "larger context window")
			assert.Empty(t, srvs[1].Requests(), "a fallback whose window is no larger is never asked")
			assert.Len(t, fallbackSteps(t, st, in.ThreadID, in.RunID), c.fallbacks)
		})
	}
}
