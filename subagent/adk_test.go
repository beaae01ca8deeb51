package subagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestADKConvention: an agent that asks as Google ADK does (input-required with a
// long-running function_call DataPart and its pending function_response) shows the question
// as text, not JSON, and is answered with a function_response DataPart carrying the call's
// id and name; a second question in the same task is answered the same way.
func TestADKConvention(t *testing.T) {
	leakCheck(t)
	for _, v := range []variant{variants[0], variants[1], variants[3], variants[4]} {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolveWith(t, p, v.force, continuationOptions())

			t.Run("one question", func(t *testing.T) {
				rec := newRecorder()
				first, err := a.Send(testCtx(t), Request{Prompt: "adk please"}, rec.observer())
				require.NoError(t, err)
				require.Equal(t, StateInputRequired, first.State)
				assert.Equal(t, "which colour?", first.Text, "the question as text")
				assert.NotContains(t, rec.text(), "{", "no raw JSON reached the observer")
				res, err := a.Send(testCtx(t), Request{Prompt: "blue", TaskID: first.TaskID, ContextID: first.ContextID}, Observer{})
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, res.State, res.Text)
				assert.Contains(t, res.Text, "adk got: blue")
			})
			t.Run("two questions", func(t *testing.T) {
				first, err := a.Send(testCtx(t), Request{Prompt: "adk2 please"}, Observer{})
				require.NoError(t, err)
				require.Equal(t, StateInputRequired, first.State)
				second, err := a.Send(testCtx(t), Request{Prompt: "blue", TaskID: first.TaskID, ContextID: first.ContextID}, Observer{})
				require.NoError(t, err)
				require.Equal(t, StateInputRequired, second.State, second.Text)
				assert.Equal(t, "which size?", second.Text)
				assert.Equal(t, first.TaskID, second.TaskID)
				res, err := a.Send(testCtx(t), Request{Prompt: "large", TaskID: first.TaskID, ContextID: first.ContextID}, Observer{})
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, res.State, res.Text)
				assert.Contains(t, res.Text, "adk got: large")
			})
		})
	}
}
