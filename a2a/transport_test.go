package a2a

import (
	"strconv"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeanTransportDecode(t *testing.T) {
	t.Run("1.0 event", func(t *testing.T) {
		ev, err := (&leanTransport{}).decode([]byte(`{"jsonrpc":"2.0","id":"1","result":{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}}`))
		require.NoError(t, err)
		su, ok := ev.(*sdk.TaskStatusUpdateEvent)
		require.True(t, ok, "%T", ev)
		assert.Equal(t, sdk.TaskID("t1"), su.TaskID)
		assert.Equal(t, sdk.TaskStateWorking, su.Status.State)
	})
	t.Run("0.3 event", func(t *testing.T) {
		ev, err := (&leanTransport{v03: true}).decode([]byte(`{"jsonrpc":"2.0","id":"1","result":{"kind":"status-update","taskId":"t1","contextId":"c1","final":true,"status":{"state":"completed"}}}`))
		require.NoError(t, err)
		su, ok := ev.(*sdk.TaskStatusUpdateEvent)
		require.True(t, ok, "%T", ev)
		assert.Equal(t, sdk.TaskStateCompleted, su.Status.State)
	})
	t.Run("JSON-RPC errors map to the SDK's", func(t *testing.T) {
		for code, want := range map[int]error{-32001: sdk.ErrTaskNotFound, -31401: sdk.ErrUnauthenticated, -32004: sdk.ErrUnsupportedOperation, -1: sdk.ErrInternalError} {
			_, err := (&leanTransport{}).decode([]byte(`{"jsonrpc":"2.0","id":"1","error":{"code":` + strconv.Itoa(code) + `,"message":"no"}}`))
			require.ErrorIs(t, err, want, "code %d", code)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		_, err := (&leanTransport{}).decode([]byte(`{oops`))
		require.ErrorContains(t, err, "failed to parse SSE data")
	})
}
