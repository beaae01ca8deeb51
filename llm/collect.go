package llm

import (
	"errors"
	"iter"
	"slices"
	"strings"
)

// ErrNoCompletion reports a stream that ended without a Done delta or an error.
var ErrNoCompletion = errors.New("llm: stream ended without a completion")

// Collect drains a turn and assembles the assistant message it produced.
// Tool calls are ordered by their delta Index. On error, the partial message
// is returned with the error.
func Collect(stream iter.Seq2[Delta, error]) (Message, *Completion, error) {
	var (
		text  strings.Builder
		calls []ToolCall
		byIdx = map[int]int{} // delta Index -> position in calls
		order []int
	)
	build := func() Message {
		m := Message{Role: RoleAssistant, Content: text.String()}
		if len(calls) > 0 {
			m.ToolCalls = make([]ToolCall, 0, len(calls))
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
				calls = append(calls, ToolCall{ID: tc.ID, Name: tc.Name})
			}
			calls[pos].Arguments += tc.Arguments
		default:
			text.WriteString(d.Text)
		}
	}
	return build(), nil, ErrNoCompletion
}
