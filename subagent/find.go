package subagent

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	a2alog "github.com/a2aproject/a2a-go/v2/log"
)

// ErrTaskNotFound is FindTask's answer when the agent lists no task that the message
// started (yet): the message may not have arrived, or the agent has not made its task.
var ErrTaskNotFound = errors.New("a2a: no task found for the message")

// findPages bounds the pages FindTask reads: a context holds the tasks of one caller's
// conversation with the agent, and the one looked for is among its newest.
const findPages = 4

// FindTask finds the task that a message sent with [Request.MessageID] messageID and
// [Request.ContextID] contextID started, for a caller that never learned its id (the
// process that sent it died before the agent's first answer). It lists the context's tasks
// (A2A ListTasks with a contextId filter) and picks the one whose history holds the
// message, or else the context's only task. It returns the task as [Agent.GetTask] does.
//
// An agent that does not serve ListTasks (A2A 0.3 has no such method; 1.0 agents may
// refuse it, for instance to anonymous callers) gets an error wrapping the SDK's, and an
// agent that lists nothing for the context [ErrTaskNotFound].
func (a *Agent) FindTask(ctx context.Context, contextID, messageID string) (*Result, error) {
	if contextID == "" {
		return nil, ErrTaskNotFound
	}
	ctx = a2alog.AttachLogger(ctx, a.logger)
	b, err := a.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding the task of message %s: %w", messageID, err)
	}
	var all []*sdk.Task
	req := &sdk.ListTasksRequest{ContextID: contextID, PageSize: 100}
	for range findPages {
		actx, rec := withStatus(ctx)
		resp, err := b.client.ListTasks(actx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("a2a: agent %q: listing tasks: %w", a.Name, ctx.Err())
			}
			return nil, fmt.Errorf("finding the task of message %s: %w", messageID, classify(a.Name, err, rec, false))
		}
		for _, t := range resp.Tasks {
			if t == nil || t.ContextID != contextID {
				continue // a server that ignores the filter lists others' tasks too
			}
			if startedBy(t, messageID) {
				return a.taskResult(b, t), nil
			}
			all = append(all, t)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if len(all) == 1 && len(all[0].History) == 0 {
		// A server that keeps no history: its only task is the message's. (A context
		// holds every task of one caller's conversation with the agent, so a task whose
		// history shows other messages is an earlier call's, never this one's.)
		return a.taskResult(b, all[0]), nil
	}
	return nil, ErrTaskNotFound
}

// startedBy says whether t's history holds the message messageID.
func startedBy(t *sdk.Task, messageID string) bool {
	if messageID == "" {
		return false
	}
	for _, m := range t.History {
		if m != nil && m.ID == messageID {
			return true
		}
	}
	return false
}

// taskResult is a listed task as a Result, built like GetTask's.
func (a *Agent) taskResult(b *binding, t *sdk.Task) *Result {
	d := a.newDelegation(b, Request{TaskID: string(t.ID)}, Observer{})
	d.noteTask(string(t.ID), t.ContextID)
	d.silently(func() { d.applyTask(t) })
	return d.result()
}
