package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/store"
)

// ErrNoSuspension: the record to update is not in the suspension the run holds (no
// suspension is held, or it has no such interrupt).
var ErrNoSuspension = errors.New("durable: not in the run's suspension")

// SuspensionStore is the part of the store a run's suspension record needs.
type SuspensionStore interface {
	SaveSuspension(ctx context.Context, s *store.Suspension) error
	CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error
}

// suspensionTimeout bounds a write of a suspension. It runs on a context of its own: a
// client that disconnects right then must not lose the question, nor the record of an
// answer that went out.
const suspensionTimeout = 10 * time.Second

// RunSuspension is one run's suspension record in the store (design/suspension.md): its
// writes are fenced by the run's epoch, so that a replica that lost the run writes none
// (a refusal stops the run through its RunStopper), and while the run resumes it holds the
// suspension being resumed, whose records (an approved call's start and result) are
// updated and saved one at a time. What a suspension holds and what a resume does with
// each answer are the run loop's.
type RunSuspension struct {
	st   SuspensionStore
	log  *EventLog
	stop RunStopper

	mu   sync.Mutex
	held *store.Suspension
}

// NewRunSuspension returns the suspension record of the run whose event log (and epoch)
// is l; stop is the run loop's.
func NewRunSuspension(st SuspensionStore, l *EventLog, stop RunStopper) *RunSuspension {
	return &RunSuspension{st: st, log: l, stop: stop}
}

// Save saves s under the run's epoch (the store saves it only while this replica owns the
// run), on a context of its own. A refusal as fenced stops the run here (why is the
// stopper's) and is returned as the error.
func (rs *RunSuspension) Save(ctx context.Context, s *store.Suspension, why string) error {
	s.Epoch = rs.log.Epoch()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), suspensionTimeout)
	defer cancel()
	err := rs.st.SaveSuspension(sctx, s)
	if errors.Is(err, store.ErrFenced) {
		rs.stop.Moved(why)
	}
	return err
}

// Settle records that the answers to the interrupts ids of the run's suspension went out,
// and removes the suspension, in one write the store makes only while this replica owns
// the run. A refusal (store.ErrFenced) stops the run here: its new owner resumes from the
// suspension, which is kept.
func (rs *RunSuspension) Settle(ctx context.Context, runID string, ids []string) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), suspensionTimeout)
	defer cancel()
	if err := rs.st.CloseSuspension(sctx, rs.log.thread, runID, rs.log.Epoch(), ids); err != nil {
		if errors.Is(err, store.ErrFenced) {
			rs.stop.Moved("the store refused to settle its resume")
		}
		return fmt.Errorf("settle the resume: %w", err)
	}
	return nil
}

// Hold makes s the suspension being resumed, whose records Update changes; nil releases
// it.
func (rs *RunSuspension) Hold(s *store.Suspension) {
	rs.mu.Lock()
	rs.held = s
	rs.mu.Unlock()
}

// Update applies update to the handle of interrupt interruptID of the suspension held, and
// saves the suspension as written by run writerRunID (Save: fenced, on a context of its
// own). Updates are applied and saved one at a time: answers are delivered in parallel. An
// error of update is returned as it is, without a save.
func (rs *RunSuspension) Update(ctx context.Context, writerRunID, interruptID string, update func(handle json.RawMessage) (json.RawMessage, error), why string) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.held == nil {
		return fmt.Errorf("%w: no suspension held for %s", ErrNoSuspension, interruptID)
	}
	found := false
	for i, in := range rs.held.Interrupts {
		if in.ID != interruptID {
			continue
		}
		h, err := update(in.Handle)
		if err != nil {
			return err
		}
		rs.held.Interrupts[i].Handle = h
		found = true
	}
	if !found {
		return fmt.Errorf("%w: interrupt %s", ErrNoSuspension, interruptID)
	}
	rs.held.WriterRunID = writerRunID
	return rs.Save(ctx, rs.held, why)
}
