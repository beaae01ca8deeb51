package design

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestContractMatchesShared keeps design/contract.md identical to the shared DESIGN.md that
// tests outside the code base read. The shared file only exists next to a working checkout,
// so a clone without it has nothing to compare against.
func TestContractMatchesShared(t *testing.T) {
	ours, err := os.ReadFile("contract.md")
	if err != nil {
		t.Fatalf("read design/contract.md: %v", err)
	}
	shared, err := os.ReadFile("../../shared/DESIGN.md")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("../shared/DESIGN.md is not present next to this checkout; nothing to compare")
	}
	if err != nil {
		t.Fatalf("read ../shared/DESIGN.md: %v", err)
	}
	if !bytes.Equal(ours, shared) {
		t.Fatal("design/contract.md differs from ../shared/DESIGN.md: copy the shared contract over it (cp ../shared/DESIGN.md design/contract.md)")
	}
}
