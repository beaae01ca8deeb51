// Package llmtest holds what tests of the model providers and of the engine share about
// llm.Model streams.
package llmtest

import (
	"iter"
	"slices"
	"strings"

	"github.com/baton-dev/baton/llm"
)

// Collect drains a turn and assembles the assistant message it produced.
// Tool calls are ordered by their delta Index. On error, the partial message
// is returned with the error.
func Collect(stream iter.Seq2[llm.Delta, error]) (llm.Message, *llm.Completion, error) {
	var (
		text  strings.Builder
		calls []llm.ToolCall
		byIdx = map[int]int{} // delta Index -> position in calls
		order []int
	)
	build := func() llm.Message {
		m := llm.Message{Role: llm.RoleAssistant, Content: text.String()}
		if len(calls) > 0 {
			m.ToolCalls = make([]llm.ToolCall, 0, len(calls))
			// Indices are normally 0..n-1 in order of appearance; sort to be safe.
			for _, idx := range slices.Sorted(slices.Values(order)) {
				m.ToolCalls = append(m.ToolCalls, calls[byIdx[idx]])
			}
		}
		return m
	}
	for d, err := range stream {
		if err != nil {
			return build(), nil, err
		}
		switch {
		case d.Done != nil:
			return build(), d.Done, nil
		case d.ToolCall != nil:
			tc := d.ToolCall
			pos, ok := byIdx[tc.Index]
			if !ok {
				pos = len(calls)
				byIdx[tc.Index] = pos
				order = append(order, tc.Index)
				calls = append(calls, llm.ToolCall{ID: tc.ID, Name: tc.Name})
			}
			calls[pos].Arguments += tc.Arguments
		default:
			text.WriteString(d.Text)
		}
	}
	return build(), nil, llm.ErrNoCompletion
}
