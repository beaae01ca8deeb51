package llm

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsContextOverflow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		status        int
		code, message string
		want          bool
	}{
		{"openai code", 400, "context_length_exceeded", "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", true},
		{"openai-compatible message only", 400, "", "This model's maximum context length is 4096 tokens", true},
		{"anthropic", 400, "", "prompt is too long: 210000 tokens > 200000 maximum", true},
		{"413", 413, "", "Input is too long for requested model.", true},
		{"other 400", 400, "invalid_request_error", "tools[0].name: bad", false},
		{"a 500 that mentions it", 500, "", "prompt is too long", false},
		{"rate limit", 429, "rate_limit_exceeded", "too many tokens per minute", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, IsContextOverflow(c.status, c.code, c.message), c.name)
	}
	e := AsContextOverflow(NewHTTPError(400, nil, "prompt is too long: 9 > 8", nil), "", "prompt is too long: 9 > 8")
	assert.Equal(t, ErrContextOverflow, e.Kind)
	assert.False(t, e.Transient())
	assert.Equal(t, "llm: context_overflow (HTTP 400): the conversation is longer than the model's context window", e.Error())
}
