package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"unknown provider", write("a.yaml", "llm:\n  provider: gpt\n"), `a.yaml: llm.provider: must be one of`},
		{"unknown key", write("b.yaml", "limits:\n  max_iterashuns: 3\n"), `b.yaml: limits.max_iterashuns: unknown key`},
		{"bad agent url", write("c.yaml", "agents:\n  - name: x\n    url: nope\n"), `c.yaml: agents[0].url`},
		{"missing file", filepath.Join(dir, "none.yaml"), `none.yaml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"--config", tt.path}, &out, &errOut)
			assert.Equal(t, 2, code)
			assert.Contains(t, errOut.String(), tt.want)
			assert.Empty(t, out.String(), "nothing starts")
		})
	}
}
