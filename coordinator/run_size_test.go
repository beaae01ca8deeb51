package coordinator

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestRunFitsItsSizeClass: every open run holds its Run, and an open streaming run has
// little heap to spare (DESIGN §13: under 48 KiB; BENCHMARKS.md, "the heap that came back").
// With the 8-byte header Go puts on an allocation over 512 bytes, a Run of up to 760 bytes
// is in the 768-byte size class; one byte more puts it in the 896-byte class, 128 bytes
// more per open run. A field that must be added is paid for by one taken out.
func TestRunFitsItsSizeClass(t *testing.T) {
	t.Parallel()
	assert.LessOrEqual(t, unsafe.Sizeof(Run{}), uintptr(768-8), "Run's size")
}
