package store

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a database not closed).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
