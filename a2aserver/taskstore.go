package a2aserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/baton-dev/baton/internal/principal"
	"github.com/baton-dev/baton/runs"
)

// Tasks is where the A2A tasks are kept, through the engine's port (coordinator.Runs
// fits): shared by every replica, so that any of them answers for a task, and durable, so
// that tasks outlive a restart. Every call but the sweep names the principal whose task it
// is, and another principal's task is runs.ErrTaskNotFound.
type Tasks interface {
	CreateTask(ctx context.Context, principal string, t *runs.Task) error
	SweepTasks(ctx context.Context, cutoff time.Time) (int64, error)
	UpdateTask(ctx context.Context, principal string, t *runs.Task, prev int64) error
	GetTask(ctx context.Context, principal, taskID string) (*runs.Task, error)
	ListTasks(ctx context.Context, principal string, q runs.TaskQuery) ([]runs.Task, int, error)
}

// chunkBits is how many low bits of a task version count the artifact chunks written
// since the task's last store write: a chunk changes the task in this process only (its
// text is in the run's event log already), so a2asrv sees a version that grows with every
// event while the store's grows with every status change. A replica that reads the task
// from the store sees version stored<<chunkBits.
const chunkBits = 20

// maxCached bounds the tasks kept in memory with their artifacts: every task with an
// execution here, and the most recent ones that ended (for a GetTask right after the end,
// before the run's event log has caught up).
const maxCached = 1024

// maxHistory bounds the messages kept in a task's history (the thread keeps them all).
const maxHistory = 64

// taskBody is the task document kept in the store: the task without its artifacts, and
// the runs whose event logs hold them.
type taskBody struct {
	Task *a2a.Task `json:"task"`
	Runs []string  `json:"runs,omitempty"`
}

// cached is a task as this process last wrote it.
type cached struct {
	who     string // whose task it is
	task    *a2a.Task
	runs    []string
	version taskstore.TaskVersion // what a2asrv knows
	stored  int64                 // the store's version of it
}

// taskStore is a2asrv's task store on Baton's store: tasks are scoped by principal, their
// status and history are stored, their artifacts derived from their runs' event logs
// (follow.go).
type taskStore struct {
	db        Tasks
	log       Log
	retention time.Duration

	// sweptAt is when the tasks past their retention were last deleted (Unix ns).
	sweptAt atomic.Int64

	mu    sync.Mutex
	cache map[a2a.TaskID]*cached
}

var _ taskstore.Store = (*taskStore)(nil)

func newTaskStore(db Tasks, log Log, retention time.Duration) *taskStore {
	return &taskStore{db: db, log: log, retention: retention, cache: map[a2a.TaskID]*cached{}}
}

// sweepEvery is how often a new task also deletes the tasks past their retention.
const sweepEvery = time.Minute

// sweep deletes the tasks not updated within the retention (their runs' event logs are
// gone with it), at most once per sweepEvery, on the path that adds tasks: no job of its
// own to start and stop, and a store that grows only while tasks are created.
func (s *taskStore) sweep(ctx context.Context) {
	now := time.Now()
	last := s.sweptAt.Load()
	if s.retention <= 0 || now.UnixNano()-last < int64(sweepEvery) || !s.sweptAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_, _ = s.db.SweepTasks(ctx, now.Add(-s.retention))
}

// callerOf returns the principal a call is made for: the a2asrv user the interceptor set,
// or (outside a2asrv's handler) the one the HTTP surface authenticated.
func callerOf(ctx context.Context) (string, bool) {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated {
		if who, ok := cc.User.Attributes[principalAttr].(string); ok && userName(who) == cc.User.Name {
			return who, true
		}
	}
	return principal.From(ctx)
}

func (s *taskStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	who, ok := callerOf(ctx)
	if !ok {
		return 0, a2a.ErrUnauthenticated
	}
	s.sweep(ctx)
	c := &cached{who: who, task: copyTask(task)}
	c.runs = addRun(nil, task)
	rec, err := record(c.task, c.runs)
	if err != nil {
		return 0, err
	}
	if err := s.db.CreateTask(ctx, who, rec); err != nil {
		if errors.Is(err, runs.ErrTaskExists) {
			return 0, taskstore.ErrTaskAlreadyExists
		}
		return 0, fmt.Errorf("a2a task store: %w", err)
	}
	c.stored, c.version = rec.Version, taskstore.TaskVersion(rec.Version<<chunkBits)
	s.put(task.ID, c)
	return c.version, nil
}

