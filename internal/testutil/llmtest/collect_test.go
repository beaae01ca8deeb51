package llmtest

import (
	"io"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
)

func seq(items ...any) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		for _, it := range items {
			var ok bool
			switch v := it.(type) {
			case llm.Delta:
				ok = yield(v, nil)
			case error:
				ok = yield(llm.Delta{}, v)
			}
			if !ok {
				return
			}
		}
	}
}

func TestCollect(t *testing.T) {
	t.Parallel()
	done := &llm.Completion{FinishReason: llm.FinishToolCalls, Usage: llm.Usage{InputTokens: 3, OutputTokens: 4}}
	tests := []struct {
		name     string
		stream   iter.Seq2[llm.Delta, error]
		wantMsg  llm.Message
		wantDone *llm.Completion
		wantErr  error
	}{
		{
			name:     "text and interleaved tool calls",
			wantDone: done,
			stream: seq(
				llm.Delta{Text: "Let me "}, llm.Delta{Text: "check."},
				llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 1, ID: "b", Name: "research", Arguments: `{"prompt"`}},
				llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "a", Name: "travel", Arguments: `{`}},
				llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 1, Arguments: `:"x"}`}},
				llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: `}`}},
				llm.Delta{Done: done},
			),
			wantMsg: llm.Message{Role: llm.RoleAssistant, Content: "Let me check.", ToolCalls: []llm.ToolCall{
				{ID: "a", Name: "travel", Arguments: `{}`},
				{ID: "b", Name: "research", Arguments: `{"prompt":"x"}`},
			}},
		},
		{
			name:    "error keeps the partial message",
			stream:  seq(llm.Delta{Text: "par"}, io.ErrUnexpectedEOF),
			wantMsg: llm.Message{Role: llm.RoleAssistant, Content: "par"},
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "no completion",
			stream:  seq(llm.Delta{Text: "x"}),
			wantMsg: llm.Message{Role: llm.RoleAssistant, Content: "x"},
			wantErr: llm.ErrNoCompletion,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, got, err := Collect(tt.stream)
			assert.Equal(t, tt.wantMsg, msg)
			assert.Equal(t, tt.wantDone, got)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
		})
	}
}
