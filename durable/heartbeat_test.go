package durable

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/fence"
	"github.com/baton-dev/baton/store"
)

// fakeRuns records what the heartbeat does to the runs here; held, when set, is the run
// whose renewal it checks.
type fakeRuns struct {
	mu       sync.Mutex
	held     RunRef
	verdicts []Verdict
	stops    [][2]string
	cancels  []store.RunRecord
	works    []Work
}

func (f *fakeRuns) Renewed(r Renewal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The run was claimed long before: a renewal that does not name it says it moved.
	o := NewOwner(f.held, "replica-a", fence.New(time.Now().Add(-time.Hour), time.Minute, time.Second, nil))
	f.verdicts = append(f.verdicts, o.Apply(r))
}

func (f *fakeRuns) StopRequested(threadID, runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, [2]string{threadID, runID})
}

func (f *fakeRuns) CancelWork(rec store.RunRecord, work Work) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, rec)
	f.works = append(f.works, work)
}

func (f *fakeRuns) snapshot() (verdicts []Verdict, stops [][2]string, cancels []store.RunRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Verdict(nil), f.verdicts...), append([][2]string(nil), f.stops...), append([]store.RunRecord(nil), f.cancels...)
}

// fakeWaker records the takeover's wake-ups and renewals.
type fakeWaker struct {
	wakes    atomic.Int64
	renewals atomic.Int64
}

func (w *fakeWaker) Wake()           { w.wakes.Add(1) }
func (w *fakeWaker) Renewed(Renewal) { w.renewals.Add(1) }

// failingBeats is a store whose heartbeats fail while fail is set, and which counts the
// claims of lost runs.
type failingBeats struct {
	store.Store
	fail   atomic.Bool
	claims atomic.Int64
}

func (s *failingBeats) HeartbeatRuns(ctx context.Context, replica string, lease time.Duration) ([]store.RunRef, error) {
	if s.fail.Load() {
		return nil, errors.New("connection refused")
	}
	return s.Store.HeartbeatRuns(ctx, replica, lease)
}

func (s *failingBeats) ClaimLapsedRuns(ctx context.Context, replica string, limit int) ([]store.RunRecord, error) {
	s.claims.Add(1)
	return s.Store.ClaimLapsedRuns(ctx, replica, limit)
}

func newTestHeartbeat(st HeartbeatStore, replica string, runs RunsHere, mut ...func(*HeartbeatConfig)) *Heartbeat {
	cfg := HeartbeatConfig{Store: st, Replica: replica, Lease: time.Minute, Every: time.Hour, Runs: runs,
		Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mut {
		m(&cfg)
	}
	return NewHeartbeat(cfg)
}

// TestHeartbeatRenewal: a beat renews this replica's leases in the store and tells the
// runs here and the takeover what it renewed (a run renewed under its epoch is Renewed;
// after another replica took it over, NotRenewed), and records the contact with the store;
// a beat that fails records the lost contact, tells the runs nothing and reaps nothing.
func TestHeartbeatRenewal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &failingBeats{Store: memoryStore(t)}
	epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", 50*time.Millisecond)
	require.NoError(t, err)
	runs := &fakeRuns{held: RunRef{ThreadID: "t", RunID: "r", Epoch: epoch}}
	tk := &fakeWaker{}
	var contact fence.Contact
	h := newTestHeartbeat(st, "replica-a", runs, func(c *HeartbeatConfig) { c.Takeover, c.Contact = tk, &contact })

	before := time.Now()
	require.NoError(t, h.Beat(ctx))
	rec, err := st.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	assert.True(t, rec.LeaseUntil.After(before.Add(30*time.Second)), "the lease is renewed for a lease (a minute), not 50 ms")
	assert.False(t, contact.Last().Before(before), "the contact counts from the beat")
	verdicts, _, _ := runs.snapshot()
	assert.Equal(t, []Verdict{Renewed}, verdicts)
	assert.Equal(t, int64(1), tk.renewals.Load(), "the takeover hears of the renewal")
	assert.Equal(t, int64(1), st.claims.Load(), "a successful beat reaps")

	// Another replica takes the run over: the next beat does not renew it here.
	_, err = st.TakeOverRuns(ctx, "replica-b", time.Minute, 10, true)
	require.NoError(t, err)
	require.NoError(t, h.Beat(ctx))
	verdicts, _, _ = runs.snapshot()
	assert.Equal(t, []Verdict{Renewed, NotRenewed}, verdicts)

	st.fail.Store(true)
	last := contact.Last()
	require.Error(t, h.Beat(ctx))
	verdicts, _, _ = runs.snapshot()
	assert.Len(t, verdicts, 2, "a failed beat tells the runs nothing")
	assert.Equal(t, int64(2), tk.renewals.Load())
	assert.Equal(t, int64(2), st.claims.Load(), "a failed beat reaps nothing: its own leases may have lapsed")
	assert.False(t, contact.MayClaim(time.Nanosecond), "the contact is broken: nothing is claimed")
	assert.Equal(t, last, contact.Last())
}

