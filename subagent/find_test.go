package subagent

import (
	"context"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindTask: a task whose id its sender never recorded (the sender went away before the
// agent's first answer) is found by the context and message ids the sender chose, and
// only where the agent lists tasks.
func TestFindTask(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true, user: "baton"})
	a := resolve(t, p, Protocol10)

	// sendAway sends prompt with the given ids and gives up once the agent started it.
	sendAway := func(t *testing.T, msgID, contextID string) string {
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			_, err := a.Send(ctx, Request{Prompt: "slow", MessageID: msgID, ContextID: contextID}, Observer{})
			done <- err
		}()
		taskID := <-p.exec.started
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		waitStored(t, a, taskID)
		t.Cleanup(func() { _ = a.Cancel(context.Background(), taskID) })
		return taskID
	}

	t.Run("by its message", func(t *testing.T) {
		ctxID, msgID := sdk.NewContextID(), sdk.NewMessageID()
		other := sendAway(t, sdk.NewMessageID(), ctxID) // another task in the same context
		taskID := sendAway(t, msgID, ctxID)
		require.NotEqual(t, other, taskID)
		got, err := a.FindTask(testCtx(t), ctxID, msgID)
		require.NoError(t, err)
		assert.Equal(t, taskID, got.TaskID)
		assert.Equal(t, ctxID, got.ContextID, "the agent kept the context the client chose")
		assert.Equal(t, StateWorking, got.State)
	})

	t.Run("an earlier task of the context is not the message's", func(t *testing.T) {
		// A context holds every call of one conversation: its only task, when its
		// history lacks the message, is an earlier call's (the message has not arrived).
		ctxID := sdk.NewContextID()
		sendAway(t, sdk.NewMessageID(), ctxID)
		_, err := a.FindTask(testCtx(t), ctxID, "not-in-its-history")
		assert.ErrorIs(t, err, ErrTaskNotFound)
	})

	t.Run("nothing in the context", func(t *testing.T) {
		_, err := a.FindTask(testCtx(t), sdk.NewContextID(), sdk.NewMessageID())
		assert.ErrorIs(t, err, ErrTaskNotFound)
	})

	t.Run("A2A 0.3: no ListTasks", func(t *testing.T) {
		old := resolve(t, p, Protocol03)
		_, err := old.FindTask(testCtx(t), sdk.NewContextID(), sdk.NewMessageID())
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrTaskNotFound)
		t.Log(err)
	})

	t.Run("agent refusing ListTasks", func(t *testing.T) {
		anon := startPeer(t, peerOptions{card: cardDual, streaming: true})
		b := resolve(t, anon, Protocol10)
		_, err := b.FindTask(testCtx(t), sdk.NewContextID(), sdk.NewMessageID())
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrTaskNotFound)
	})
}
