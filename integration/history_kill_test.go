package integration

// kill -9 during compaction (design/history.md, "Persistence and crashes"): a coordinator
// on SQLite is killed while the summary request of a compaction is in flight (the fake
// model streams its first word and holds the rest until the process is gone), then started
// again on the same file. The run is taken over and compacts again; the conversation goes
// on. Nothing is lost (the thread returns every message), the summary is stored once per
// completed compaction (never the killed one's), the model never sees more than its
// window, and the next run reuses the stored summary.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
)

// killCompactionModel answers each turn "noted <message number>" and each summary request
// with a summary, holding the first summary request that comes after hold is armed.
type killCompactionModel struct {
	mu        sync.Mutex
	armed     bool
	held      chan struct{} // closed when the held summary request arrived
	summaries int
	refused   int
	// sawSummary records, per message number, whether that run's first turn request held
	// a stored summary.
	sawSummary map[string]bool
}

func (m *killCompactionModel) reply(req fakellm.Request) fakellm.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, summaryPrompt) {
		m.summaries++
		if m.armed {
			m.armed = false
			close(m.held)
			// The first word streams, the rest waits until the coordinator is gone.
			return fakellm.Reply{Text: "partial summary that never completes", Delay: 2 * time.Minute}
		}
		return fakellm.Reply{Text: "The user sent numbered messages; each was noted."}
	}
	last := req.Last().Content
	num, _, _ := strings.Cut(last, " ")
	summary := false
	for _, msg := range req.Messages {
		summary = summary || strings.HasPrefix(msg.Content, "Summary of the earlier conversation")
	}
	if _, seen := m.sawSummary[num]; !seen {
		m.sawSummary[num] = summary
	}
	return fakellm.Reply{Text: "noted " + num}
}

// arm makes the next summary request hang, and returns a channel closed when it arrives.
func (m *killCompactionModel) arm() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armed, m.held = true, make(chan struct{})
	return m.held
}

// threadMessages reads GET /agui/threads/{id}'s messages.
func threadMessages(t *testing.T, base, thread string) []map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/agui/threads/" + thread)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	return doc.Messages
}