func (s *taskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	id := req.Task.ID
	s.mu.Lock()
	c := s.cache[id]
	if c == nil || c.version != req.PrevVersion {
		s.mu.Unlock()
		return s.updateStored(ctx, req)
	}
	chunk, isChunk := req.Event.(*a2a.TaskArtifactUpdateEvent)
	if isChunk && req.Task.Status.State == c.task.Status.State && (c.version+1)&(1<<chunkBits-1) != 0 {
		// An artifact chunk changes the task in this process only: it is applied to the
		// cached task (its parts copied, not the whole task, which would make an answer's
		// cost grow with the square of its length).
		addChunk(c.task, chunk)
		c.version++
		v := c.version
		s.mu.Unlock()
		return v, nil
	}
	who, stored, runIDs, version := c.who, c.stored, c.runs, c.version
	s.mu.Unlock()
	next := &cached{who: who, task: copyTask(req.Task), runs: addRun(runIDs, req.Task), stored: stored, version: version + 1}
	rec, err := record(next.task, next.runs)
	if err != nil {
		return 0, err
	}
	if err := s.db.UpdateTask(ctx, who, rec, stored); err != nil {
		s.drop(id)
		if errors.Is(err, runs.ErrTaskVersion) {
			return s.cancelOver(ctx, req)
		}
		return 0, storeError(err)
	}
	next.stored, next.version = rec.Version, taskstore.TaskVersion(rec.Version<<chunkBits)
	s.put(id, next)
	return next.version, nil
}

// updateStored writes a task that this process does not hold (a CancelTask for a task
// whose execution is elsewhere, a message to a task read from the store).
func (s *taskStore) updateStored(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	prev := int64(req.PrevVersion)
	if prev&(1<<chunkBits-1) != 0 {
		return s.cancelOver(ctx, req)
	}
	who, ok := callerOf(ctx)
	if !ok {
		return 0, a2a.ErrUnauthenticated
	}
	old, err := s.db.GetTask(ctx, who, string(req.Task.ID))
	if err != nil {
		return 0, storeError(err)
	}
	var body taskBody
	_ = json.Unmarshal(old.Body, &body)
	c := &cached{who: who, task: copyTask(req.Task), runs: addRun(body.Runs, req.Task)}
	rec, err := record(c.task, c.runs)
	if err != nil {
		return 0, err
	}
	if err := s.db.UpdateTask(ctx, who, rec, prev>>chunkBits); err != nil {
		s.drop(req.Task.ID)
		if errors.Is(err, runs.ErrTaskVersion) {
			return s.cancelOver(ctx, req)
		}
		return 0, storeError(err)
	}
	c.stored, c.version = rec.Version, taskstore.TaskVersion(rec.Version<<chunkBits)
	s.put(req.Task.ID, c)
	return c.version, nil
}

// cancelWrites bounds how many times a cancel is written over a task that keeps changing.
const cancelWrites = 5

// cancelOver writes a canceled status over the task as the store has it now, when the
// task changed since the writer read it (a CancelTask on a replica other than the
// execution's, which read the task before the execution's last write). a2asrv would read
// the task back through Get and take a canceled state found there as the stored one, but
// Get may read that state from the run's event log (follow.go) while the store still says
// working: CancelTask would answer canceled and the running replica's GetTask working.
// Any other update, or a task the store has ended already, is a conflict (a2asrv then
// answers with the stored end).
func (s *taskStore) cancelOver(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	ev, ok := req.Event.(*a2a.TaskStatusUpdateEvent)
	if !ok || ev.Status.State != a2a.TaskStateCanceled {
		return 0, taskstore.ErrConcurrentModification
	}
	who, ok := callerOf(ctx)
	if !ok {
		return 0, a2a.ErrUnauthenticated
	}
	id := req.Task.ID
	for range cancelWrites {
		old, err := s.db.GetTask(ctx, who, string(id))
		if err != nil {
			return 0, storeError(err)
		}
		var body taskBody
		if err := json.Unmarshal(old.Body, &body); err != nil || body.Task == nil {
			return 0, fmt.Errorf("%w: the stored task cannot be read", a2a.ErrInternalError)
		}
		t := body.Task
		if t.Status.State.Terminal() {
			return 0, taskstore.ErrConcurrentModification
		}
		// Its answers so far are in its runs' logs; its state is the stored one.
		if _, err := s.replay(ctx, who, t, body.Runs, true, false); err != nil {
			return 0, err
		}
		apply(t, ev)
		c := &cached{who: who, task: t, runs: addRun(body.Runs, t)}
		rec, err := record(c.task, c.runs)
		if err != nil {
			return 0, err
		}
		err = s.db.UpdateTask(ctx, who, rec, old.Version)
		if errors.Is(err, runs.ErrTaskVersion) {
			continue
		}
		if err != nil {
			return 0, storeError(err)
		}
		c.stored, c.version = rec.Version, taskstore.TaskVersion(rec.Version<<chunkBits)
		s.put(id, c)
		return c.version, nil
	}
	return 0, taskstore.ErrConcurrentModification
}