// TestHeartbeatAppliesStops: a stop requested through another replica (a row on the run)
// reaches the run here at the next beat, and only runs of this replica.
func TestHeartbeatAppliesStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memoryStore(t)
	_, err := st.BeginRun(ctx, "t1", "r1", "replica-a", time.Minute)
	require.NoError(t, err)
	_, err = st.BeginRun(ctx, "t2", "r2", "replica-other", time.Minute)
	require.NoError(t, err)
	_, err = st.BeginRun(ctx, "t3", "r3", "replica-a", time.Minute)
	require.NoError(t, err)
	for _, tr := range [][2]string{{"t1", "r1"}, {"t2", "r2"}} {
		_, err = st.RequestStop(ctx, tr[0], tr[1])
		require.NoError(t, err)
	}
	runs := &fakeRuns{}
	h := newTestHeartbeat(st, "replica-a", runs)
	require.NoError(t, h.Beat(ctx))
	_, stops, _ := runs.snapshot()
	assert.Equal(t, [][2]string{{"t1", "r1"}}, stops)
}

// TestHeartbeatReapsLostRuns: a run of a replica that died, marked lost when a new run
// started on its thread, is reaped by one beat: its remote work is handed to CancelWork
// with its work document, under the epoch the claim gave this replica, and its log ends
// with RUN_ERROR{RUN_LOST} numbered on from its last event (a log with nothing stored gets
// RUN_STARTED first); the next beat reaps nothing again.
func TestHeartbeatReapsLostRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memoryStore(t)
	epoch, err := st.BeginRun(ctx, "t", "lost", "replica-dead", -time.Second)
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, "t", "lost", epoch, []store.Event{
		{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"lost"}`)},
		{Seq: 2, Data: json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`)},
	}))
	work := Work{A2A: []Task{{Agent: "peer", TaskID: "task-1", State: "TASK_STATE_WORKING"}}}
	doc, err := json.Marshal(work)
	require.NoError(t, err)
	require.NoError(t, st.SaveRunWork(ctx, "t", "lost", epoch, doc))
	_, err = st.BeginRun(ctx, "t2", "empty", "replica-dead", -time.Second)
	require.NoError(t, err)
	// New runs on both threads mark the lapsed ones lost.
	_, err = st.BeginRun(ctx, "t", "next", "replica-a", time.Minute)
	require.NoError(t, err)
	_, err = st.BeginRun(ctx, "t2", "next", "replica-a", time.Minute)
	require.NoError(t, err)

	runs := &fakeRuns{}
	h := newTestHeartbeat(st, "replica-a", runs, func(c *HeartbeatConfig) { c.Now = func() time.Time { return time.UnixMilli(42) } })
	require.NoError(t, h.Beat(ctx))
	_, _, cancels := runs.snapshot()
	require.Len(t, cancels, 2, "both lost runs reaped")
	for i, rec := range cancels {
		assert.Equal(t, "replica-a", rec.Replica)
		assert.Equal(t, int64(2), rec.Epoch, "claimed once")
		if rec.RunID == "lost" {
			assert.Equal(t, work, runs.works[i], "its work document is handed over")
		}
	}

	evs, err := st.Events(ctx, "t", "lost", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	assert.Equal(t, int64(3), evs[2].Seq)
	assert.JSONEq(t, `{"type":"RUN_ERROR","code":"RUN_LOST","message":"The run was interrupted and did not finish.","timestamp":42}`, string(evs[2].Data))
	assert.Equal(t, "error", TerminalState(evs))

	evs, err = st.Events(ctx, "t2", "empty", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2, "RUN_STARTED, then RUN_ERROR")
	assert.JSONEq(t, `{"type":"RUN_STARTED","threadId":"t2","runId":"empty","timestamp":42}`, string(evs[0].Data))
	assert.Equal(t, int64(2), evs[1].Seq)

	require.NoError(t, h.Beat(ctx))
	_, _, cancels = runs.snapshot()
	assert.Len(t, cancels, 2, "a reaped run is not reaped again")
}

