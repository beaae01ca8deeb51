package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAuthFailsClosed: a configured token variable that is unset or empty stops the start
// with a message naming the variable; nothing listens.
func TestAuthFailsClosed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(p, []byte("listen: 127.0.0.1:0\nstore: \"memory:\"\nserver:\n  auth_tokens_env: BATON_TEST_EMPTY_TOKENS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, val := range map[string]*string{"unset": nil, "empty": new(""), "separators only": new(" , ")} {
		t.Run(name, func(t *testing.T) {
			if val == nil {
				t.Setenv("BATON_TEST_EMPTY_TOKENS", "")
				os.Unsetenv("BATON_TEST_EMPTY_TOKENS")
			} else {
				t.Setenv("BATON_TEST_EMPTY_TOKENS", *val)
			}
			var out, errOut bytes.Buffer
			code := run([]string{"--config", p}, &out, &errOut)
			assert.Equal(t, 2, code)
			assert.Contains(t, errOut.String(), "server.auth_tokens_env names BATON_TEST_EMPTY_TOKENS")
			assert.Contains(t, errOut.String(), "unset or empty")
			assert.NotContains(t, out.String(), "listening")
		})
	}
}
