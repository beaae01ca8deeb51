package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
)

// The tasks extension (SEP-2663, io.modelcontextprotocol/tasks) in its 2026-07-28 framing:
// a client that declares the extension in a tools/call's capabilities gets a task at once
// ({"resultType":"task",…}); the task is the call's thread, and tasks/get, tasks/update and
// tasks/cancel read and act on its latest run through the engine, from the store: any
// replica answers, for the task's principal only. design/mcp-server.md has why the
// 2025-11-25 task wire is not served.

// tasksExtension is the extension's identifier in capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// relatedTaskKey names, in a task result's _meta, the task it is about (the key the
// 2025-11-25 tasks used): a client whose SDK reads every tools/call result as a
// CallToolResult (go-sdk's) still finds the task's id there.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// taskPollInterval is the poll interval a task suggests.
const taskPollInterval = 500

// TaskEngine is what the tasks extension needs of the engine beyond Engine. Every method
// reads the store, so that any replica answers; a thread that does not exist or is another
// principal's wraps ErrNotFound.
type TaskEngine interface {
	// RunLog returns the latest run of principal's thread and its logged events.
	RunLog(ctx context.Context, threadID, principal string) (*RunLog, error)
	// ListedLog is RunLog of th, a thread of principal's that ThreadsPage returned with
	// a run (LastRunID set): th is not looked up again, only its run's log is read.
	ListedLog(ctx context.Context, th ThreadInfo, principal string) (*RunLog, error)
	// Thread returns principal's thread threadID.
	Thread(ctx context.Context, threadID, principal string) (ThreadInfo, error)
	// ThreadsPage returns principal's threads whose id starts with prefix (the id up to
	// its first '-'), newest first by creation (equal times: greater id first), after
	// before (nil: from the newest), at most limit.
	ThreadsPage(ctx context.Context, principal, prefix string, before *ThreadInfo, limit int) ([]ThreadInfo, error)
	// AwaitRun returns once run runID of principal's thread threadID has ended, on
	// whichever replica runs it, or with ctx's error when ctx ends first (the run goes on).
	// Too many streams following the run or the principal's runs wraps ErrBusy.
	AwaitRun(ctx context.Context, threadID, runID, principal string) error
}

// ThreadInfo is a thread as the tasks extension lists it: its id and creation time (the
// list's order and cursor) and, as ThreadsPage returns it, its latest run (LastRunID, ""
// when it has none; LastRunAt, when that run started) and when it last changed.
type ThreadInfo struct {
	ID        string
	CreatedAt time.Time
	LastRunID string
	LastRunAt time.Time
	UpdatedAt time.Time
}

// RunLog is the latest run of a thread as its event log has it.
type RunLog struct {
	RunID string
	// Started is when the run started, Updated when its thread last changed.
	Started, Updated time.Time
	Events           []agui.Event
}

// ErrNotFound is wrapped by an Engine's errors for a run or thread the caller cannot see;
// ErrFinished by Stop's for a run that has already ended.
var (
	ErrNotFound = errors.New("mcpserver: not found")
	ErrFinished = errors.New("mcpserver: finished")
)

// task is a task as the extension shows it.
type task struct {
	TaskID        string              `json:"taskId"`
	Status        string              `json:"status"`
	StatusMessage string              `json:"statusMessage,omitempty"`
	CreatedAt     string              `json:"createdAt"`
	LastUpdatedAt string              `json:"lastUpdatedAt"`
	TTLMs         *int64              `json:"ttlMs"`
	PollInterval  int                 `json:"pollIntervalMs,omitempty"`
	Result        *taskCallResult     `json:"result,omitempty"`
	Error         *taskError          `json:"error,omitempty"`
	InputRequests mcp.InputRequestMap `json:"inputRequests,omitempty"`
	// state is the request state of the questions in InputRequests.
	state string
	// out is how the run ended; nil while the task is working.
	out *outcome
}

// payload is what a plain call of t would have returned once the task's run reached its
// status (input_required: the questions, as a client that cannot be asked gets them); nil
// while the task is working. Built on demand: tasks/get and tasks/list do not need it.
func (tk *task) payload(t tool, threadID string) *mcp.CallToolResult {
	switch {
	case tk.out == nil:
		return nil
	case tk.Result != nil:
		return tk.Result.CallToolResult
	case len(tk.out.interrupts) > 0:
		return tk.out.withUsage(askBack(t, threadID, tk.out.interrupts))
	}
	return tk.out.withUsage(tk.out.result(t))
}

