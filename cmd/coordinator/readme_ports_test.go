package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMEAgentPorts: every demo agent address that a README config example points an
// agent at is one that a README command serves (`go run ./cmd/demo-agent … --listen`), so
// that the examples work together as written (the nested-Baton example once named a port
// nothing listened on).
func TestREADMEAgentPorts(t *testing.T) {
	b := []byte(readDocs(t, filepath.Join("..", "..")))
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`go run ./cmd/demo-agent --agent \w+ --listen ([\w.:-]+)`).FindAllStringSubmatch(string(b), -1) {
		served["http://"+m[1]] = true
	}
	require.NotEmpty(t, served, "the README starts the demo agents")
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, blocks)
	agentURL := regexp.MustCompile(`(?m)^\s+url:\s*(http://127\.0\.0\.1:412\d\d)\b`)
	checked := 0
	for i, blk := range blocks {
		for _, m := range agentURL.FindAllStringSubmatch(blk[1], -1) {
			checked++
			assert.True(t, served[m[1]], "README YAML example %d names the agent at %s, which no README command serves (served: %v)", i+1, m[1], served)
		}
	}
	assert.Positive(t, checked, "the README's examples name demo agents")
}
