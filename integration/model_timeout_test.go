package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// A model that sends its headers and a first word, then nothing: with llm.idle_timeout set in
// the config, every attempt times out as transient_provider, is retried, and once the retry
// budget is spent the user is told that the model did not answer in time (instead of the run
// hanging until max_run_seconds and ending with a bare "cancelled").
func TestModelIdleTimeoutThroughConfig(t *testing.T) {
	t.Parallel()
	requirePeers(t)
	model := fakellm.Start(func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "Thinking about it", Delay: time.Hour}
	})
	t.Cleanup(model.Close)
	cfg := strings.Replace(testConfig{LLMURL: model.URL}.yaml(), "llm:\n", "llm:\n  timeout: 5s\n  idle_timeout: 300ms\n", 1)
	coord := startCoordinator(t, cfg)

	r := runAGUIClient(t, "v1", coord+"/agui", userJob("silent-model", "hello"))
	assert.Nil(t, r.Failed)
	assert.True(t, r.Terminal, "events: %v", eventTypes(r.Events))
	require.NotNil(t, r.Outcome, "events: %v", eventTypes(r.Events))
	assert.Equal(t, "success", *r.Outcome, "a handoff, not a cancellation")

	fs := failureValues(r.Events)
	require.Len(t, fs, 4, "three retries, then the handoff: %v", fs)
	for i, f := range fs[:3] {
		assert.Equal(t, string(failure.KindTransientProvider), f["kind"])
		assert.Equal(t, string(failure.ActionRetry), f["action"], "attempt %d", i+1)
		assert.Contains(t, f["explanation"], "The language model did not answer in time.")
	}
	assert.Equal(t, wantFailure(failure.KindTransientProvider, failure.ActionHandoff, 4,
		"The language model did not answer in time. It is still failing after 3 retries."), fs[3])
	assert.Len(t, model.Requests(), 4, "one call and three retries")
	assert.Contains(t, plainText(r.Events), "did not answer in time", "the user is told why")
}
