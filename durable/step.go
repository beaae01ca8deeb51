package durable

import (
	"context"
	"errors"

	"github.com/baton-dev/baton/store"
)

// Step is a recorded intent, to be ended with its outcome; a zero Step (its intent could
// not be recorded) records nothing.
type Step struct {
	j        *Journal
	threadID string
	seq      int64
	epoch    int64
}

// Recorded says whether the step's intent is in the journal.
func (s Step) Recorded() bool { return s.seq != 0 }

// End records the step's outcome, under the epoch its intent was recorded with.
func (s Step) End(end store.StepEnd) {
	if s.seq == 0 {
		return
	}
	// A step often ends because its run was cancelled: its outcome must still be recorded.
	ctx, cancel := context.WithTimeout(context.Background(), JournalTimeout)
	defer cancel()
	end.Epoch = s.epoch
	if err := s.j.st.EndStep(ctx, s.threadID, s.seq, end); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.j.log.Warn("journal: record outcome", "thread_id", s.threadID, "seq", s.seq, "err", err)
	}
}
