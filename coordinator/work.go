package coordinator

import (
	"context"
	"encoding/json"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
)

// The store's write bounds, as the event log (package durable) applies them.
const (
	storeWriteTimeout  = durable.StoreWriteTimeout
	maxStoreRetry      = durable.MaxStoreRetry
	storeRetry         = durable.StoreRetry
	maxStoreRetryPause = durable.MaxStoreRetryPause
)

// reapLapsed looks after the runs of replicas that stopped heartbeating that BeginRun
// marked lost to free their thread (a new run started on it): each has its remote tasks
// cancelled and its event log ended with RUN_ERROR{RUN_LOST}, so that nothing is left
// running at a peer without an owner. A running run whose lease lapsed is the takeover's
// (durable.Takeover, adopter.go): it is continued here.
func (e *Engine) reapLapsed() {
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	runs, err := e.cfg.Store.ClaimLapsedRuns(ctx, e.cfg.Replica, reapBatch)
	if err != nil {
		e.log.Warn("store: claim lost runs", "err", err)
		return
	}
	for _, run := range runs {
		var work durable.Work
		if len(run.Work) > 0 {
			if err := json.Unmarshal(run.Work, &work); err != nil {
				e.log.Warn("lost run: unreadable work document", "thread_id", run.ThreadID, "run_id", run.RunID)
			}
		}
		e.cancelWork(run, work)
		e.endLostLog(ctx, run.ThreadID, run.RunID, run.Epoch, "The run was interrupted and did not finish.")
		e.log.Warn("lost run ended: its replica stopped heartbeating and its thread went on", "thread_id", run.ThreadID, "run_id", run.RunID)
	}
}

// reapBatch bounds the lapsed runs one replica claims per heartbeat.
const reapBatch = 50

// endLostLog ends a lapsed run's event log with RUN_ERROR{code:"RUN_LOST", message}, unless
// it already ends with a terminal event. Like a takeover it numbers on from the log's last
// event (a live stream shows only stored events), and a log with nothing stored
// gets its RUN_STARTED first, so that a client reconnecting anywhere sees a whole stream.
func (e *Engine) endLostLog(ctx context.Context, threadID, runID string, epoch int64, message string) {
	evs, err := durable.ReadLog(ctx, e.cfg.Store, threadID, runID)
	if err != nil {
		e.log.Warn("store: read lapsed run's events", "err", err)
		return
	}
	if durable.TerminalState(evs) != "" {
		return
	}
	now := e.cfg.Now().UnixMilli()
	seq := durable.LastSeq(evs)
	var out []store.Event
	if len(evs) == 0 {
		data, err := agui.MarshalEvent(&agui.RunStarted{ThreadID: threadID, RunID: runID, Base: agui.Base{Timestamp: now}})
		if err != nil {
			return
		}
		seq++
		out = append(out, store.Event{Seq: seq, Data: data})
	}
	data, err := agui.MarshalEvent(&agui.RunError{Code: "RUN_LOST", Message: message, Base: agui.Base{Timestamp: now}})
	if err != nil {
		return
	}
	out = append(out, store.Event{Seq: seq + 1, Data: data})
	if err := e.cfg.Store.AppendEvents(ctx, threadID, runID, epoch, out); err != nil {
		e.log.Warn("store: end lapsed run's log", "err", err)
	}
}
