package a2aqueue

import (
	"context"
	"iter"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/goleak"
)

// quickAgent completes every task at once.
type quickAgent struct{}

func (quickAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (quickAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// Subscriptions racing the end of each task, through a2asrv's own handler: with the
// wrapper no queue outlives its task. With a2asrv's default manager in its place, this
// test failed with 25 broker goroutines left after 300 tasks.
func TestSubscriptionsRacingTheEndLeaveNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	h := a2asrv.NewHandler(quickAgent{}, a2asrv.WithEventQueueManager(New()))
	for range 300 {
		var id a2a.TaskID
		var wg sync.WaitGroup
		for ev, err := range h.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}) {
			if err != nil {
				t.Fatal(err)
			}
			if task, ok := ev.(*a2a.Task); ok && id == "" {
				id = task.ID
				for range 4 {
					wg.Go(func() {
						for range 20 {
							for _, err := range h.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
								if err != nil {
									break
								}
							}
						}
					})
				}
			}
		}
		wg.Wait()
	}
}
