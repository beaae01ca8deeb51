package main

import (
	"context"
	"encoding/json"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
)

// countingModel answers "model" and counts its turns.
type countingModel struct{ turns int }

func (m *countingModel) Stream(context.Context, *llm.Request) iter.Seq2[llm.Delta, error] {
	m.turns++
	return func(yield func(llm.Delta, error) bool) {
		if yield(llm.Delta{Text: "model"}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}}, nil)
		}
	}
}

func collect(t *testing.T, seq iter.Seq2[llm.Delta, error]) []llm.Delta {
	t.Helper()
	var out []llm.Delta
	for d, err := range seq {
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// marked is the tools of a run that mcpEngine.Delegate marks for agent.
func marked(t *testing.T, agent string) []llm.Tool {
	t.Helper()
	// The marker as Delegate adds it, parsed as the engine parses frontend tools.
	tool := agui.Tool{Name: delegateTool, Parameters: mustMarshal(map[string]any{"type": "object", delegateKey: agent})}
	var params map[string]any
	require.NoError(t, json.Unmarshal(tool.Parameters, &params))
	return []llm.Tool{{Name: agent, Parameters: map[string]any{"type": "object"}}, {Name: delegateTool, Parameters: params}}
}

func TestDirectModelDelegatesOnceWithoutTheModel(t *testing.T) {
	t.Parallel()
	next := &countingModel{}
	m := directModel{next: next}
	ctx := context.Background()
	conv := []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "find papers"}}

	first := collect(t, m.Stream(ctx, &llm.Request{Messages: conv, Tools: marked(t, "research")}))
	require.Len(t, first, 2)
	require.NotNil(t, first[0].ToolCall)
	assert.Equal(t, "research", first[0].ToolCall.Name)
	assert.JSONEq(t, `{"prompt":"find papers"}`, first[0].ToolCall.Arguments)
	assert.Equal(t, llm.FinishToolCalls, first[1].Done.FinishReason)

	conv = append(conv, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: first[0].ToolCall.ID, Name: "research"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: first[0].ToolCall.ID, Content: "[COMPLETED]\nthree papers"})
	second := collect(t, m.Stream(ctx, &llm.Request{Messages: conv, Tools: marked(t, "research")}))
	require.Len(t, second, 2)
	assert.Equal(t, "[COMPLETED]\nthree papers", second[0].Text, "the run ends with the call's result")
	assert.Equal(t, llm.FinishStop, second[1].Done.FinishReason)
	assert.Zero(t, next.turns, "the model is never called")

	// A run without the marker is the model's.
	plain := collect(t, m.Stream(ctx, &llm.Request{Messages: conv[:2], Tools: []llm.Tool{{Name: "research"}}}))
	assert.Equal(t, "model", plain[0].Text)
	assert.Equal(t, 1, next.turns)
}

// TestDirectModelAnswersLocally: the engine skips the journal's model_call steps only for
// the runs directModel answers itself (marked), also on a fallback chain's links.
func TestDirectModelAnswersLocally(t *testing.T) {
	t.Parallel()
	var m llm.Model = directModel{next: &countingModel{}}
	local, ok := m.(coordinator.LocalModel)
	require.True(t, ok, "directModel is a coordinator.LocalModel")
	assert.True(t, local.AnswersLocally(&llm.Request{Tools: marked(t, "research")}))
	assert.False(t, local.AnswersLocally(&llm.Request{Tools: []llm.Tool{{Name: "research"}}}), "a run without the marker is the model's")
	assert.False(t, local.AnswersLocally(&llm.Request{Tools: marked(t, "")}), "a marker without an agent is the model's")
	link, ok := directChain{chain: llm.NewChain(llm.Link{Name: "m", Model: &countingModel{}})}.At(0).(coordinator.LocalModel)
	require.True(t, ok, "a chain's link answers locally too")
	assert.True(t, link.AnswersLocally(&llm.Request{Tools: marked(t, "research")}))
}

func TestMatchesAnyAgentPatterns(t *testing.T) {
	t.Parallel()
	assert.True(t, matchesAny(config.Patterns{"*"}, "research"))
	assert.True(t, matchesAny(config.Patterns{"trav*", "x"}, "travel"))
	assert.False(t, matchesAny(config.Patterns{"trav*"}, "research"))
	assert.False(t, matchesAny(nil, "research"))
}
