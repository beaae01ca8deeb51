package cancel

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUnsettled(t *testing.T) {
	t.Parallel()
	pending, failed := Outstanding([]Report{
		{Kind: KindA2ATask, Name: "research", ID: "t-1", Result: ResultPending},
		{Kind: KindA2ATask, Name: "travel", ID: "t-2", Result: ResultConfirmed},
		{Kind: KindA2ATask, Name: "deploy", ID: "t-3", Result: "abandoned"},
		{Kind: KindA2ATask, Name: "moved", Result: ResultMoved},
	})
	assert.Equal(t, []string{"a2a_task research task t-1"}, pending)
	assert.Equal(t, []string{"a2a_task deploy task t-3 (abandoned)"}, failed)
}
