package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/store"
)

// fakeAdopter records the claims it is handed; it refuses a run's first fails[runID]
// adoptions.
type fakeAdopter struct {
	mu      sync.Mutex
	got     []Claim
	fails   map[string]int
	adopted chan Claim
}

func (a *fakeAdopter) Adopt(_ context.Context, c Claim) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fails[c.Run.RunID] > 0 {
		a.fails[c.Run.RunID]--
		return errors.New("not now")
	}
	a.got = append(a.got, c)
	if a.adopted != nil {
		a.adopted <- c
	}
	return nil
}

// claims returns how many times each run was adopted.
func (a *fakeAdopter) claims() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := map[string]int{}
	for _, c := range a.got {
		n[c.Run.RunID]++
	}
	return n
}

// lapsedRuns records n running runs of a replica that died, their leases lapsed, each with
// a log of one event (or of lastEvent after it, when given).
func lapsedRuns(t *testing.T, st store.Store, prefix string, n int, lastEvent string) []string {
	t.Helper()
	ctx := context.Background()
	runs := make([]string, n)
	for i := range runs {
		runs[i] = fmt.Sprintf("r-%s%03d", prefix, i)
		thread := "t-" + runs[i]
		epoch, err := st.BeginRun(ctx, thread, runs[i], "replica-dead", -time.Second)
		require.NoError(t, err)
		evs := []store.Event{{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED","threadId":"` + thread + `","runId":"` + runs[i] + `"}`)}}
		if lastEvent != "" {
			evs = append(evs, store.Event{Seq: 2, Data: json.RawMessage(lastEvent)})
		}
		require.NoError(t, st.AppendEvents(ctx, thread, runs[i], epoch, evs))
	}
	return runs
}

func memoryStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newTestTakeover(st TakeoverStore, replica string, a Adopter, mut ...func(*TakeoverConfig)) *Takeover {
	cfg := TakeoverConfig{Store: st, Replica: replica, Lease: time.Minute, Every: time.Hour,
		Adopter: a, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mut {
		m(&cfg)
	}
	return NewTakeover(cfg)
}

// TestTakeoverBurstInOneLook: a dead replica's runs, more than two claim batches of them,
// are all claimed by one look (batch after batch while they come back full, not one batch
// per look), each claimed once (its epoch moved on by one) and handed to the Adopter once,
// with its log and the time its claim was sent.
func TestTakeoverBurstInOneLook(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	runs := lapsedRuns(t, st, "", 2*TakeoverBatch+7, "")
	a := &fakeAdopter{}
	tk := newTestTakeover(st, "replica-b", a)

	before := time.Now()
	require.Equal(t, len(runs), tk.Look(context.Background(), false), "one look claims the whole burst")
	ctx := context.Background()
	for _, r := range runs {
		rec, err := st.GetRun(ctx, "t-"+r, r)
		require.NoError(t, err)
		assert.Equal(t, "replica-b", rec.Replica, "%s taken over in the first look", r)
		assert.Equal(t, int64(2), rec.Epoch, "%s claimed once", r)
	}
	n := a.claims()
	for _, r := range runs {
		assert.Equal(t, 1, n[r], "%s adopted once", r)
	}
	for _, c := range a.got {
		assert.Len(t, c.Log, 1, "the run's log is handed over")
		assert.False(t, c.Sent.Before(before), "the lease counts from the claim")
		assert.Equal(t, int64(2), c.Run.Epoch)
	}
	assert.Zero(t, tk.Pending())
	assert.Zero(t, tk.Look(ctx, false), "nothing left to claim")
}

// TestTakeoverBurstTwoClaimers: two replicas looking at the same time split a burst: every
// run is claimed by exactly one of them, once, and adopted once.
func TestTakeoverBurstTwoClaimers(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	runs := lapsedRuns(t, st, "", 4*7+3, "")
	small := func(c *TakeoverConfig) { c.Batch = 7 }
	a, b := &fakeAdopter{}, &fakeAdopter{}
	ta, tb := newTestTakeover(st, "replica-a", a, small), newTestTakeover(st, "replica-b", b, small)
	var wg sync.WaitGroup
	var claimed atomic.Int64
	wg.Go(func() { claimed.Add(int64(ta.Look(context.Background(), false))) })
	wg.Go(func() { claimed.Add(int64(tb.Look(context.Background(), false))) })
	wg.Wait()
	assert.Equal(t, int64(len(runs)), claimed.Load())
	ctx := context.Background()
	na, nb := a.claims(), b.claims()
	for _, r := range runs {
		rec, err := st.GetRun(ctx, "t-"+r, r)
		require.NoError(t, err)
		assert.Equal(t, int64(2), rec.Epoch, "%s claimed once", r)
		assert.Equal(t, 1, na[r]+nb[r], "%s adopted once", r)
		if na[r] == 1 {
			assert.Equal(t, "replica-a", rec.Replica)
		} else {
			assert.Equal(t, "replica-b", rec.Replica)
		}
	}
}

// failingReads is a store whose event reads fail while failing is set.
type failingReads struct {
	store.Store
	failing atomic.Bool
}

func (s *failingReads) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]store.Event, error) {
	if s.failing.Load() {
		return nil, errors.New("store unavailable")
	}
	return s.Store.Events(ctx, threadID, runID, after, limit)
}

// TestTakeoverRetriesAdoption: a run claimed here whose log cannot be read, or that the
// Adopter does not take, stays this replica's and is adopted at the next look, once, with
// its lease counted from the last heartbeat that renewed it under its epoch; a run taken
// over by another replica meanwhile is forgotten.
func TestTakeoverRetriesAdoption(t *testing.T) {
	t.Parallel()
	st := &failingReads{Store: memoryStore(t)}
	runs := lapsedRuns(t, st, "", 3, "")
	a := &fakeAdopter{fails: map[string]int{runs[1]: 1, runs[2]: 1}}
	tk := newTestTakeover(st, "replica-b", a)
	ctx := context.Background()

	st.failing.Store(true)
	require.Equal(t, 3, tk.Look(ctx, false))
	assert.Empty(t, a.claims(), "no log read, nothing adopted")
	assert.Equal(t, 3, tk.Pending(), "kept for the next look")
	st.failing.Store(false)

	// The heartbeat renews two of them under their epoch; the third is taken over by
	// another replica (released first, as a hand-off would).
	renewedAt := time.Now()
	tk.Renewed(NewRenewal(renewedAt, []store.RunRef{{ThreadID: "t-" + runs[0], RunID: runs[0], Epoch: 2}, {ThreadID: "t-" + runs[1], RunID: runs[1], Epoch: 2}}))
	_, err := st.ReleaseRuns(ctx, "replica-b")
	require.NoError(t, err)
	other, err := st.TakeOverRuns(ctx, "replica-c", time.Minute, 1, false)
	require.NoError(t, err)
	require.Len(t, other, 1)
	stolen := other[0].RunID
	// The released runs of replica-b stay its own for the retry: only their lease ended.
	require.Zero(t, tk.Look(ctx, false), "nothing new to claim: the others are claimed already")
	n := a.claims()
	assert.Zero(t, n[stolen], "the run another replica took is not adopted")
	// runs[1] or runs[2] was refused once by the Adopter (unless it was the one stolen).
	wantPending := 0
	for _, r := range runs[1:] {
		if r != stolen {
			wantPending++
		}
	}
	assert.Equal(t, wantPending, tk.Pending(), "the Adopter's refusals are kept")
	assert.Equal(t, 0, tk.Look(ctx, false))
	n = a.claims()
	for _, r := range runs {
		if r == stolen {
			assert.Zero(t, n[r])
		} else {
			assert.Equal(t, 1, n[r], "%s adopted once", r)
		}
	}
	for _, c := range a.got {
		if c.Run.RunID == runs[2] {
			assert.True(t, c.Sent.Before(renewedAt), "%s: lease counted from its claim", c.Run.RunID)
		} else {
			assert.Equal(t, renewedAt, c.Sent, "%s: lease counted from the heartbeat that renewed it", c.Run.RunID)
		}
	}
	assert.Zero(t, tk.Pending())
}

// TestTakeoverEndsFinishedRuns: a lapsed run whose log already ends with its terminal event
// is not handed to the Adopter: its record is ended as its log says.
func TestTakeoverEndsFinishedRuns(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	runs := lapsedRuns(t, st, "", 2, `{"type":"RUN_FINISHED","outcome":{"type":"cancelled"}}`)
	a := &fakeAdopter{}
	tk := newTestTakeover(st, "replica-b", a)
	ctx := context.Background()
	require.Equal(t, 2, tk.Look(ctx, false))
	assert.Empty(t, a.claims())
	for _, r := range runs {
		rec, err := st.GetRun(ctx, "t-"+r, r)
		require.NoError(t, err)
		assert.Equal(t, EndCancelled, rec.State)
	}
	assert.Zero(t, tk.Pending())
}

// TestTakeoverClaimRule: a replica whose contact with the store broke claims nothing, nor
// one whose contact came back less than a lease ago (the lapsed leases may be those of live
// owners that could not renew them during the outage), except runs that their replica
// released at its shutdown; a look at start (anyLease) claims
// every running run of other replica ids, lapsed or not.
func TestTakeoverClaimRule(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	runs := lapsedRuns(t, st, "", 2, "")
	ctx := context.Background()
	_, err := st.BeginRun(ctx, "t-live", "r-live", "replica-other", time.Hour)
	require.NoError(t, err)
	var contact fence.Contact
	a := &fakeAdopter{}
	tk := newTestTakeover(st, "replica-b", a, func(c *TakeoverConfig) { c.Contact = &contact })

	contact.Failed()
	assert.Zero(t, tk.Look(ctx, false), "contact broken")
	contact.Renewed(time.Now())
	assert.Zero(t, tk.Look(ctx, false), "contact back for less than a lease")
	assert.Empty(t, a.claims())

	// A run its replica handed off (released) has no owner left: it is claimed all the same.
	_, err = st.BeginRun(ctx, "t-leaving", "r-leaving", "replica-leaving", time.Hour)
	require.NoError(t, err)
	_, err = st.ReleaseRuns(ctx, "replica-leaving")
	require.NoError(t, err)
	contact.Failed()
	assert.Equal(t, 1, tk.Look(ctx, false), "contact broken: only the released run")
	assert.Equal(t, map[string]int{"r-leaving": 1}, a.claims())

	require.Equal(t, len(runs)+1, tk.Look(ctx, true), "at start: every run of another replica id")
	assert.Equal(t, 1, a.claims()["r-live"])
}

// TestTakeoverService: the service "takeover" looks at its start (claiming whatever other
// replica ids left running, with AtStart), then every Every and when woken; Stop waits for
// the look in progress and no look follows.
func TestTakeoverService(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	ctx := context.Background()
	_, err := st.BeginRun(ctx, "t-left", "r-left", "replica-before", time.Hour)
	require.NoError(t, err)
	a := &fakeAdopter{adopted: make(chan Claim, 10)}
	tk := newTestTakeover(st, "replica-b", a, func(c *TakeoverConfig) { c.AtStart = true })
	tk.Start(ctx)
	select {
	case c := <-a.adopted:
		assert.Equal(t, "r-left", c.Run.RunID, "taken over at start, whatever its lease")
	case <-time.After(10 * time.Second):
		t.Fatal("nothing taken over at start")
	}
	// Every is an hour: only a wake makes the next look.
	runs := lapsedRuns(t, st, "woken-", 1, "")
	tk.Wake()
	select {
	case c := <-a.adopted:
		assert.Equal(t, runs[0], c.Run.RunID, "taken over when woken")
	case <-time.After(10 * time.Second):
		t.Fatal("a wake made no look")
	}
	require.NoError(t, tk.Stop(ctx))
	late := lapsedRuns(t, st, "late-", 2, "")
	tk.Wake()
	rec, err := st.GetRun(ctx, "t-"+late[1], late[1])
	require.NoError(t, err)
	assert.Equal(t, "replica-dead", rec.Replica, "no look after Stop")
	assert.Equal(t, "takeover", tk.service.Name())
}

// refusingAdopter cannot continue any run; it records the work it was asked to cancel.
type refusingAdopter struct {
	mu        sync.Mutex
	cancelled []string
}

func (*refusingAdopter) Adopt(_ context.Context, c Claim) error {
	return &NotContinued{Why: "its checkpoint is unreadable", Work: Work{A2A: []Task{{Agent: "a", TaskID: "task-" + c.Run.RunID}}}}
}

func (a *refusingAdopter) CancelWork(rec store.RunRecord, work Work) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range work.A2A {
		a.cancelled = append(a.cancelled, rec.RunID+"/"+t.TaskID)
	}
}

