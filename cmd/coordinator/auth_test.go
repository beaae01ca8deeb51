package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAuthFailsClosed: a configured token variable that is unset or empty stops the start
// with a message naming the config file, the key and the variable; nothing listens.
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
			assert.Contains(t, errOut.String(), p+": server.auth_tokens_env names BATON_TEST_EMPTY_TOKENS", "the error names the config file")
			assert.Contains(t, errOut.String(), "unset or empty")
			assert.NotContains(t, out.String(), "listening")
		})
	}
}

// TestAuthTokensUnnamedWarns: BATON_AUTH_TOKENS set for a coordinator whose config names no
// server.auth_tokens_env leaves auth off, and the start says so, naming the variable and
// the key (never the tokens). The store is made to fail right after the warnings, so that
// the test needs no listener.
func TestAuthTokensUnnamedWarns(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nstore: \"sqlite:"+blocker+"/sub/x.db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BATON_AUTH_TOKENS", "tok-3f9a")
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"--config", cfg}, &out, &errOut))
	assert.Contains(t, errOut.String(), "BATON_AUTH_TOKENS is set, but no configuration names it: bearer-token auth is OFF")
	assert.Contains(t, errOut.String(), "server.auth_tokens_env: BATON_AUTH_TOKENS")
	assert.NotContains(t, errOut.String(), "tok-3f9a")

	// Named: no warning.
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nserver: {auth_tokens_env: BATON_AUTH_TOKENS}\nstore: \"sqlite:"+blocker+"/sub/x.db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	assert.Equal(t, 1, run([]string{"--config", cfg}, &out, &errOut))
	assert.NotContains(t, errOut.String(), "no configuration names it")
	assert.Contains(t, errOut.String(), "coordinator: store: ", "the start got as far as the store")
}
