package integration

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartProc covers the process harness without Node: readiness by line and by URL, exit
// codes, and early exits reported as errors.
func TestStartProc(t *testing.T) {
	t.Parallel()
	t.Run("ready line and SIGTERM", func(t *testing.T) {
		p := startProc(t, "sh", []string{"sh", "-c", `echo "listening on http://127.0.0.1:$PORT"; exec sleep 30`},
			[]string{"PORT=4242"}, readyOnLine(`listening on (http://\S+)`))
		require.Len(t, p.Match, 2)
		assert.Equal(t, "http://127.0.0.1:4242", p.Match[1])
		assert.Equal(t, -1, p.Stop(), "killed by SIGTERM")
		assert.Equal(t, -1, p.Stop(), "Stop is idempotent")
		stdout, _ := p.Logs()
		assert.Contains(t, stdout, "listening on")
	})
	t.Run("exit code", func(t *testing.T) {
		p := startProc(t, "sh", []string{"sh", "-c", "echo ready >&2; exit 3"}, nil, readyOnLine(`^ready$`))
		<-p.Done()
		assert.Equal(t, 3, p.Stop())
		_, stderr := p.Logs()
		assert.Equal(t, "ready\n", stderr)
	})
	t.Run("exits before ready", func(t *testing.T) {
		_, err := startProcErr(t, "sh", []string{"sh", "-c", "echo nope; exit 1"}, nil, readyOnLine(`^ready$`))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exited with code 1")
	})
	t.Run("ready URL", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		t.Cleanup(srv.Close)
		p := startProc(t, "sleep", []string{"sleep", "30"}, nil, readyOnURL(srv.URL))
		assert.Equal(t, -1, p.Stop())
	})
}

func TestLineWriter(t *testing.T) {
	t.Parallel()
	var lines []string
	w := &lineWriter{onLine: func(s string) { lines = append(lines, s) }}
	for _, chunk := range []string{"a", "b\nc\r\n", "\n", "d"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	assert.Equal(t, []string{"ab", "c", ""}, lines)
}