// taskCallResult is a completed task's result: the CallToolResult a plain call gets, as a
// 2026-07-28 tools/call result, whose resultType is required ("complete"; a client such as
// @modelcontextprotocol/ext-tasks validates the task's result against that schema). go-sdk
// writes resultType only on the results it sends itself, not on one nested in ours.
type taskCallResult struct{ *mcp.CallToolResult }

// MarshalJSON writes the result with "resultType":"complete" in front of its fields.
func (r taskCallResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.CallToolResult)
	if err != nil {
		return nil, err
	}
	// A CallToolResult is an object with at least "content".
	if len(b) < 2 || b[0] != '{' || b[1] == '}' {
		return nil, fmt.Errorf("mcpserver: a tool result marshals to %.20q, not an object with content", b)
	}
	return append([]byte(`{"resultType":"complete",`), b[1:]...), nil
}

type taskError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// taskResult is the result of a task-augmented tools/call ("task") and of tasks/get
// ("complete").
type taskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	task
}

// doneResult is the result of tasks/update and tasks/cancel.
type doneResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

type taskParams struct {
	mcp.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses mcp.InputResponseMap `json:"inputResponses,omitempty"`
}

// principalKey carries a request's principal from the middleware to the extension's
// method handlers (go-sdk passes them the session and params only).
type principalKey struct{}

// registerTasks adds the extension's methods and middleware when the engine reads runs.
func (s *Server) registerTasks() error {
	te, ok := s.cfg.Engine.(TaskEngine)
	if !ok {
		return nil
	}
	s.tasks = te
	s.byTag = map[string]tool{}
	for _, t := range s.tools {
		if other, dup := s.byTag[t.tag]; dup {
			return fmt.Errorf("the tools %q and %q have the same tag (%s) in their thread ids: rename one", t.name, other.name, t.tag)
		}
		s.byTag[t.tag] = t
	}
	for method, h := range map[string]func(context.Context, *mcp.ServerSession, *taskParams) (mcp.Result, error){
		"tasks/get":    s.getTask,
		"tasks/update": s.updateTask,
		"tasks/cancel": s.cancelTask,
		"tasks/result": s.taskPayload,
	} {
		if err := mcp.AddReceivingCustomMethod(s.srv, method, h); err != nil {
			return err
		}
	}
	if err := mcp.AddReceivingCustomMethod(s.srv, "tasks/list", s.listTasks); err != nil {
		return err
	}
	s.srv.AddReceivingMiddleware(s.taskCalls, s.carryPrincipal)
	return nil
}

// carryPrincipal puts the request's principal in ctx for the extension's methods. The wait
// of a tasks/result also ends with the HTTP request that carries it (go-sdk ties a
// 2025-11-25 session's handlers to the session, not to the request: Handler's callHeader);
// the task goes on.
func (s *Server) carryPrincipal(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !strings.HasPrefix(method, "tasks/") {
			return next(ctx, method, req)
		}
		who := s.cfg.Anonymous
		ex := req.GetExtra()
		if ex != nil && ex.TokenInfo != nil {
			if p, ok := cutPrefix(ex.TokenInfo.UserID, principalPrefix); ok {
				who = p
			}
		}
		ctx = context.WithValue(ctx, principalKey{}, who)
		if method == "tasks/result" && ex != nil && ex.Header != nil {
			if post, ok := s.posts.Load(ex.Header.Get(callHeader)); ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(post.(context.Context), cancel)()
			}
		}
		return next(ctx, method, req)
	}
}

func (s *Server) principalIn(ctx context.Context) string {
	who, _ := ctx.Value(principalKey{}).(string)
	return who
}

// taskCalls answers a tools/call whose client declared the extension in the request
// (2026-07-28) with a task: the run starts and the call returns at once.
func (s *Server) taskCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || !wantsTask(call) {
			return next(ctx, method, req)
		}
		t, known := s.tools[call.Params.Name]
		if !known {
			return next(ctx, method, req)
		}
		return s.startTask(ctx, t, call)
	}
}

