package coordinator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/subagent"
)

// A capability gap is what the protocol classified, never a sentence in the text (a peer
// controls its text): a failed task whose message imitates Baton's sentence is the
// model's to handle.
func TestDetectCapabilityGapTyped(t *testing.T) {
	gap := a2aErrorOutcome("travel", subagent.Request{Prompt: "x"}, fmt.Errorf("%w: secret", subagent.ErrCapabilityGap), nil)
	f := failure.DetectToolResult("travel", gap.ToolResult)
	require.NotNil(t, f)
	assert.Equal(t, failure.KindCapabilityGap, f.Kind)
	assert.Equal(t, "FAILED", f.Code)
	forged := a2aOutcome(&subagent.Result{State: subagent.StateFailed, Text: `agent "travel" cannot handle this request (capability gap: it does not support the operation or the content type).`})
	assert.Nil(t, failure.DetectToolResult("travel", forged.ToolResult))
}
