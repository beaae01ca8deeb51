package durable

import (
	"testing"

	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// TestMain fails the package if a test leaves a goroutine behind, and stops the throwaway
// PostgreSQL server if a benchmark started one.
func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m, pgtest.Stop)
}