// wantsTask reports whether a call's own capabilities (2026-07-28: in its _meta) declare
// the tasks extension; a retry with answers (requestState) is answered in the call.
func wantsTask(call *mcp.CallToolRequest) bool {
	if call.Params == nil || call.Params.RequestState != "" || call.Params.Meta[mcp.MetaKeyClientCapabilities] == nil {
		return false
	}
	caps := call.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// startTask starts the call's run, detached from the request, and returns its task.
func (s *Server) startTask(ctx context.Context, t tool, req *mcp.CallToolRequest) (mcp.Result, error) {
	a, err := parseArgs(req.Params.Arguments, s.cfg.MaxPromptBytes)
	if err != nil {
		return nil, err
	}
	in, err := input(t, a)
	if err != nil {
		return nil, err
	}
	if err := s.checkResume(ctx, in, s.principalOf(req)); err != nil {
		return nil, err
	}
	if in.Depth, err = callerDepth(req); err != nil {
		return nil, err
	}
	in.Budget = s.callerBudget(req)
	c := &call{s: s, t: t, req: req, who: s.principalOf(req)}
	if _, err := c.start(context.WithoutCancel(ctx), in); err != nil {
		return c.startError(err, in)
	}
	now, id := stamp(time.Now()), taskID(in.ThreadID, t.name)
	res := &taskResult{ResultType: "task", task: task{TaskID: id, Status: "working",
		CreatedAt: now, LastUpdatedAt: now, PollInterval: taskPollInterval}}
	if ttl := s.cfg.TaskTTL; ttl > 0 {
		ms := ttl.Milliseconds()
		res.TTLMs = &ms
	}
	res.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": id}}
	return res, nil
}

// taskID names a task: its thread (no '/' in it) and its tool.
func taskID(threadID, tool string) string { return threadID + "/" + tool }

// splitTaskID returns the thread and tool of a task id, or a not-found error. The thread
// must be one a call started, and a call of that tool (its tag in the thread's id; a
// thread of an older Baton has none): a thread has one task id.
func (s *Server) splitTaskID(id string) (string, tool, error) {
	threadID, name, ok := strings.Cut(id, "/")
	t, known := s.tools[name]
	tag, mcpThread := threadTag(threadID)
	if !ok || !known || !agui.ValidID(threadID) || !mcpThread || (tag != "" && tag != t.tag) {
		return "", tool{}, taskNotFound(id)
	}
	return threadID, t, nil
}

func taskNotFound(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown task " + strings.ToValidUTF8(id[:min(len(id), 200)], "?")}
}

// getTask answers tasks/get from the task's latest run, as its event log has it.
func (s *Server) getTask(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	threadID, t, err := s.splitTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	log, err := s.tasks.RunLog(ctx, threadID, s.principalIn(ctx))
	if errors.Is(err, ErrNotFound) {
		return nil, taskNotFound(p.TaskID)
	}
	if err != nil {
		return nil, err
	}
	tk, expired := taskOf(threadID, t, log, s.cfg.TaskTTL, time.Now())
	if expired {
		return nil, taskNotFound(p.TaskID)
	}
	return &taskResult{ResultType: "complete", task: tk}, nil
}

// taskOf is the task whose latest run is log; expired when that run ended more than ttl
// before now (0: never).
func taskOf(threadID string, t tool, log *RunLog, ttl time.Duration, now time.Time) (tk task, expired bool) {
	rel := newRelay()
	msg := ""
	for _, ev := range log.Events {
		if m := rel.event(ev); m != "" {
			msg = m
		}
	}
	tk = task{TaskID: taskID(threadID, t.name), Status: "working", StatusMessage: msg,
		CreatedAt: stamp(log.Started), LastUpdatedAt: stamp(log.Updated), PollInterval: taskPollInterval}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		tk.TTLMs = &ms
	}
	if !rel.ended {
		return tk, false
	}
	if rel.endedAt > 0 {
		ended := time.UnixMilli(rel.endedAt)
		tk.LastUpdatedAt = stamp(ended)
		expired = ttl > 0 && now.Sub(ended) > ttl
	}
	out := rel.outcome()
	tk.out = out
	tk.StatusMessage = ""
	switch {
	case len(out.interrupts) > 0:
		tk.Status = "input_required"
		tk.InputRequests = mcp.InputRequestMap{}
		if res, ok := inputRequests(threadID, out.interrupts, elicitModes{form: true, url: true}); ok {
			tk.InputRequests, tk.state = res.InputRequests, res.RequestState
		}
		tk.StatusMessage = questionText(out.interrupts[0])
	case out.cancelled:
		tk.Status = "cancelled"
	case out.runErr != nil:
		tk.Status = "failed"
		tk.Error = &taskError{Code: jsonrpc.CodeInternalError, Message: out.runErr.Message}
	default:
		tk.Status = "completed"
		tk.Result = &taskCallResult{out.withUsage(out.result(t))}
	}
	return tk, expired
}

