package subagent

import (
	"context"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRESTBinding: an agent whose card offers only A2A 1.0 over HTTP+JSON (a2a-go's REST
// handler) is used through that binding, streaming and not: every task state, a
// continuation, a cancel by task id after the caller went away, and a followed task.
func TestRESTBinding(t *testing.T) {
	leakCheck(t)
	for _, streaming := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "no-stream"}[streaming], func(t *testing.T) {
			p := startPeer(t, peerOptions{card: cardRESTOnly, streaming: streaming})
			a := resolveWith(t, p, "", continuationOptions())
			assert.Equal(t, p.URL+"/rest", a.Endpoint())
			info, ok := a.Info()
			require.True(t, ok)
			assert.Equal(t, string(sdk.TransportProtocolHTTPJSON), info.Binding)
			require.NoError(t, a.Ready())

			for _, sc := range scenarios {
				t.Run(sc.prompt, func(t *testing.T) {
					rec := newRecorder()
					res, err := a.Send(testCtx(t), Request{Prompt: sc.prompt}, rec.observer())
					require.NoError(t, err)
					assert.Equal(t, sc.state, res.State)
					assert.Equal(t, sc.text, res.Text)
					assert.Equal(t, sc.observed, rec.text())
				})
			}
			t.Run("continuation", func(t *testing.T) {
				first, err := a.Send(testCtx(t), Request{Prompt: "input please"}, Observer{})
				require.NoError(t, err)
				require.Equal(t, StateInputRequired, first.State)
				res, err := a.Send(testCtx(t), Request{Prompt: "blue", TaskID: first.TaskID, ContextID: first.ContextID}, Observer{})
				require.NoError(t, err)
				assert.Equal(t, StateCompleted, res.State)
				assert.Equal(t, first.TaskID, res.TaskID)
				assert.Contains(t, res.Text, "got: blue")
			})
			t.Run("cancel", func(t *testing.T) {
				ctx, cancel := context.WithCancel(testCtx(t))
				rec := newRecorder()
				done := make(chan error, 1)
				go func() {
					_, err := a.Send(ctx, Request{Prompt: "slow"}, rec.observer())
					done <- err
				}()
				started := <-p.exec.started
				select {
				case id := <-rec.taskCh:
					assert.Equal(t, started, id)
				case err := <-done:
					t.Fatalf("Send returned before the caller went away: %v", err)
				}
				cancel()
				err := <-done
				require.ErrorIs(t, err, context.Canceled)
				require.Equal(t, started, TaskIDOf(err))
				waitStored(t, a, started)
				require.NoError(t, a.Cancel(testCtx(t), started))
				got, err := a.GetTask(testCtx(t), started)
				require.NoError(t, err)
				assert.Equal(t, StateCanceled, got.State)
			})
			if !streaming {
				return
			}
			t.Run("resubscribe", func(t *testing.T) {
				ctx, cancel := context.WithCancel(testCtx(t))
				done := make(chan error, 1)
				go func() {
					_, err := a.Send(ctx, Request{Prompt: "slow"}, Observer{})
					done <- err
				}()
				taskID := <-p.exec.started
				waitStored(t, a, taskID)
				cancel()
				require.ErrorIs(t, <-done, context.Canceled)
				out := make(chan *Result, 1)
				go func() {
					res, err := a.Follow(testCtx(t), taskID, "", Observer{})
					assert.NoError(t, err)
					out <- res
				}()
				// Follow subscribes (the task is running) and sees the cancel's outcome.
				require.NoError(t, a.Cancel(testCtx(t), taskID))
				res := <-out
				require.NotNil(t, res)
				assert.Equal(t, StateCanceled, res.State)
			})
		})
	}
}
