package tokenstore

import (
	"testing"

	"github.com/baton-dev/baton/internal/testutil"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// TestMain stops the throwaway PostgreSQL server a benchmark started, and fails the package
// if a test leaves a goroutine behind (a store not closed).
func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m, pgtest.Stop)
}
