package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/config"
)

// TestSpendDocConfigLoads: the config in docs/spend.md loads and validates as written, with
// the prices, fallback and budgets the page explains.
func TestSpendDocConfigLoads(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "spend.md"))
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	require.Len(t, blocks, 1, "one config on the page")
	f := filepath.Join(t.TempDir(), "baton.yaml")
	require.NoError(t, os.WriteFile(f, blocks[0][1], 0o600))
	cfg, err := config.Load(f)
	require.NoError(t, err)
	assert.Equal(t, config.Prices{InputPerMTok: 0.4, OutputPerMTok: 1.6}, cfg.LLM.Prices)
	require.Len(t, cfg.LLM.Fallback, 1)
	assert.Equal(t, "anthropic", cfg.LLM.Fallback[0].Provider)
	assert.Equal(t, 15.0, cfg.LLM.Fallback[0].Prices.OutputPerMTok)
	assert.Equal(t, 0.5, cfg.Policy.Budget.MaxCostUSD)
	assert.Equal(t, 200000, cfg.Policy.Budget.MaxTokens)
	assert.Equal(t, 5.0, cfg.Policy.PrincipalBudget.DailyCostUSD)
	assert.Equal(t, 0.8, cfg.Policy.PrincipalBudget.WarnAt)
}
