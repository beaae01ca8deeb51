package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
)

// TestFallbackLinksKnowTheirWindows: each model of the llm.fallback chain carries its
// context window (context_window, else the built-in table, else the default), which a
// context_overflow's switch compares; the primary's is the history's.
func TestFallbackLinksKnowTheirWindows(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{LLM: config.LLM{Provider: "scripted", Model: "gpt-4o", Fallback: []config.FallbackModel{
		{Provider: "scripted", Model: "gpt-4.1"},
		{Provider: "scripted", Model: "my-local-model", ContextWindow: 16000},
		{Provider: "scripted", Model: "unknown-model"},
	}}}
	m, _, err := newModel(cfg, http.DefaultClient)
	require.NoError(t, err)
	chain, ok := m.(*llm.Chain)
	require.True(t, ok, "a chain: %T", m)
	var windows []int
	for i := range chain.Len() {
		windows = append(windows, chain.Link(i).Window)
	}
	assert.Equal(t, []int{128_000, 1_047_576, 16000, history.DefaultWindow}, windows)
	assert.Equal(t, historyOptions(cfg).Window, windows[0])
}
