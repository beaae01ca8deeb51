package tokenstore

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// TestMain stops the throwaway PostgreSQL server a benchmark started, and fails the package
// if a test leaves a goroutine behind (a store not closed).
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
