package store

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
)

// The store's own answers are not outages: a fenced write or the thread cap must not
// become 503 STORE_UNAVAILABLE, nor mark the store down for readiness.
func TestUnavailableKeepsTheStoresAnswers(t *testing.T) {
	t.Parallel()
	for _, answer := range []error{ErrNotFound, ErrThreadOwned, ErrThreadBusy, ErrFenced, ErrTooManyThreads, ErrClosed, sql.ErrNoRows} {
		err := unavailable(fmt.Errorf("write: %w", answer))
		if IsUnavailable(err) {
			t.Errorf("%v classified as the store being unavailable", answer)
		}
		var h writeHealth
		h.note(err)
		if f := h.failing(); f != nil {
			t.Errorf("after %v the store is reported down: %v", answer, f)
		}
	}
	outage := unavailable(errors.New("connection refused"))
	if !IsUnavailable(outage) {
		t.Fatalf("a driver error is not classified as unavailable: %v", outage)
	}
	var h writeHealth
	h.note(outage)
	if h.failing() == nil {
		t.Fatal("a failed write does not report the store down")
	}
}