// updateTask answers tasks/update: the answers to an input_required task's questions resume
// its thread (a new run of the same task).
func (s *Server) updateTask(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	threadID, t, err := s.splitTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	who := s.principalIn(ctx)
	log, err := s.tasks.RunLog(ctx, threadID, who)
	if errors.Is(err, ErrNotFound) {
		return nil, taskNotFound(p.TaskID)
	}
	if err != nil {
		return nil, err
	}
	tk, expired := taskOf(threadID, t, log, s.cfg.TaskTTL, time.Now())
	if expired {
		return nil, taskNotFound(p.TaskID)
	}
	var st requestState
	if tk.Status != "input_required" || json.Unmarshal([]byte(tk.state), &st) != nil {
		return nil, invalidParams("the task %s is %s, not input_required with questions a client can answer", p.TaskID, tk.Status)
	}
	in := resumeInput(st, p.InputResponses)
	c := &call{s: s, t: t, who: who}
	if _, err := c.start(context.WithoutCancel(ctx), in); err != nil {
		if _, rerr := c.startError(err, in); rerr != nil {
			return nil, rerr
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be resumed"}
	}
	return &doneResult{ResultType: "complete"}, nil
}

// cancelTask answers tasks/cancel: the task's run is stopped (on whichever replica runs it).
func (s *Server) cancelTask(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	threadID, _, err := s.splitTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	who := s.principalIn(ctx)
	log, err := s.tasks.RunLog(ctx, threadID, who)
	if errors.Is(err, ErrNotFound) {
		return nil, taskNotFound(p.TaskID)
	}
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Engine.Stop(threadID, log.RunID, who); err != nil && !errors.Is(err, ErrFinished) {
		if errors.Is(err, ErrNotFound) {
			return nil, taskNotFound(p.TaskID)
		}
		return nil, err
	}
	return &doneResult{ResultType: "complete"}, nil
}

// taskPayload answers tasks/result (2025-11-25): what a plain call of the tool would have
// returned, once the task has reached a status where a plain call would have returned
// (completed, failed, cancelled: the tool's result), with the task's id in _meta. A working
// task is waited for, on whichever replica runs it, until it gets there or the request
// ends (a client cancel, a dropped request): the task goes on. An input_required task's
// questions are asked in the request's stream when the session's client can be asked
// (askInStream), and the wait goes on; otherwise they are the answer, as a client that
// cannot be asked gets them, to answer with "resume" or tasks/update.
func (s *Server) taskPayload(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	threadID, t, err := s.splitTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	who := s.principalIn(ctx)
	for waited, asked := "", ""; ; {
		log, err := s.tasks.RunLog(ctx, threadID, who)
		if errors.Is(err, ErrNotFound) {
			return nil, taskNotFound(p.TaskID)
		}
		if err != nil {
			return nil, s.readFailed(ctx, err)
		}
		tk, expired := taskOf(threadID, t, log, s.cfg.TaskTTL, time.Now())
		if expired {
			return nil, taskNotFound(p.TaskID)
		}
		if tk.Status == "input_required" && asked != log.RunID {
			asked = log.RunID
			resumed, err := s.askInStream(ctx, ss, p.TaskID, t, who, tk)
			if err != nil {
				return nil, err
			}
			if resumed {
				continue
			}
		}
		if res := tk.payload(t, threadID); res != nil {
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			res.Meta[relatedTaskKey] = map[string]any{"taskId": p.TaskID}
			return &taskCallResult{res}, nil
		}
		if waited == log.RunID {
			// The run ended and its log does not say so yet (or never will: a run lost
			// without its terminal event): look again after a poll interval, not at once.
			if err := sleepCtx(ctx, taskPollInterval*time.Millisecond); err != nil {
				return nil, err
			}
		}
		waited = log.RunID
		if err := s.tasks.AwaitRun(ctx, threadID, log.RunID, who); err != nil {
			return nil, s.awaitFailed(ctx, p.TaskID, err)
		}
	}
}

// askInStream asks an input_required task's questions within its tasks/result, as the
// 2025-11-25 spec has it (elicitation/create with the task's id in _meta), and resumes the
// task with the answers; resumed is false when the session's client cannot be asked them
// (a 2026-07-28 connection, which is stateless, or a client without elicitation, or one
// that fails to answer): tasks/result then returns them.
func (s *Server) askInStream(ctx context.Context, ss *mcp.ServerSession, id string, t tool, who string, tk task) (resumed bool, err error) {
	modes := streamModes(ss)
	threadID, _, _ := strings.Cut(id, "/")
	res, ok := inputRequests(threadID, tk.out.interrupts, modes)
	if (!modes.form && !modes.url) || !ok {
		return false, nil
	}
	var st requestState
	_ = json.Unmarshal([]byte(res.RequestState), &st)
	answers := mcp.InputResponseMap{}
	for _, q := range st.Interrupts {
		params, _ := res.InputRequests[q].(*mcp.ElicitParams)
		if params == nil {
			return false, nil
		}
		params.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": id}}
		ans, err := ss.Elicit(ctx, params)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			s.cfg.Logger.Debug("mcp: a task's question could not be asked in tasks/result", "task", id, "err", err)
			return false, nil
		}
		answers[q] = ans
	}
	in := resumeInput(st, answers)
	c := &call{s: s, t: t, who: who}
	if _, err := c.start(context.WithoutCancel(ctx), in); err != nil {
		if _, rerr := c.startError(err, in); rerr != nil {
			return false, rerr
		}
		return false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be resumed"}
	}
	return true, nil
}

