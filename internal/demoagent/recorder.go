package demoagent

import (
	"context"
	"slices"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Recorder observes what a demo agent was asked to do and what it answered. Tests use it
// to check, for example, that a coordinator really sent CancelTask. The zero value is
// ready to use and it is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	methods []string
	cancels []string
	states  map[string]a2a.TaskState
}

// Methods returns the A2A methods received, in arrival order, with their 1.0 names
// (SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, ...), whichever
// protocol version the client spoke.
func (r *Recorder) Methods() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.methods)
}

// Cancels returns the task ids of every CancelTask request received, in arrival order.
func (r *Recorder) Cancels() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cancels)
}

// LastState returns the last task state the agent emitted for taskID, or
// a2a.TaskStateUnspecified when it emitted none.
func (r *Recorder) LastState(taskID string) a2a.TaskState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states[taskID]
}

func (r *Recorder) recordCall(method string, payload any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.methods = append(r.methods, method)
	if req, ok := payload.(*a2a.CancelTaskRequest); ok && req != nil {
		r.cancels = append(r.cancels, string(req.ID))
	}
}

func (r *Recorder) recordEvent(ev a2a.Event) {
	if r == nil || ev == nil {
		return
	}
	var id string
	var state a2a.TaskState
	switch v := ev.(type) {
	case *a2a.Task:
		id, state = string(v.ID), v.Status.State
	case *a2a.TaskStatusUpdateEvent:
		id, state = string(v.TaskID), v.Status.State
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.states == nil {
		r.states = make(map[string]a2a.TaskState)
	}
	r.states[id] = state
}

// recordingInterceptor feeds every incoming call to a Recorder. It sits on the handler
// shared by the 1.0 and 0.3 transports, so both are observed.
type recordingInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	rec *Recorder
}

// Before implements a2asrv.CallInterceptor.
func (i recordingInterceptor) Before(ctx context.Context, callCtx *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	i.rec.recordCall(callCtx.Method(), req.Payload)
	return ctx, nil, nil
}
