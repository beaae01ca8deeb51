package a2aserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/internal/principal"
	"github.com/baton-dev/baton/store"
)

// logTo records a fake run in st as the engine does: the thread's owner, the run, its
// events in the log, and its end.
func logTo(st store.Store, threadID, runID, who string) func(int, agui.Event) {
	ctx := context.Background()
	_, _ = st.ClaimThread(ctx, threadID, who, "")
	epoch, _ := st.BeginRun(ctx, threadID, runID, "rep", time.Minute)
	return func(seq int, ev agui.Event) {
		b, err := agui.MarshalEvent(ev)
		if err != nil {
			panic(err)
		}
		_ = st.AppendEvents(ctx, threadID, runID, epoch, []store.Event{{Seq: int64(seq), Data: b}})
		switch ev.(type) {
		case *agui.RunFinished, *agui.RunError:
			_ = st.EndRun(ctx, threadID, runID, epoch, "completed")
		}
	}
}

// artifactText is the text of an artifact's parts.
func artifactText(a *a2a.Artifact) string {
	var b strings.Builder
	for _, p := range a.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// replicas serves two A2A surfaces (two replicas: each its own a2asrv handler, executions
// and task cache) on one engine and one store.
func replicas(t *testing.T) (*fakeEngine, string, string) {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := &fakeEngine{runs: map[string]*fakeRun{}, owners: map[string]string{}, st: st}
	var urls []string
	for range 2 {
		s := New(Config{Engine: e, Tasks: portOver(t, st, nil), Log: portOver(t, st, nil), Card: CardInfo{Name: "baton"}, CancelHorizon: 5 * time.Second})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.ServeHTTP(w, r.WithContext(principal.With(r.Context(), r.Header.Get("X-Principal"))))
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(s.Close)
		urls = append(urls, srv.URL)
	}
	return e, urls[0], urls[1]
}

// TestTasksAcrossReplicas: a task run on one replica is read (GetTask with its answer,
// ListTasks by context), followed (SubscribeToTask: the answer as it grows, then the end)
// and cancelled (CancelTask answers once the run has ended) on another, which has no
// execution of it and reads it from the store and the run's event log; another principal
// sees none of it.
func TestTasksAcrossReplicas(t *testing.T) {
	t.Parallel()
	e, a, b := replicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	onA, onB := client(t, a, "alice", "jsonrpc"), client(t, b, "alice", "rest")

	done := stream(t, onA, msg("hello"))
	require.Equal(t, a2a.TaskStateCompleted, done.last.State)
	got, err := onB.GetTask(ctx, &a2a.GetTaskRequest{ID: done.task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.Len(t, got.Artifacts, 1, "the answer, from the run's event log")
	assert.Equal(t, "hi there", artifactText(got.Artifacts[0]))
	list, err := onB.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: done.task.ContextID, IncludeArtifacts: true})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	assert.Equal(t, done.task.ID, list.Tasks[0].ID)
	_, err = client(t, b, "bob", "jsonrpc").GetTask(ctx, &a2a.GetTaskRequest{ID: done.task.ID})
	assert.ErrorIs(t, err, a2a.ErrTaskNotFound)

	res, err := onA.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg("slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	var run *fakeRun
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := onB.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if assert.NoError(c, err) {
			assert.Equal(c, a2a.TaskStateWorking, got.Status.State)
			_, runID := runOf(got)
			e.mu.Lock()
			run = e.runs[runID]
			e.mu.Unlock()
			assert.NotNil(c, run)
		}
	}, 5*time.Second, 10*time.Millisecond)

	type followed struct {
		text  string
		state a2a.TaskState
		err   error
	}
	out := make(chan followed, 1)
	subscribed := make(chan struct{})
	go func() {
		var f followed
		for ev, err := range onB.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
			if err != nil {
				f.err = err
				break
			}
			switch v := ev.(type) {
			case *a2a.Task:
				close(subscribed)
			case *a2a.TaskArtifactUpdateEvent:
				for _, p := range v.Artifact.Parts {
					f.text += p.Text()
				}
			case *a2a.TaskStatusUpdateEvent:
				f.state = v.Status.State
			}
		}
		out <- f
	}()
	<-subscribed
	run.push(say("m9", "more")...)
	require.Eventually(t, func() bool {
		got, err := onB.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		return err == nil && len(got.Artifacts) == 1
	}, 5*time.Second, 10*time.Millisecond)

	canceled, err := onB.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
	select {
	case <-run.Done():
	default:
		t.Fatal("CancelTask on the other replica answered before the run ended")
	}
	f := <-out
	require.NoError(t, f.err)
	assert.Equal(t, "more", f.text, "the follower streamed the answer from the event log")
	assert.Equal(t, a2a.TaskStateCanceled, f.state)
	got, err = onA.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, got.Status.State)
}

