package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// readCounter is a store that counts the thread messages each read returns.
type readCounter struct {
	store.Store
	mu            sync.Mutex
	whole, recent []int
}

func (s *readCounter) LoadMessages(ctx context.Context, threadID string) ([]store.Message, error) {
	msgs, err := s.Store.LoadMessages(ctx, threadID)
	s.mu.Lock()
	s.whole = append(s.whole, len(msgs))
	s.mu.Unlock()
	return msgs, err
}

func (s *readCounter) LoadRecentMessages(ctx context.Context, threadID string, start func(store.Message) bool) ([]store.Message, error) {
	msgs, err := s.Store.LoadRecentMessages(ctx, threadID, start)
	s.mu.Lock()
	s.recent = append(s.recent, len(msgs))
	s.mu.Unlock()
	return msgs, err
}

// lastRequest records the model's requests that are not summary requests.
type lastRequest struct {
	mu   sync.Mutex
	last []llm.Message
}

func (l *lastRequest) model() *fakeModel {
	return &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		if !strings.HasPrefix(req.Messages[0].Content, "You maintain the memory") {
			l.mu.Lock()
			l.last = append([]llm.Message(nil), req.Messages[1:]...)
			l.mu.Unlock()
		}
		return []llm.Delta{{Text: "noted"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
}

// userInput is a run of thread that sends one user message of text.
func userInput(thread, run, text string) *agui.RunAgentInput {
	content, _ := json.Marshal(text)
	return &agui.RunAgentInput{ThreadID: thread, RunID: run, ProtocolVersion: "1.0",
		Messages: []agui.Message{{ID: "u-" + run, Role: "user", Content: content}}}
}

// conversationCheckpoint waits for the run's stored checkpoint to hold its history.
func conversationCheckpoint(t *testing.T, st store.Store, thread, run string) (*store.RunRecord, durable.Work, durable.Checkpoint) {
	t.Helper()
	var rec *store.RunRecord
	var w durable.Work
	var cp durable.Checkpoint
	require.Eventually(t, func() bool {
		var err error
		if rec, err = st.GetRun(context.Background(), thread, run); err != nil {
			return false
		}
		w = durable.Work{}
		if json.Unmarshal(rec.Work, &w) != nil || len(w.Checkpoint) == 0 {
			return false
		}
		cp, err = durable.DecodeCheckpoint(w.Checkpoint)
		return err == nil && len(cp.Conv) > 0
	}, 10*time.Second, 5*time.Millisecond, "the run's checkpoint holds its history")
	return rec, w, cp
}

// TestCheckpointNamesTheThreadsMessages: the checkpoint of a run on a long thread names
// the thread's messages instead of copying them: its size does not grow with theirs (the
// same for messages of 1 KiB and of 256 KiB), and a replica that takes the run over
// rebuilds from it exactly the history the model was sent. A checkpoint of the old
// version, with every message inline, is still read.
func TestCheckpointNamesTheThreadsMessages(t *testing.T) {
	t.Parallel()
	sizes := map[int]int{}
	for _, size := range []int{1 << 10, 256 << 10} {
		st, err := store.Open(context.Background(), "memory:")
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		var req lastRequest
		const runs = 4
		last := fmt.Sprintf("r%d", runs-1)
		// The last run's turn waits, so that its checkpoint is read while it is open.
		inTurn, release := make(chan struct{}), make(chan struct{})
		model := req.model()
		turn := model.turn
		model.turn = func(r *llm.Request) []llm.Delta {
			out := turn(r)
			if strings.HasPrefix(r.Messages[len(r.Messages)-1].Content, fmt.Sprintf("%d ", runs-1)) {
				close(inTurn)
				<-release
			}
			return out
		}
		e := newEngine(t, model, &fakeAgent{}, func(c *Config) {
			c.Store = st
			c.History.Window = 1 << 30
		})
		for i := range runs - 1 {
			evs := startAndCollect(t, e, userInput("long", fmt.Sprintf("r%d", i), fmt.Sprintf("%d ", i)+strings.Repeat("x", size)))
			require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
		}
		run, err := e.StartRun(context.Background(), userInput("long", last, fmt.Sprintf("%d ", runs-1)+strings.Repeat("x", size)), "")
		require.NoError(t, err)
		<-inTurn
		rec, w, cp := conversationCheckpoint(t, st, "long", last)
		require.Equal(t, durable.CheckpointVersion, cp.V)
		sizes[size] = len(w.Checkpoint)
		assert.Less(t, len(w.Checkpoint), 4096, "messages of %d bytes: named, not copied", size)

		to, why := (&adoption{e: e, rec: *rec}).decodeTakeover(context.Background(), w)
		require.Empty(t, why)
		req.mu.Lock()
		sent := req.last
		req.mu.Unlock()
		require.Len(t, sent, 2*runs-1, "the thread's turns and the run's request")
		assert.Equal(t, sent, to.conv, "a takeover rebuilds the history the model was sent")

		// The same history as version 1 wrote it: every message inline.
		old := cp
		old.V = 1
		old.Conv = mustJSON(to.conv)
		w.Checkpoint = mustJSON(old)
		to, why = (&adoption{e: e, rec: *rec}).decodeTakeover(context.Background(), w)
		require.Empty(t, why)
		assert.Equal(t, sent, to.conv, "a version 1 checkpoint restores as it did")

		// A checkpoint naming a message the thread does not have is refused.
		bad := cp
		bad.Conv = json.RawMessage(`[{"ref":"no-such-message"}]`)
		w.Checkpoint = mustJSON(bad)
		_, why = (&adoption{e: e, rec: *rec}).decodeTakeover(context.Background(), w)
		assert.Equal(t, "its checkpoint is unreadable", why)
		close(release)
		evs := collect(t, run)
		require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
	}
	// The same to a few bytes (the run's active time is in it).
	assert.InDelta(t, sizes[1<<10], sizes[256<<10], 32, "the checkpoint's size does not depend on the messages'")
}

// TestStartReadsFromTheLatestCompaction: a run on a compacted thread reads the thread from
// the earliest message its latest compaction kept, not whole, and sends the model the
// history that replaying every compaction on the whole thread gives.
func TestStartReadsFromTheLatestCompaction(t *testing.T) {
	t.Parallel()
	// Two turns kept, and the default (four), where the assistant's every answer ("noted")
	// repeats among the kept ones and the replaced ones.
	for _, keep := range []int{2, 0} {
		t.Run(fmt.Sprintf("keep=%d", keep), func(t *testing.T) {
			t.Parallel()
			startReadsFromTheLatestCompaction(t, keep)
		})
	}
}

func startReadsFromTheLatestCompaction(t *testing.T, keep int) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	counter := &readCounter{Store: st}
	var req lastRequest
	e := newEngine(t, req.model(), &fakeAgent{}, func(c *Config) {
		c.Store = counter
		// About three of the 4 KiB messages fit before compaction.
		c.History = history.Options{Window: 4000, KeepRecentTurns: keep}.WithDefaults()
	})
	const runs = 8
	for i := range runs {
		evs := startAndCollect(t, e, userInput("compacted", fmt.Sprintf("r%d", i), fmt.Sprintf("%d ", i)+strings.Repeat("y", 4<<10)))
		require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
	}
	all, err := st.LoadMessages(context.Background(), "compacted")
	require.NoError(t, err)
	msgs := make([]agui.Message, 0, len(all))
	for _, m := range all {
		var am agui.Message
		require.NoError(t, json.Unmarshal(m.Data, &am))
		msgs = append(msgs, am)
	}
	recs, _ := compactionRecords(msgs)
	require.GreaterOrEqual(t, len(recs), 2, "the thread was compacted more than once")
	for _, rec := range recs {
		assert.NotEmpty(t, rec.From, "each compaction names where it starts")
	}

	counter.mu.Lock()
	whole, recent := counter.whole, counter.recent
	counter.mu.Unlock()
	assert.Empty(t, whole, "no run read the whole thread")
	// The first run's thread had no message yet (ThreadStatus said so): nothing to read.
	require.Len(t, recent, runs-1, "each later run read the thread once")
	assert.Less(t, recent[len(recent)-1], len(all)-2, "the last run read its thread from the latest compaction on")

	// The history the last run started from: the whole thread before its own messages,
	// every compaction replayed, then its request.
	var before []agui.Message
	for _, m := range msgs {
		if m.ID == "u-r7" {
			before = append(before, m)
			break
		}
		before = append(before, m)
	}
	beforeRecs, _ := compactionRecords(before)
	want := history.Apply(fromAGUI(before), beforeRecs)
	req.mu.Lock()
	sent := req.last
	req.mu.Unlock()
	require.NotEmpty(t, sent)
	assert.True(t, history.IsSummary(sent[0]), "the summary first")
	// The last request may come after a compaction of the run's own: compare with what the
	// run started from when it did not compact.
	if len(compactionsOfRun(msgs, "u-r7")) == 0 {
		assert.Equal(t, e.cfg.History.View(want), sent)
	}
}

// compactionsOfRun are the compaction messages stored after the message id (the run's).
func compactionsOfRun(msgs []agui.Message, id string) []agui.Message {
	var out []agui.Message
	after := false
	for _, m := range msgs {
		after = after || m.ID == id
		if after && m.Role == agui.RoleActivity && m.ActivityType == ActivityCompaction {
			out = append(out, m)
		}
	}
	return out
}

// TestStoredMessagesPastTheFew: the hashes move from the slice to the map past
// maxFewStored, and every message noted before and after is still found, a repeated text
// by its last id, and the earliest by the thread's order.
func TestStoredMessagesPastTheFew(t *testing.T) {
	t.Parallel()
	for _, count := range []int{1, maxFewStored, maxFewStored + 1, 3 * maxFewStored} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			t.Parallel()
			var s storedMessages
			assert.Empty(t, s.id(llm.Message{Role: llm.RoleUser, Content: "m0"}), "nothing noted")
			ok := llm.Message{Role: llm.RoleAssistant, Content: "ok"}
			var conv []llm.Message
			for i := range count {
				m := llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("m%d", i)}
				s.note(m, fmt.Sprintf("id-m%d", i))
				s.note(m, fmt.Sprintf("id-m%d", i)) // noted twice: kept once
				s.note(ok, fmt.Sprintf("id-ok%d", i))
				conv = append(conv, m)
			}
			assert.Equal(t, 2*count, s.n, "each id once")
			for i := range count {
				assert.Equal(t, fmt.Sprintf("id-m%d", i), s.id(llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("m%d", i)}))
			}
			assert.Equal(t, fmt.Sprintf("id-ok%d", count-1), s.id(ok), "a repeated text: its last id")
			assert.Empty(t, s.id(llm.Message{Role: llm.RoleUser, Content: "other"}))
			assert.Equal(t, "id-m0", s.earliest(conv, func(int) bool { return true }))
			assert.Equal(t, fmt.Sprintf("id-m%d", count-1), s.earliest(conv, func(i int) bool { return i == count-1 }))
			assert.Equal(t, fmt.Sprintf("id-ok%d", count-1), s.earliest([]llm.Message{ok}, func(int) bool { return true }),
				"the conversation's one ok is the thread's last")
		})
	}
}
