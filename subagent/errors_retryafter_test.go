package subagent

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A failed call carries the agent's Retry-After, and only when there was one.
func TestWithRetryAfter(t *testing.T) {
	base := errors.New("busy")
	rec := &httpStatus{}
	assert.Same(t, base, withRetryAfter(base, rec), "no Retry-After: the error as it was")
	assert.Zero(t, RetryAfterOf(base))

	rec.set(503, 90*time.Second)
	err := withRetryAfter(base, rec)
	assert.ErrorIs(t, err, base)
	assert.Equal(t, "busy", err.Error())
	assert.Equal(t, 90*time.Second, RetryAfterOf(err))
	assert.Equal(t, 90*time.Second, RetryAfterOf(errorsJoinWrap(err)), "found through wrapping")
}

func errorsJoinWrap(err error) error { return errors.Join(errors.New("context"), err) }
