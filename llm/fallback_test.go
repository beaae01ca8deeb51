package llm_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
)

type doneModel struct{ model string }

func (m doneModel) Stream(context.Context, *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		if yield(llm.Delta{Text: "hi"}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop, Model: m.model, Usage: llm.Usage{InputTokens: 3}}}, nil)
		}
	}
}

func TestChainNamesTheAnsweringModel(t *testing.T) {
	t.Parallel()
	c := llm.NewChain(llm.Link{Provider: "openai", Name: "primary", Model: doneModel{}},
		llm.Link{Provider: "anthropic", Name: "nil-dropped"},
		llm.Link{Provider: "anthropic", Name: "fallback", Model: doneModel{}},
		llm.Link{Provider: "openai", Name: "self-named", Model: doneModel{model: "as-reported"}})
	require.Equal(t, 3, c.Len(), "a link without a model is dropped")
	last := func(m llm.Model) *llm.Completion {
		var done *llm.Completion
		for d, err := range m.Stream(context.Background(), &llm.Request{}) {
			require.NoError(t, err)
			if d.Done != nil {
				done = d.Done
			}
		}
		return done
	}
	assert.Equal(t, "primary", last(c).Model, "the chain streams its primary")
	assert.Equal(t, "fallback", last(c.At(1)).Model)
	assert.Equal(t, 3, last(c.At(1)).Usage.InputTokens)
	assert.Equal(t, "anthropic", c.Link(1).Provider)
	assert.Equal(t, "as-reported", last(c.At(2)).Model, "a completion that names its model keeps it")
}