// TestTakeoverEndsARunNotContinued: a run its Adopter cannot continue is ended by the
// takeover, once: its remote work is cancelled, its log ends with RUN_ERROR{RUN_LOST}, its
// record with the error outcome, and its journal says why; it is not kept for the next
// look.
func TestTakeoverEndsARunNotContinued(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	runs := lapsedRuns(t, st, "nc", 1, "")
	a := &refusingAdopter{}
	tk := newTestTakeover(st, "replica-b", a, func(c *TakeoverConfig) {
		c.Journal = NewJournal(st, "replica-b", slog.New(slog.DiscardHandler))
		c.Work = a
	})
	ctx := context.Background()
	require.Equal(t, 1, tk.Look(ctx, false))
	assert.Zero(t, tk.Pending(), "ended, not kept for the next look")
	assert.Equal(t, []string{runs[0] + "/task-" + runs[0]}, a.cancelled)
	rec, err := st.GetRun(ctx, "t-"+runs[0], runs[0])
	require.NoError(t, err)
	assert.Equal(t, RunError, rec.State)
	evs, err := ReadLog(ctx, st, "t-"+runs[0], runs[0])
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Contains(t, string(evs[1].Data), `"RUN_LOST"`)
	assert.Contains(t, string(evs[1].Data), "its checkpoint is unreadable")
	steps, err := st.Steps(ctx, "t-"+runs[0], 0, 100)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	last := steps[len(steps)-1]
	assert.Equal(t, store.StepTakeover, last.Kind)
	assert.Equal(t, store.StepError, last.Outcome)
}
