package a2aserver

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// noModel is a model the tests' engines never call: their runs come from fake engines,
// and the port only reads the store for them.
type noModel struct{}

func (noModel) Stream(context.Context, *llm.Request) iter.Seq2[llm.Delta, error] {
	panic("a2aserver tests: the model is not called")
}

// portOver is the engine's port over st, as cmd/coordinator builds it (tasks and run logs
// read through it), with configured naming the A2A sub-agents configured here (nil: all).
func portOver(t *testing.T, st store.Store, configured func(string) bool) *coordinator.Runs {
	t.Helper()
	e, err := coordinator.New(coordinator.Config{Model: noModel{}, Store: st})
	require.NoError(t, err)
	return coordinator.NewRuns(e, coordinator.RunsConfig{AgentConfigured: configured})
}

// memPort is the port over a fresh memory store, closed with the test.
func memPort(t *testing.T) *coordinator.Runs {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return portOver(t, st, nil)
}