// activeRun is the id of the thread's active run ("" when none).
func activeRun(t *testing.T, base, thread string) string {
	t.Helper()
	resp, err := http.Get(base + "/agui/threads/" + thread)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc struct {
		Run *struct {
			RunID string `json:"runId"`
		} `json:"run"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	if doc.Run == nil {
		return ""
	}
	return doc.Run.RunID
}

func TestKillDuringCompaction(t *testing.T) {
	t.Parallel()
	const (
		window = 6000 // tokens; the fake model counts four characters a token
		size   = 4096 // each user message
		runs   = 8
	)
	script := &killCompactionModel{sawSummary: map[string]bool{}}
	model := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		if n := req.Chars(); n > 4*window {
			script.mu.Lock()
			script.refused++
			script.mu.Unlock()
			return fakellm.TooLong(window, n/4)
		}
		return script.reply(req)
	})
	t.Cleanup(model.Close)
	cfg := testConfig{LLMURL: model.URL, Store: "sqlite:" + filepath.Join(t.TempDir(), "baton.db"), Grace: "1s"}.yaml()
	cfg = strings.Replace(cfg, "  api_key_env: "+llmKeyEnv+"\n", "  api_key_env: "+llmKeyEnv+"\n  context_window: "+fmt.Sprint(window)+"\n", 1)
	cfg += "history:\n  keep_recent_turns: 2\n"
	c := startHITLCoordinator(t, cfg)

	thread := newThreadID("killcompact")
	message := func(i int) string {
		return fmt.Sprintf("m%02d ", i) + strings.Repeat(fmt.Sprintf("line %d of a long message. ", i), size)[:size-4]
	}
	send := func(i int) []map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := postAGUI(ctx, c.URL, mustJSON(t, runInput(thread, fmt.Sprintf("r%02d", i), message(i))))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "run %d", i)
		evs, _ := readSSE(resp.Body, nil) // the killed run's stream breaks
		return evs
	}
	// The first run whose history passes compact_at compacts first: its summary request
	// is in flight when the process dies.
	held := script.arm()
	killRun := 0
	for i := 1; i <= runs && killRun == 0; i++ {
		live := make(chan []map[string]any, 1)
		go func() { live <- send(i) }()
		select {
		case evs := <-live:
			require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "run %d: %v", i, eventTypes(evs))
			continue
		case <-held:
		case <-time.After(time.Minute):
			t.Fatalf("run %d neither ended nor asked for a summary", i)
		}
		killRun = i
		c.kill(t)
		<-live
		c.restart(t)
		// The restarted coordinator takes the run over from its checkpoint and compacts
		// again.
		frames := replayRun(t, c.URL, thread, fmt.Sprintf("r%02d", i), time.Minute)
		_, end := checkLog(t, frames)
		require.Equal(t, "RUN_FINISHED", end["type"], "the run taken over finished")
		var answer strings.Builder
		for _, f := range frames {
			if f.Event["type"] == "TEXT_MESSAGE_CONTENT" {
				answer.WriteString(f.Event["delta"].(string))
			}
		}
		assert.Equal(t, fmt.Sprintf("noted m%02d", i), answer.String(), "the run taken over answers its own message")
		// Its terminal event is in the log before the store ends the run: the next run
		// starts once the thread has no active run.
		require.Eventually(t, func() bool { return activeRun(t, c.URL, thread) == "" }, time.Minute, 20*time.Millisecond)
	}
	require.NotZero(t, killRun, "no run compacted")
	t.Logf("killed during the compaction of run %d", killRun)
	require.Less(t, killRun, runs-1, "runs are left after the killed one")

	for i := killRun + 1; i <= runs; i++ {
		evs := send(i)
		require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "run %d: %v", i, eventTypes(evs))
	}

	// Every message once, the summaries marked as such, none of them the killed one's.
	msgs := threadMessages(t, c.URL, thread)
	users := map[string]int{}
	var compactions []map[string]any
	answers := 0
	for _, m := range msgs {
		switch m["role"] {
		case "user":
			users[m["id"].(string)]++
			content, _ := m["content"].(string)
			assert.Len(t, content, size, "a user message kept whole")
		case "assistant":
			answers++
		case "activity":
			if m["activityType"] == "compaction" {
				compactions = append(compactions, m)
			}
		}
	}
	for i := 1; i <= runs; i++ {
		assert.Equal(t, 1, users[fmt.Sprintf("u-r%02d", i)], "message %d kept once", i)
	}
	assert.Len(t, users, runs)
	assert.Equal(t, runs, answers, "every answer kept")
	require.NotEmpty(t, compactions, "the compaction is in the thread")
	replaced := map[string]bool{}
	for _, m := range compactions {
		content, _ := m["content"].(map[string]any)
		require.NotNil(t, content, "a compaction's content: %v", m)
		assert.NotContains(t, content["summary"], "partial summary", "the killed compaction's summary is never stored")
		keys, _ := json.Marshal(content["replaces"])
		assert.False(t, replaced[string(keys)], "the same turns summarised twice")
		replaced[string(keys)] = true
	}

	// The journal: the killed compaction in doubt (or never ended), then one that completed
	// per stored summary.
	var ok, other int
	for _, s := range journalOf(t, c.URL, thread) {
		if s.Kind != "compaction" {
			continue
		}
		if s.Outcome == "ok" {
			ok++
		} else {
			other++
		}
	}
	assert.Equal(t, len(compactions), ok, "one stored summary per completed compaction")
	assert.Positive(t, other, "the killed compaction is in the journal, not as completed")

	script.mu.Lock()
	defer script.mu.Unlock()
	assert.Zero(t, script.refused, "the model never got more than its window")
	assert.True(t, script.sawSummary[fmt.Sprintf("m%02d", killRun)], "the run taken over compacted its whole history again")
	for i := killRun + 1; i <= runs; i++ {
		assert.True(t, script.sawSummary[fmt.Sprintf("m%02d", i)], "run %d reads the stored summary", i)
	}
}
