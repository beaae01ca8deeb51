// Package stubmodel is an llm.Model for benchmarks: it answers from pre-split chunks and
// does no work of its own (no tokenising, no routing on the prompt), so that a benchmark
// through the engine measures the engine and not a demo model.
package stubmodel

import (
	"context"
	"iter"

	"github.com/baton-dev/baton/llm"
)

// Config says what the model answers.
type Config struct {
	// Tool is the tool the first turn calls (the latest message is not a tool result);
	// empty: every turn answers with Text.
	Tool string
	// Arguments is the JSON object of that call, sent in one delta.
	Arguments string
	// Text is the answer of a turn after a tool result, as chunks sent one delta each.
	Text []string
}

// Model is the stub. It is safe for concurrent use.
type Model struct {
	cfg  Config
	call llm.Delta
	done llm.Delta
	stop llm.Delta
}

// New returns a stub model.
func New(cfg Config) *Model {
	return &Model{
		cfg:  cfg,
		call: llm.Delta{ToolCall: &llm.ToolCallDelta{ID: "call-1", Name: cfg.Tool, Arguments: cfg.Arguments}},
		done: llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}},
		stop: llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}},
	}
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.Delta{}, err)
			return
		}
		msgs := req.Messages
		if m.cfg.Tool != "" && (len(msgs) == 0 || msgs[len(msgs)-1].Role != llm.RoleTool) {
			if yield(m.call, nil) {
				yield(m.done, nil)
			}
			return
		}
		for _, t := range m.cfg.Text {
			if !yield(llm.Delta{Text: t}, nil) {
				return
			}
		}
		yield(m.stop, nil)
	}
}