// TestEndLostLogLeavesEndedLog: a log that already ends with a terminal event is left as
// it is.
func TestEndLostLogLeavesEndedLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memoryStore(t)
	epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
	require.NoError(t, err)
	ended := []store.Event{
		{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`)},
		{Seq: 2, Data: json.RawMessage(`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`)},
	}
	require.NoError(t, st.AppendEvents(ctx, "t", "r", epoch, ended))
	EndLostLog(ctx, st, store.RunRecord{ThreadID: "t", RunID: "r", Epoch: epoch}, time.Now(), "lost", slog.New(slog.DiscardHandler))
	evs, err := st.Events(ctx, "t", "r", 0, 0)
	require.NoError(t, err)
	assert.Len(t, evs, 2)
}

// TestHeartbeatService: the service beats every period from its start, applies the store's
// signal at once (a stop request, a hand-off: the takeover is woken) without waiting for
// the next period, and after Stop beats no more.
func TestHeartbeatService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := store.Open(ctx, "memory:")
		require.NoError(t, err)
		defer st.Close()
		epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
		require.NoError(t, err)
		runs := &fakeRuns{held: RunRef{ThreadID: "t", RunID: "r", Epoch: epoch}}
		tk := &fakeWaker{}
		signals := make(chan struct{})
		h := newTestHeartbeat(st, "replica-a", runs, func(c *HeartbeatConfig) {
			c.Every, c.Takeover, c.Signals = 10*time.Second, tk, signals
		})
		h.Start(ctx)

		time.Sleep(10*time.Second - time.Millisecond)
		synctest.Wait()
		verdicts, _, _ := runs.snapshot()
		assert.Empty(t, verdicts, "no beat before the first period")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		verdicts, _, _ = runs.snapshot()
		assert.Equal(t, []Verdict{Renewed}, verdicts, "one beat per period")

		_, err = st.RequestStop(ctx, "t", "r")
		require.NoError(t, err)
		signals <- struct{}{}
		synctest.Wait()
		_, stops, _ := runs.snapshot()
		assert.Equal(t, [][2]string{{"t", "r"}}, stops, "the signal applies the stop at once")
		assert.Equal(t, int64(1), tk.wakes.Load(), "the signal wakes the takeover")

		require.NoError(t, h.Stop(ctx))
		time.Sleep(time.Minute)
		synctest.Wait()
		verdicts, _, _ = runs.snapshot()
		assert.Len(t, verdicts, 1, "no beat after Stop")
		var none *Heartbeat
		none.Start(ctx)
		assert.NoError(t, none.Stop(ctx), "a heartbeat not configured does nothing")
	})
}
