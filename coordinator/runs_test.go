package coordinator

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/followers"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/store"
)

// portWithRun starts one run of alice's thread "mine" through the port and waits for its
// end; alice also has an A2A task on it.
func portWithRun(t *testing.T, rc RunsConfig) (*Runs, string) {
	t.Helper()
	e := newEngine(t, &scriptModel{steps: []turnStep{textStep("hello alice")}}, &fakeAgent{})
	p := NewRuns(e, rc)
	in := input("mine")
	st, err := p.Start(context.Background(), in, "alice", runs.StartOptions{})
	require.NoError(t, err)
	select {
	case <-st.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	require.NoError(t, p.CreateTask(context.Background(), "alice", &runs.Task{TaskID: "task-a", ContextID: "mine", RunID: in.RunID, State: "completed", Body: []byte(`{}`)}))
	return p, in.RunID
}

// Every method of the port checks the caller against the owner: another principal's
// thread, run or task gets the very answer one that does not exist gets, and changes
// nothing.
func TestPortAnswersStrangersAsNotFound(t *testing.T) {
	t.Parallel()
	p, run := portWithRun(t, RunsConfig{})
	ctx := context.Background()

	for _, who := range []struct{ principal, thread string }{{"bob", "mine"}, {"alice", "none"}} {
		_, err := p.Thread(ctx, who.principal, who.thread)
		assert.ErrorIs(t, err, runs.ErrThreadNotFound, "Thread %v", who)
		_, err = p.ThreadDoc(ctx, who.principal, who.thread)
		assert.ErrorIs(t, err, runs.ErrThreadNotFound, "ThreadDoc %v", who)
		_, err = p.Steps(ctx, who.principal, who.thread, 0, 10)
		assert.ErrorIs(t, err, runs.ErrThreadNotFound, "Steps %v", who)
		_, err = p.Events(ctx, who.principal, who.thread, run, 0, runs.FollowOptions{})
		assert.ErrorIs(t, err, runs.ErrThreadNotFound, "Events %v", who)
		_, err = p.Log(ctx, who.principal, who.thread, run, 0)
		assert.ErrorIs(t, err, runs.ErrThreadNotFound, "Log %v", who)
		_, err = p.RunState(ctx, who.principal, who.thread, run)
		assert.ErrorIs(t, err, runs.ErrRunNotFound, "RunState %v", who)
		assert.ErrorIs(t, p.Stop(who.thread, run, who.principal), runs.ErrRunNotFound, "Stop %v", who)
		epoch, yours, err := p.RunEpoch(ctx, who.principal, who.thread, run)
		require.NoError(t, err)
		assert.Equal(t, int64(0), epoch, "RunEpoch %v", who)
		assert.False(t, yours, "RunEpoch %v", who)
		assert.Empty(t, p.Unconfirmed(ctx, who.principal, who.thread, run, time.Time{}), "Unconfirmed %v", who)
	}
	for _, who := range []struct{ principal, task string }{{"bob", "task-a"}, {"alice", "task-none"}} {
		_, err := p.GetTask(ctx, who.principal, who.task)
		assert.ErrorIs(t, err, runs.ErrTaskNotFound, "GetTask %v", who)
		err = p.UpdateTask(ctx, who.principal, &runs.Task{TaskID: who.task, ContextID: "mine", State: "canceled", Body: []byte(`{"x":1}`)}, 1)
		assert.ErrorIs(t, err, runs.ErrTaskNotFound, "UpdateTask %v", who)
	}
	list, total, err := p.ListTasks(ctx, "bob", runs.TaskQuery{Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Zero(t, total)

	// Nothing a stranger did changed alice's thread or task.
	task, err := p.GetTask(ctx, "alice", "task-a")
	require.NoError(t, err)
	assert.Equal(t, "completed", task.State)
	assert.Equal(t, int64(1), task.Version)
	doc, err := p.ThreadDoc(ctx, "alice", "mine")
	require.NoError(t, err)
	assert.NotEmpty(t, doc.Messages)
	_, err = p.Thread(ctx, "alice", "mine")
	require.NoError(t, err)
	_, err = p.Events(ctx, "alice", "mine", "no-such-run", 0, runs.FollowOptions{})
	assert.ErrorIs(t, err, runs.ErrRunNotFound)
}

// The port's follower yields a run's whole stream from its start, and from a position in
// the middle restates it: RUN_STARTED first, numbered with the position.
func TestPortFollowsARunFromAnyPosition(t *testing.T) {
	t.Parallel()
	p, run := portWithRun(t, RunsConfig{})
	ctx := context.Background()
	types := func(after int64, restate bool) ([]string, []int64) {
		t.Helper()
		seq, err := p.Events(ctx, "alice", "mine", run, after, runs.FollowOptions{Restate: restate})
		require.NoError(t, err)
		var ts []string
		var ns []int64
		for batch, err := range seq {
			require.NoError(t, err)
			for _, ev := range batch {
				var v struct {
					Type string `json:"type"`
				}
				require.NoError(t, json.Unmarshal(ev.Data, &v))
				ts, ns = append(ts, v.Type), append(ns, ev.Seq)
			}
		}
		return ts, ns
	}
	all, seqs := types(0, false)
	require.NotEmpty(t, all)
	assert.Equal(t, "RUN_STARTED", all[0])
	assert.Equal(t, "RUN_FINISHED", all[len(all)-1])
	for i := 1; i < len(seqs); i++ {
		assert.Greater(t, seqs[i], seqs[i-1], "numbered in order")
	}
	mid := seqs[1]
	re, reSeqs := types(mid, true)
	require.NotEmpty(t, re)
	assert.Equal(t, "RUN_STARTED", re[0], "a mid-run stream restates the run's start")
	assert.Equal(t, mid, reSeqs[0], "numbered with the position")
	assert.Equal(t, "RUN_FINISHED", re[len(re)-1])

	_, err := p.Events(ctx, "alice", "mine", run, seqs[len(seqs)-1]+1000, runs.FollowOptions{})
	assert.ErrorIs(t, err, runs.ErrBadPosition, "a position past an ended run's log")
}

// Followers are counted in the port, per run and per principal; a stream's count ends with
// its range, and an uncounted stream is not counted.
func TestPortCountsFollowers(t *testing.T) {
	t.Parallel()
	p, run := portWithRun(t, RunsConfig{MaxFollowersPerRun: 1, Followers: followers.New(5)})
	ctx := context.Background()
	first, err := p.Events(ctx, "alice", "mine", run, 0, runs.FollowOptions{})
	require.NoError(t, err)
	_, err = p.Events(ctx, "alice", "mine", run, 0, runs.FollowOptions{})
	assert.ErrorIs(t, err, runs.ErrTooManyFollowers, "one follower per run")
	uncounted, err := p.Events(ctx, "alice", "mine", run, 0, runs.FollowOptions{Uncounted: true})
	require.NoError(t, err)
	for range uncounted {
	}
	for range first {
	}
	again, err := p.Events(ctx, "alice", "mine", run, 0, runs.FollowOptions{})
	require.NoError(t, err, "the first stream's count ended with its range")
	for range again {
	}
}

// The port's ThreadsPage lists the caller's threads of a family from a cursor, never
// another principal's; a prefix that is not a family is the store's refusal, not an
// unavailable store.
func TestPortThreadsPage(t *testing.T) {
	t.Parallel()
	e := newEngine(t, &scriptModel{}, &fakeAgent{})
	p := NewRuns(e, RunsConfig{})
	ctx := context.Background()
	for _, th := range []struct{ id, owner string }{{"mcp-1", "alice"}, {"mcp-2", "alice"}, {"mcp-3", "bob"}, {"other-4", "alice"}} {
		_, err := e.cfg.Store.ClaimThread(ctx, th.id, th.owner, "")
		require.NoError(t, err)
	}
	ids := func(list []runs.Thread) (out []string) {
		for _, th := range list {
			out = append(out, th.ID)
		}
		return out
	}
	page, err := p.ThreadsPage(ctx, "alice", "mcp-", nil, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"mcp-2", "mcp-1"}, ids(page))
	page, err = p.ThreadsPage(ctx, "alice", "mcp-", &runs.ThreadCursor{CreatedAt: page[0].CreatedAt, ID: page[0].ID}, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"mcp-1"}, ids(page))
	page, err = p.ThreadsPage(ctx, "bob", "mcp-", nil, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"mcp-3"}, ids(page))
	_, err = p.ThreadsPage(ctx, "alice", "mcp", nil, 10)
	require.ErrorIs(t, err, store.ErrBadFamily)
	assert.NotErrorIs(t, err, runs.ErrUnavailable)
}
