package durable

import (
	"context"
	"encoding/json"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// EventReader reads a run's stored event log, in order, after a sequence number.
type EventReader interface {
	Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]store.Event, error)
}

// The end states a run's record takes from the terminal event its log ends with (the run
// outcomes of package coordinator, as the store keeps them).
const (
	EndCompleted = "completed"
	EndInterrupt = "interrupt"
	EndCancelled = "cancelled"
	EndError     = "error"
)

// ReadLog reads a run's whole event log, page by page (store.MaxEventsRead).
func ReadLog(ctx context.Context, st EventReader, threadID, runID string) ([]store.Event, error) {
	var out []store.Event
	var last int64
	for {
		evs, err := st.Events(ctx, threadID, runID, last, store.MaxEventsRead)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		out = append(out, evs...)
		last = evs[len(evs)-1].Seq
	}
}

// LastSeq is the number of the last of evs (0 for none).
func LastSeq(evs []store.Event) int64 {
	if n := len(evs); n > 0 {
		return evs[n-1].Seq
	}
	return 0
}

// TerminalState returns the store's end state of a run whose log ends with its terminal
// event (RUN_FINISHED by its outcome, RUN_ERROR), or "" when the log does not end so.
func TerminalState(evs []store.Event) string {
	if len(evs) == 0 {
		return ""
	}
	var head struct {
		Type    string `json:"type"`
		Outcome *struct {
			Type string `json:"type"`
		} `json:"outcome"`
	}
	if json.Unmarshal(evs[len(evs)-1].Data, &head) != nil {
		return ""
	}
	switch agui.EventType(head.Type) {
	case agui.EventRunFinished:
		if head.Outcome != nil && head.Outcome.Type == agui.OutcomeInterrupt {
			return EndInterrupt
		}
		if head.Outcome != nil && head.Outcome.Type == agui.OutcomeCancelled {
			return EndCancelled
		}
		return EndCompleted
	case agui.EventRunError:
		return EndError
	}
	return ""
}
