package a2aserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
)

func TestStartErrorBudgetExceeded(t *testing.T) {
	t.Parallel()
	err := startError(fmt.Errorf("start: %w", &BudgetExceededError{Message: "You have used your daily budget of $5.00; it resets at 2026-12-08T00:00:00Z (UTC midnight)."}))
	assert.True(t, errors.Is(err, a2a.ErrInvalidRequest))
	assert.Contains(t, err.Error(), "resets at 2026-12-08T00:00:00Z")
}