// streamModes returns the elicitation modes in which the client of a session can be asked
// from within a request: those it declared at initialize, on a 2025-11-25 (or older)
// session; none on a 2026-07-28 one (go-sdk refuses server requests there).
func streamModes(ss *mcp.ServerSession) elicitModes {
	if ss == nil {
		return elicitModes{}
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion >= statelessVersion || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return elicitModes{}
	}
	e := ip.Capabilities.Elicitation
	return elicitModes{form: e.Form != nil || e.URL == nil, url: e.URL != nil}
}

// awaitFailed is the error of a tasks/result whose wait failed.
func (s *Server) awaitFailed(ctx context.Context, id string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, ErrNotFound):
		return taskNotFound(id)
	case errors.Is(err, ErrBusy):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many streams follow this caller's runs; try tasks/get, or again shortly"}
	}
	return s.readFailed(ctx, err)
}

// readFailed is the error of a task method whose read of the store failed: logged, and
// shown without its detail.
func (s *Server) readFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.cfg.Logger.Warn("mcp: a task could not be read", "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be read; try again shortly"}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listTasks answers tasks/list (2025-11-25): the caller's tasks (the threads its calls
// started, any tool, with or without the extension; expired ones left out), newest first,
// at most taskPageSize a page, each as tasks/get shows it without its result and
// questions. The engine reads the threads a page at a time from the cursor (a keyset: the
// position after the page's last examined thread, its creation time and id), so a page
// costs the same whatever the number of threads, and a task created meanwhile does not
// shift the pages after it.
func (s *Server) listTasks(ctx context.Context, _ *mcp.ServerSession, p *listParams) (mcp.Result, error) {
	after, err := parseCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	who := s.principalIn(ctx)
	res := &listResult{ResultType: "complete", Tasks: []task{}}
	now := time.Now()
	from, examined := after.position(), 0
	for {
		threads, err := s.tasks.ThreadsPage(ctx, who, threadPrefix, from, listBatch)
		if err != nil {
			return nil, s.readFailed(ctx, err)
		}
		for i, th := range threads {
			if len(res.Tasks) == taskPageSize || examined == maxListExamined {
				res.NextCursor = cursorOf(*from)
				return res, nil
			}
			examined++
			from = &threads[i]
			tk, ok, err := s.listedTask(ctx, th, who, now)
			if err != nil {
				return nil, s.readFailed(ctx, err)
			}
			if ok {
				res.Tasks = append(res.Tasks, tk)
			}
		}
		if len(threads) < listBatch {
			return res, nil
		}
	}
}

// listedTask returns th as tasks/list shows it (tasks/get's task without its result and
// questions), or false when th is not one: not a task of a tool this server serves (a
// thread an older Baton started has no tag), without a run, or expired.
func (s *Server) listedTask(ctx context.Context, th ThreadInfo, who string, now time.Time) (task, bool, error) {
	tag, _ := threadTag(th.ID)
	t, known := s.byTag[tag]
	if tag == "" || !known {
		return task{}, false, nil
	}
	if th.LastRunID == "" {
		return task{}, false, nil // not run yet
	}
	// The page read th's record: only its run's log is read (one read a listed task).
	log, err := s.tasks.ListedLog(ctx, th, who)
	if errors.Is(err, ErrNotFound) {
		return task{}, false, nil // deleted since
	}
	if err != nil {
		return task{}, false, err
	}
	tk, expired := taskOf(th.ID, t, log, s.cfg.TaskTTL, now)
	if expired {
		return task{}, false, nil
	}
	tk.Result, tk.InputRequests = nil, nil
	return tk, true, nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
