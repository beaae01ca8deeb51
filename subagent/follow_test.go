package subagent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFollow: a task started by an earlier Send (whose caller went away, as a replica that
// died) is followed by id: read, subscribed to, and its outcome returned, with nothing sent
// to it; what it held when first read is not reported again.
func TestFollow(t *testing.T) {
	leakCheck(t)
	p := startPeer(t, peerOptions{card: cardDual, streaming: true})
	a := resolve(t, p, Protocol10)

	t.Run("running task: subscribed, not sent again", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testCtx(t))
		rec := newRecorder()
		done := make(chan error, 1)
		go func() {
			_, err := a.Send(ctx, Request{Prompt: "slow"}, rec.observer())
			done <- err
		}()
		taskID := <-p.exec.started
		assert.Equal(t, taskID, <-rec.taskCh)
		cancel() // the replica that sent it is gone; the task goes on at the agent
		require.ErrorIs(t, <-done, context.Canceled)
		waitStored(t, a, taskID)
		sends := p.count(isSendMethod)

		followed := newRecorder()
		type outcome struct {
			res *Result
			err error
		}
		out := make(chan outcome, 1)
		go func() {
			res, err := a.Follow(testCtx(t), taskID, "", followed.observer())
			out <- outcome{res, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for p.count(isResubscribeMethod) == 0 {
			require.True(t, time.Now().Before(deadline), "Follow never subscribed: %v", p.seen())
			time.Sleep(5 * time.Millisecond)
		}
		require.NoError(t, a.Cancel(testCtx(t), taskID))
		o := <-out
		require.NoError(t, o.err)
		assert.Equal(t, StateCanceled, o.res.State)
		assert.Equal(t, taskID, o.res.TaskID)
		assert.Equal(t, []string{taskID}, followed.tasks, "the observer learns the task at once")
		assert.Equal(t, sends, p.count(isSendMethod), "nothing was sent to the task")
	})

	t.Run("finished task: its outcome, nothing reported again", func(t *testing.T) {
		res, err := a.Send(testCtx(t), Request{Prompt: "complete"}, Observer{})
		require.NoError(t, err)
		sends := p.count(isSendMethod)
		rec := newRecorder()
		got, err := a.Follow(testCtx(t), res.TaskID, res.ContextID, rec.observer())
		require.NoError(t, err)
		assert.Equal(t, StateCompleted, got.State)
		assert.Contains(t, got.Text, "chunk one chunk two chunk three")
		assert.Empty(t, rec.text(), "what the task held when read was reported by the earlier Send")
		assert.Equal(t, sends, p.count(isSendMethod))
	})

	t.Run("unknown task", func(t *testing.T) {
		_, err := a.Follow(testCtx(t), "no-such-task", "", Observer{})
		require.Error(t, err)
		assert.Equal(t, "no-such-task", TaskIDOf(err))
		assert.ErrorIs(t, err, ErrInvalidTransition, "an agent that does not know the task")
	})
}
