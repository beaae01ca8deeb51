package durable

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/internal/startstop"
	"github.com/baton-dev/baton/store"
)

// heldAppends is a store whose event appends wait while held.
type heldAppends struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *heldAppends) AppendEvents(ctx context.Context, threadID, runID string, epoch int64, evs []store.Event) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.AppendEvents(ctx, threadID, runID, epoch, evs)
}

// TestHandOff: a hand-off freezes the run's log before it stops the run, waits for the frozen run's log to store what it
// had pending, stops the heartbeat, and only then ends the replica's leases, so that
// another replica claims the run at once although its lease (an hour) has not lapsed; the
// events the run emitted before the hand-off are all in the log.
func TestHandOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memoryStore(t)
	st := &heldAppends{Store: mem, entered: make(chan struct{}, 1), release: make(chan struct{})}
	epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Hour)
	require.NoError(t, err)
	var beats atomic.Int64
	beating := make(chan struct{})
	heartbeat := startstop.NewService("heartbeat", func(ctx context.Context) {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := st.HeartbeatRuns(ctx, "replica-a", time.Hour); err == nil {
					if beats.Add(1) == 1 {
						close(beating)
					}
				}
			}
		}
	})
	heartbeat.Start(ctx)
	<-beating

	l := NewEventLog(st, "t", "r", slog.New(slog.DiscardHandler), nil, nil)
	l.Own(epoch, nil, func(err error) { t.Errorf("fenced: %v", err) })
	l.Add(&agui.RunStarted{ThreadID: "t", RunID: "r"})
	l.Add(&agui.TextMessageStart{MessageID: "m1", Role: agui.RoleAssistant})
	<-st.entered

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	stopped := make(chan struct{})
	leaving := Leaving{Log: l, Stop: func() {
		// The run loop stops the run after its log is frozen: what it emits then is not
		// stored.
		l.Add(&agui.TextMessageContent{MessageID: "m1", Delta: "after the freeze"})
		l.RunEnded()
		close(stopped)
	}}
	go func() {
		n, err := HandOff(st, "replica-a", []Leaving{leaving}, heartbeat, slog.New(slog.DiscardHandler))
		done <- result{n, err}
	}()
	<-stopped

	// While the append is held HandOff must not return (a correct HandOff cannot, however
	// slow the machine; a wrong one is caught unless it takes longer than the window).
	select {
	case <-done:
		t.Fatal("HandOff returned while the run's log was still storing what it had pending")
	case <-time.After(100 * time.Millisecond):
	}
	recs, err := mem.TakeOverRuns(ctx, "replica-b", time.Minute, 10, false)
	require.NoError(t, err)
	assert.Empty(t, recs, "no lease ended while the log still writes")
	close(st.release)
	res := <-done
	require.NoError(t, res.err)
	assert.Equal(t, 1, res.n)
	beatsAtStop := beats.Load()
	assert.Positive(t, beatsAtStop)

	recs, err = mem.TakeOverRuns(ctx, "replica-b", time.Minute, 10, false)
	require.NoError(t, err)
	require.Len(t, recs, 1, "released: taken over at once")
	assert.Greater(t, recs[0].Epoch, epoch)
	evs, err := mem.Events(ctx, "t", "r", 0, 10)
	require.NoError(t, err)
	assert.Len(t, evs, 2, "what was pending is stored, nothing after the freeze")
	assert.Equal(t, beatsAtStop, beats.Load(), "the heartbeat is stopped")
}
