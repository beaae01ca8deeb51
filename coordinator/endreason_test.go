package coordinator

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The outcome travels as a typed field: a detail that itself holds a colon or an outcome
// word changes neither the stored state nor the rendered reason's head.
func TestEndReasonTyped(t *testing.T) {
	tests := []struct {
		reason EndReason
		text   string
		stored string
	}{
		{ended(OutcomeCompleted, ""), "completed", "completed"},
		{ended(OutcomeCancelled, "client disconnected"), "cancelled: client disconnected", "cancelled"},
		{ended(OutcomeHandoff, "error: store"), "handoff: error: store", "handoff"},
		{ended(OutcomeInterrupt, "loop_detected"), "interrupt: loop_detected", "interrupt"},
		{EndReason{}, "", "ended"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.text, tt.reason.String())
		assert.Equal(t, tt.stored, storedRunState(tt.reason))
	}
}