func (s *taskStore) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	who, ok := callerOf(ctx)
	if !ok {
		return nil, a2a.ErrUnauthenticated
	}
	// Another principal's task is one that does not exist (the port checks).
	rec, err := s.db.GetTask(ctx, who, string(id))
	if err != nil {
		return nil, storeError(err)
	}
	s.mu.Lock()
	c := s.cache[id]
	if c != nil && c.stored == rec.Version {
		t, v := copyTask(c.task), c.version
		s.mu.Unlock()
		return &taskstore.StoredTask{Task: t, Version: v, User: userName(who)}, nil
	}
	s.mu.Unlock()
	if c != nil {
		s.drop(id) // written elsewhere since
	}
	t, _, err := s.load(ctx, rec, true)
	if err != nil {
		return nil, err
	}
	return &taskstore.StoredTask{Task: t, Version: taskstore.TaskVersion(rec.Version << chunkBits), User: userName(who)}, nil
}

// load decodes a stored task and completes it from its runs' event logs: its artifacts
// (when withArtifacts) and, while its current run goes on elsewhere or has ended without
// an execution to report it (its replica died), its state (follow.go).
func (s *taskStore) load(ctx context.Context, rec *runs.Task, withArtifacts bool) (*a2a.Task, *replay, error) {
	var body taskBody
	if err := json.Unmarshal(rec.Body, &body); err != nil || body.Task == nil {
		return nil, nil, fmt.Errorf("%w: the stored task cannot be read", a2a.ErrInternalError)
	}
	t := body.Task
	rp, err := s.replay(ctx, rec.Principal, t, body.Runs, withArtifacts, true)
	if err != nil {
		return nil, nil, err
	}
	return t, rp, nil
}

func (s *taskStore) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	who, ok := callerOf(ctx)
	if !ok {
		return nil, a2a.ErrUnauthenticated
	}
	size := req.PageSize
	switch {
	case size == 0:
		size = 50
	case size < 1 || size > runs.MaxTasksPage:
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", a2a.ErrInvalidRequest, runs.MaxTasksPage)
	}
	offset := 0
	if req.PageToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(req.PageToken)
		n, aerr := strconv.Atoi(string(b))
		if err != nil || aerr != nil || n < 0 {
			return nil, fmt.Errorf("%w: pageToken is not one this server gave", a2a.ErrInvalidRequest)
		}
		offset = n
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, fmt.Errorf("%w: historyLength must not be negative", a2a.ErrInvalidRequest)
	}
	q := runs.TaskQuery{ContextID: req.ContextID, State: string(req.Status), Offset: offset, Limit: size}
	if req.StatusTimestampAfter != nil {
		q.UpdatedAfter = *req.StatusTimestampAfter
	}
	recs, total, err := s.db.ListTasks(ctx, who, q)
	if err != nil {
		return nil, storeError(err)
	}
	out := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, TotalSize: total, PageSize: size}
	for i := range recs {
		t, _, err := s.load(ctx, &recs[i], req.IncludeArtifacts)
		if err != nil {
			continue
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		if req.HistoryLength != nil && len(t.History) > *req.HistoryLength {
			t.History = t.History[len(t.History)-*req.HistoryLength:]
		}
		out.Tasks = append(out.Tasks, t)
	}
	if next := offset + len(recs); next < total && len(recs) > 0 {
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(next)))
	}
	return out, nil
}

// put caches a task, making room by forgetting tasks that have ended.
func (s *taskStore) put(id a2a.TaskID, c *cached) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache[id] = c
	if len(s.cache) <= maxCached {
		return
	}
	for k, v := range s.cache {
		if k != id && ended(v.task.Status.State) {
			delete(s.cache, k)
			if len(s.cache) <= maxCached/2 {
				return
			}
		}
	}
}

func (s *taskStore) drop(id a2a.TaskID) {
	s.mu.Lock()
	delete(s.cache, id)
	s.mu.Unlock()
}

// maxParts bounds the parts of an artifact kept here: beyond it, its consecutive text
// parts are joined into one.
const maxParts = 64

