package startstop

import (
	"testing"

	"github.com/baton-dev/baton/internal/testutil"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m)
}
