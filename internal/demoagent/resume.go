package demoagent

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// resumer routes a follow-up message for a task parked in auth-required to the parked
// execution instead of the SDK, which would refuse it (see the package doc). Every other
// call goes straight to the SDK handler.
type resumer struct {
	a2asrv.RequestHandler
	exec *executor
}

// CancelTask implements a2asrv.RequestHandler. It works around a race in a2a-go: right
// after an execution ends in input-required, and before the SDK has unregistered it, a
// cancel is sent into that finished execution and fails (ErrTaskNotCancelable, or "queue
// is closed") although the task is only interrupted. A cancel that fails while the task
// is still not terminal is retried briefly.
func (h *resumer) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	const attempts, pause = 50, 10 * time.Millisecond
	for i := 1; ; i++ {
		task, err := h.RequestHandler.CancelTask(ctx, req)
		if err == nil || i == attempts {
			return task, err
		}
		cur, gerr := h.RequestHandler.GetTask(ctx, &a2a.GetTaskRequest{ID: req.ID, Tenant: req.Tenant})
		if gerr != nil || cur.Status.State.Terminal() {
			return task, err
		}
		select {
		case <-ctx.Done():
			return task, err
		case <-time.After(pause):
		}
	}
}

// SendMessage implements a2asrv.RequestHandler.
func (h *resumer) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	id, ok := h.parkedTarget(req)
	if !ok {
		return h.RequestHandler.SendMessage(ctx, req)
	}
	for _, err := range h.resume(ctx, req, id) {
		if err != nil {
			return nil, err
		}
	}
	return h.RequestHandler.GetTask(ctx, &a2a.GetTaskRequest{ID: id, Tenant: req.Tenant})
}

// SendStreamingMessage implements a2asrv.RequestHandler.
func (h *resumer) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	id, ok := h.parkedTarget(req)
	if !ok {
		return h.RequestHandler.SendStreamingMessage(ctx, req)
	}
	return h.resume(ctx, req, id)
}

func (h *resumer) parkedTarget(req *a2a.SendMessageRequest) (a2a.TaskID, bool) {
	if req == nil || req.Message == nil || req.Message.TaskID == "" {
		return "", false
	}
	id := req.Message.TaskID
	return id, h.exec.isParked(id)
}

// resume subscribes to the parked execution first (so no event is missed), then wakes it
// with the follow-up text and relays its events up to the final one. The task snapshot
// that a subscription starts with is not relayed: it still says auth-required, and a
// continuation stream of the SDK starts with the next status too.
func (h *resumer) resume(ctx context.Context, req *a2a.SendMessageRequest, id a2a.TaskID) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		next, stop := iter.Pull2(h.RequestHandler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id, Tenant: req.Tenant}))
		defer stop()

		snapshot, err, ok := next()
		switch {
		case !ok:
			yield(nil, fmt.Errorf("task %s: subscription ended at once: %w", id, a2a.ErrTaskNotFound))
			return
		case err != nil:
			yield(nil, err)
			return
		}
		if t, isTask := snapshot.(*a2a.Task); isTask && t.Status.State.Terminal() {
			yield(nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("task %s is already %s", id, t.Status.State)))
			return
		}

		ch := h.exec.claimParked(id)
		if ch == nil {
			// Another follow-up won the race; let the SDK answer this one.
			stop()
			for ev, err := range h.RequestHandler.SendStreamingMessage(ctx, req) {
				if !yield(ev, err) {
					return
				}
			}
			return
		}
		ch <- messageText(req.Message)

		// The subscription itself ends after the final event.
		for {
			ev, err, ok := next()
			if !ok || !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
