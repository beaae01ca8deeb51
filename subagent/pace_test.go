package subagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/statusflood"
)

// floodSend delegates "<n> [artifact]" to the status flood agent with the given
// StatusInterval and returns every Text report, the time the delegation took and its result.
func floodSend(t *testing.T, base, prompt string, interval time.Duration) ([]string, time.Duration, *Result) {
	t.Helper()
	opts := testOptions()
	opts.StatusInterval = interval
	a, err := Resolve(testCtx(t), AgentConfig{Name: "statusflood", URL: base}, opts)
	require.NoError(t, err)
	defer func() { _ = a.Close() }()
	var mu sync.Mutex
	var texts []string
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := a.Send(ctx, Request{Prompt: prompt}, Observer{Text: func(delta string) {
		mu.Lock()
		texts = append(texts, delta)
		mu.Unlock()
	}})
	took := time.Since(began)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	return texts, took, res
}

// 10,000 working status updates of one task, sent as fast as the agent can, are reported
// at most once per StatusInterval (the latest winning); the last one is reported before the
// artifact that follows it, and the artifact is reported whole.
func TestStatusFloodIsPaced(t *testing.T) {
	leakCheck(t)
	const n = 10000
	base := statusflood.Start(t)
	texts, took, res := floodSend(t, base, "10000 artifact", 0)
	t.Logf("%d status updates in %s: %d reports", n, took, len(texts))
	assert.Equal(t, StateCompleted, res.State)
	// At most one per interval, plus the first, the last and the artifact: on a loaded
	// machine the flood takes longer and the bound with it; on any machine far below n.
	assert.LessOrEqual(t, len(texts), int(took/DefaultStatusInterval)+3)
	assert.Less(t, len(texts), n/10)
	require.GreaterOrEqual(t, len(texts), 2)
	assert.Equal(t, "step 1 of 10000", texts[0], "the first status at once")
	assert.Equal(t, "\nstep 10000 of 10000", texts[len(texts)-2], "the last status before the artifact")
	assert.Equal(t, "\ndone", texts[len(texts)-1])
	assert.Equal(t, "done", res.Text)
}

// The last status of a task that ends without any other text is reported before Send
// returns, and with a negative StatusInterval every status is reported.
func TestStatusFloodLastIsKept(t *testing.T) {
	leakCheck(t)
	base := statusflood.Start(t)
	texts, _, res := floodSend(t, base, "3000", 0)
	assert.Equal(t, StateCompleted, res.State)
	require.NotEmpty(t, texts)
	assert.Equal(t, "\nstep 3000 of 3000", texts[len(texts)-1], "the last status is not lost")

	every, _, _ := floodSend(t, base, "300", -1)
	assert.Len(t, every, 300, "unpaced: one report per status")
	assert.Equal(t, "step 1 of 300\nstep 2 of 300", strings.Join(every[:2], ""))
}

// The pacer reports the first status at once, holds those that follow within the interval
// (the latest winning) until the interval is over, releases what it holds before other text
// and on stop, and reports nothing after stop.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		tr := newTranscript(func(s string) { mu.Lock(); got = append(got, strings.TrimPrefix(s, "\n")); mu.Unlock() })
		p := newPacer(100*time.Millisecond, tr)
		sent := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
		status := func(s string) { p.mu.Lock(); p.status("k-"+s, s); p.mu.Unlock() }

		for _, s := range []string{"a", "b", "c"} {
			status(s)
		}
		assert.Equal(t, []string{"a"}, sent(), "the first at once, the rest held")
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []string{"a", "c"}, sent(), "the latest when the interval is over")

		status("d")
		status("e")
		p.mu.Lock()
		p.release()
		tr.set("artifact", "x")
		p.mu.Unlock()
		assert.Equal(t, []string{"a", "c", "e", "x"}, sent(), "held status released before other text")

		time.Sleep(time.Second)
		status("f")
		status("g")
		p.stop()
		assert.Equal(t, []string{"a", "c", "e", "x", "f", "g"}, sent(), "stop releases what is held")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Len(t, sent(), 6, "nothing after stop")
	})
}
