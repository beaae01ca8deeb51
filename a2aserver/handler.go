package a2aserver

import (
	"context"
	"errors"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/baton-dev/baton/internal/followers"
)

// handler is a2asrv's request handler with the caller's ownership of a named task checked
// before a2asrv looks for the task's execution (a2asrv finds a live execution by task id
// alone, whoever asks), and SubscribeToTask extended to tasks whose execution is not on
// this replica (elsewhere, or gone with a restart): it follows the task's run in the
// event log.
type handler struct {
	a2asrv.RequestHandler
	tasks *taskStore
	// follows caps the streams a principal follows, with the other surfaces'.
	follows *followers.Counter
}

func (h *handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if req != nil {
			if err := h.tasks.owns(ctx, req.ID); err != nil {
				yield(nil, err)
				return
			}
			who, _ := callerOf(ctx)
			leave, err := h.follows.Join(who, "a2a\x00"+string(req.ID), 0)
			if err != nil {
				yield(nil, busyError("You follow too many streams at once; close some, or retry later."))
				return
			}
			defer leave()
		}
		first := true
		for ev, err := range h.RequestHandler.SubscribeToTask(ctx, req) {
			if first && err != nil && errors.Is(err, a2a.ErrTaskNotFound) && req != nil {
				// No execution of the task here.
				h.tasks.follow(ctx, req.ID, yield)
				return
			}
			first = false
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (h *handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if err := h.ownsTarget(ctx, req); err != nil {
		return nil, err
	}
	return h.RequestHandler.SendMessage(ctx, req)
}

func (h *handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if err := h.ownsTarget(ctx, req); err != nil {
			yield(nil, err)
			return
		}
		for ev, err := range h.RequestHandler.SendStreamingMessage(ctx, req) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// ownsTarget checks that a message to an existing task is the task owner's.
func (h *handler) ownsTarget(ctx context.Context, req *a2a.SendMessageRequest) error {
	if req == nil || req.Message == nil || req.Message.TaskID == "" {
		return nil
	}
	return h.tasks.owns(ctx, req.Message.TaskID)
}

// owns answers nil when the task exists and is the caller's; another principal's task is
// one that does not exist: the same error, after the same store read.
func (s *taskStore) owns(ctx context.Context, id a2a.TaskID) error {
	who, ok := callerOf(ctx)
	if !ok {
		return a2a.ErrUnauthenticated
	}
	if _, err := s.db.GetTask(ctx, who, string(id)); err != nil {
		return storeError(err)
	}
	return nil
}