// CancelTask answered by a replica that does not run the task names the downstream cancels
// that were not confirmed, as the running replica's answer does: one the owner journaled as
// failed, and one still pending in the store when the horizon passes; a confirmed one is
// not named.
func TestCancelElsewhereNamesUnconfirmed(t *testing.T) {
	t.Parallel()
	e, a, b := replicas(t)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	e.onStop = func(threadID, runID string) []cancel.Report {
		// What the owner's engine records: its run's tasks, the cancel still retried, and
		// the one that failed.
		work := `{"a2a":[{"agent":"research","taskId":"t-ok","state":"working"},{"agent":"travel","taskId":"t-bad","state":"working"},{"agent":"maps","taskId":"t-stuck","state":"working"}]}`
		rec, err := e.st.GetRun(ctx, threadID, runID)
		require.NoError(t, err)
		require.NoError(t, e.st.SaveRunWork(ctx, threadID, runID, rec.Epoch, []byte(work)))
		require.NoError(t, e.st.SavePendingCancel(ctx, store.PendingCancel{Agent: "maps", TaskID: "t-stuck", Since: time.Now()}))
		require.NoError(t, e.st.RecordStep(ctx, &store.Step{ThreadID: threadID, RunID: runID, Kind: store.StepCancel, Target: "travel",
			Ref: "t-bad", Outcome: store.StepError, Detail: "a2a failed"}))
		return []cancel.Report{{Kind: cancel.KindA2ATask, Name: "maps", ID: "t-stuck", Result: cancel.ResultPending}}
	}
	onA, onB := client(t, a, "alice", "jsonrpc"), client(t, b, "alice", "rest")
	res, err := onA.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg("slow"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := onB.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if assert.NoError(c, err) {
			assert.Equal(c, a2a.TaskStateWorking, got.Status.State)
		}
	}, 5*time.Second, 10*time.Millisecond)

	canceled, err := onB.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
	got := text(canceled.Status)
	assert.Contains(t, got, "not confirmed")
	// The answer is the one of whichever replica stores the task's end first: the running
	// one's (from its run's reports) or this one's (from the store); both name the same.
	assert.Contains(t, got, "a2a travel task t-bad (failed)")
	assert.Contains(t, got, "a2a_task maps task t-stuck")
	assert.NotContains(t, got, "t-ok")
}

// A CancelTask on a replica other than the execution's that read the task before the
// execution's last write stores the canceled state over that write: the execution's
// replica then answers canceled as well, though the second replica's Get already read
// the end of the stopped run from its log (which a2asrv would take for the stored state,
// writing nothing). A task that the store has ended already is left as it is.
func TestCancelOverConcurrentWrite(t *testing.T) {
	t.Parallel()
	ctx := principal.With(context.Background(), "alice")
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const thread, run = "th-cancel", "a2a-cancel"
	logged := logTo(st, thread, run, "alice")
	logged(1, &agui.RunStarted{ThreadID: thread, RunID: run})
	logged(2, &agui.RunFinished{ThreadID: thread, RunID: run, Outcome: &agui.Outcome{Type: "cancelled"}})

	for _, first := range []bool{false, true} {
		a, b := newTaskStore(portOver(t, st, nil), portOver(t, st, nil), time.Hour), newTaskStore(portOver(t, st, nil), portOver(t, st, nil), time.Hour)
		id := a2a.TaskID(fmt.Sprintf("task-%v", first))
		task := &a2a.Task{ID: id, ContextID: thread, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}, Metadata: taskMeta(thread, run, nil)}
		v, err := a.Create(ctx, task)
		require.NoError(t, err)
		read, err := b.Get(ctx, id) // the canceler's read, before the execution's next write
		require.NoError(t, err)
		ec := &a2asrv.ExecutorContext{TaskID: id, ContextID: thread}
		working := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)
		task.Status = working.Status
		_, err = a.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: working, PrevVersion: v})
		require.NoError(t, err)
		if first {
			// The execution stored its own end first.
			ended, err := a.Get(ctx, id)
			require.NoError(t, err)
			end := status(ec, a2a.TaskStateCanceled, "canceled by the execution")
			ended.Task.Status = end.Status
			_, err = a.Update(ctx, &taskstore.UpdateRequest{Task: ended.Task, Event: end, PrevVersion: ended.Version})
			require.NoError(t, err)
		}

		end := status(ec, a2a.TaskStateCanceled, "canceled elsewhere")
		read.Task.Status = end.Status
		_, err = b.Update(ctx, &taskstore.UpdateRequest{Task: read.Task, Event: end, PrevVersion: read.Version})
		want := "canceled elsewhere"
		if first {
			require.ErrorIs(t, err, taskstore.ErrConcurrentModification)
			want = "canceled by the execution"
		} else {
			require.NoError(t, err)
		}
		for _, s := range []*taskStore{a, b} {
			got, err := s.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, a2a.TaskStateCanceled, got.Task.Status.State, "first=%v", first)
			assert.Equal(t, want, text(got.Task.Status), "first=%v", first)
		}
		rec, err := st.Tasks().GetTask(ctx, string(id))
		require.NoError(t, err)
		assert.Equal(t, string(a2a.TaskStateCanceled), rec.State, "the store says canceled")
	}
}