// addChunk applies an artifact event to a task as a2asrv does, copying the event's parts
// (not the task's), and keeps the artifact within maxParts.
func addChunk(t *a2a.Task, ev *a2a.TaskArtifactUpdateEvent) {
	if ev.Artifact == nil {
		return
	}
	parts := make([]*a2a.Part, 0, len(ev.Artifact.Parts))
	for _, p := range ev.Artifact.Parts {
		if p != nil {
			c := *p
			parts = append(parts, &c)
		}
	}
	i := slices.IndexFunc(t.Artifacts, func(a *a2a.Artifact) bool { return a.ID == ev.Artifact.ID })
	if i < 0 || !ev.Append {
		a := *ev.Artifact
		a.Parts = parts
		a.Metadata = maps.Clone(ev.Artifact.Metadata)
		if i < 0 {
			t.Artifacts = append(t.Artifacts, &a)
		} else {
			t.Artifacts[i] = &a
		}
		return
	}
	a := t.Artifacts[i]
	a.Parts = append(a.Parts, parts...)
	if len(ev.Artifact.Metadata) > 0 {
		if a.Metadata == nil {
			a.Metadata = map[string]any{}
		}
		maps.Copy(a.Metadata, ev.Artifact.Metadata)
	}
	if len(a.Parts) > maxParts {
		a.Parts = joinText(a.Parts)
	}
}

// joinText joins the consecutive plain text parts (no file name, media type or metadata)
// into one: the same text, in fewer parts.
func joinText(parts []*a2a.Part) []*a2a.Part {
	plain := func(p *a2a.Part) bool {
		_, ok := p.Content.(a2a.Text)
		return ok && p.Filename == "" && p.MediaType == "" && len(p.Metadata) == 0
	}
	out := make([]*a2a.Part, 0, len(parts))
	var b strings.Builder
	run := 0
	end := func() {
		if run > 0 {
			out = append(out, a2a.NewTextPart(b.String()))
		}
		b.Reset()
		run = 0
	}
	for _, p := range parts {
		if !plain(p) {
			end()
			out = append(out, p)
			continue
		}
		b.WriteString(p.Text())
		run++
	}
	end()
	return out
}

// ended reports whether a task in this state has no execution: final, or waiting for
// the caller.
func ended(st a2a.TaskState) bool {
	return st.Terminal() || st == a2a.TaskStateInputRequired
}

// record is the store's record of a task, its history bounded. Its artifacts are kept
// once nothing runs for it (one write, when its execution ends); until then they are left
// out, being in the runs' event logs, which another replica reads them from (a write per
// chunk would rewrite the task for every token of its answer).
func record(t *a2a.Task, runIDs []string) (*runs.Task, error) {
	c := *t
	if !ended(t.Status.State) {
		c.Artifacts = nil
	}
	if len(c.Artifacts) > 0 {
		// The answer is kept in as few parts as it has kinds of content.
		c.Artifacts = make([]*a2a.Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			j := *a
			j.Parts = joinText(a.Parts)
			c.Artifacts[i] = &j
		}
	}
	if len(c.History) > maxHistory {
		c.History = c.History[len(c.History)-maxHistory:]
	}
	b, err := json.Marshal(taskBody{Task: &c, Runs: runIDs})
	if err != nil {
		return nil, fmt.Errorf("%w: the task cannot be stored", a2a.ErrInternalError)
	}
	_, runID := runOf(t)
	return &runs.Task{TaskID: string(t.ID), ContextID: t.ContextID, RunID: runID, State: string(t.Status.State), Body: b}, nil
}

// maxRuns bounds the runs recorded per task (each question answered is one more).
const maxRuns = 64

// addRun returns runs with the task's current run added.
func addRun(runIDs []string, t *a2a.Task) []string {
	_, runID := runOf(t)
	if runID == "" || slices.Contains(runIDs, runID) {
		return runIDs
	}
	runIDs = append(slices.Clone(runIDs), runID)
	if len(runIDs) > maxRuns {
		runIDs = runIDs[len(runIDs)-maxRuns:]
	}
	return runIDs
}

// storeError maps the store's errors to a2asrv's.
func storeError(err error) error {
	switch {
	case errors.Is(err, runs.ErrTaskNotFound), errors.Is(err, runs.ErrThreadNotFound), errors.Is(err, runs.ErrRunNotFound):
		return a2a.ErrTaskNotFound
	case errors.Is(err, runs.ErrTaskVersion):
		return taskstore.ErrConcurrentModification
	default:
		return fmt.Errorf("%w: the task store is unavailable", a2a.ErrInternalError)
	}
}

// copyTask copies a task through JSON: nothing is shared with a2asrv's copy.
func copyTask(t *a2a.Task) *a2a.Task {
	b, err := json.Marshal(t)
	if err != nil {
		return t
	}
	var c a2a.Task
	if json.Unmarshal(b, &c) != nil {
		return t
	}
	return &c
}
