package mcpclient

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log sink safe for the registry's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestToolsNeedingTasksLeftOut: server-everything's simulate-research-query declares
// execution.taskSupport "required" (it can only be called as an MCP task, which Baton does
// not do); it is left out of the catalog with one log line saying why, and the server's
// other tools stay. Over stdio and over streamable HTTP (where it used to be offered).
func TestToolsNeedingTasksLeftOut(t *testing.T) {
	leakCheck(t)
	node, entry := everything(t)
	for _, tc := range []struct {
		name string
		cfg  func() ServerConfig
	}{
		{"stdio", func() ServerConfig { return ServerConfig{Name: "everything", Command: []string{node, entry, "stdio"}} }},
		{"http", func() ServerConfig { return ServerConfig{Name: "everything", URL: startEverythingHTTP(t)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			el := &recElicitor{res: &mcp.ElicitResult{Action: "decline"}}
			r := newRegistry(t, []ServerConfig{tc.cfg()},
				Options{Elicitor: el, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			require.True(t, r.Status()[0].Connected, r.Status()[0].LastError)
			names := func() []string {
				var out []string
				for _, tool := range r.Tools() {
					out = append(out, tool.Name)
				}
				return out
			}
			// The server registers it once it knows the client's capabilities and says its
			// list changed: wait until the catalog has settled on the echo tool and the log
			// line came.
			require.Eventually(t, func() bool {
				return strings.Contains(logs.String(), "simulate-research-query")
			}, 30*time.Second, 20*time.Millisecond, "no log line for simulate-research-query; catalog %v", names())
			assert.Contains(t, names(), "everything__echo")
			assert.NotContains(t, names(), "everything__simulate-research-query")
			// Listed again (as after tools/list_changed): still left out, and not logged again.
			v := r.ToolsVersion()
			r.servers[0].refresh()
			require.Eventually(t, func() bool { return r.ToolsVersion() > v }, 30*time.Second, 10*time.Millisecond, "the refresh never installed")
			assert.NotContains(t, names(), "everything__simulate-research-query")
			assert.Contains(t, names(), "everything__echo")
			assert.Equal(t, 1, strings.Count(logs.String(), "left out of the catalog"), "one log line: %s", logs.String())
			assert.Contains(t, logs.String(), "requires MCP tasks")
		})
	}
}
