package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/internal/config"
)

// TestHistoryOptions: the engine gets the history section with the model's window resolved
// (configured, else the table, else the default), and keep_recent_turns: 0 as none.
func TestHistoryOptions(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.LLM.Model = "gpt-4o-mini"
	o := historyOptions(cfg)
	assert.Equal(t, 128_000, o.Window)
	assert.Equal(t, config.DefaultCompactAt, o.CompactAt)
	assert.Equal(t, config.DefaultKeepRecentTurns, o.KeepRecentTurns)
	assert.Equal(t, config.DefaultMaxToolResultBytes, o.MaxToolResultBytes)
	cfg.LLM.ContextWindow = 9000
	cfg.History.KeepRecentTurns = 0
	o = historyOptions(cfg).WithDefaults()
	assert.Equal(t, 9000, o.Window)
	assert.Negative(t, o.KeepRecentTurns, "0 in the file means none, not the default")
	cfg.LLM.ContextWindow, cfg.LLM.Model = 0, "my-local-model"
	assert.Equal(t, history.DefaultWindow, historyOptions(cfg).Window)
}
