package failure

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
)

func TestClassifyContextOverflow(t *testing.T) {
	t.Parallel()
	openai := llm.AsContextOverflow(llm.NewHTTPError(400, nil, "This model's maximum context length is 128000 tokens.", nil),
		"context_length_exceeded", "This model's maximum context length is 128000 tokens.")
	anthropic := llm.AsContextOverflow(llm.NewHTTPError(400, nil, "prompt is too long: 210000 tokens > 200000 maximum", nil),
		"", "prompt is too long: 210000 tokens > 200000 maximum")
	other := llm.AsContextOverflow(llm.NewHTTPError(400, nil, "bad tool schema", nil), "invalid_value", "bad tool schema")
	for name, err := range map[string]error{"openai": openai, "anthropic": anthropic} {
		f := ClassifyModelError(fmt.Errorf("turn: %w", err))
		require.NotNil(t, f, name)
		assert.Equal(t, KindContextOverflow, f.Kind, name)
		assert.NotContains(t, f.Explanation, "128000", "no provider text reaches the user")
	}
	assert.Nil(t, ClassifyModelError(other), "another bad request is not an overflow")
	assert.Equal(t, llm.ErrBadRequest, other.Kind)
}

func TestDecideContextOverflow(t *testing.T) {
	t.Parallel()
	p := fixedPolicy()
	var st State
	f := *contextOverflow(errors.New("x"))
	d := p.Decide(f, &st)
	assert.Equal(t, ActionRetry, d.Action)
	assert.Equal(t, 1, d.Attempt)
	assert.Contains(t, d.Explanation, "summarised")
	d = p.Decide(f, &st)
	assert.Equal(t, ActionHandoff, d.Action)
	assert.Contains(t, d.Explanation, "larger context window")
}
