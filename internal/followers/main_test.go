package followers

import (
	"testing"

	"github.com/baton-dev/baton/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }
