package durable

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/store"
)

// endRecords returns Records over mem, with a journal, for a run's end.
func endRecords(mem store.Store) *Records {
	discard := slog.New(slog.DiscardHandler)
	return NewRecords(RecordsConfig{Store: mem, Journal: NewJournal(mem, "replica", discard), Replica: "replica", Logger: discard})
}

// addAnswer adds an assistant's text message to l.
func addAnswer(l *EventLog, id, text string) {
	l.Add(&agui.TextMessageStart{MessageID: id, Role: agui.RoleAssistant})
	l.Add(&agui.TextMessageContent{MessageID: id, Delta: text})
	l.Add(&agui.TextMessageEnd{MessageID: id})
}

// TestEndStoresTheMessages: a log whose messages are left to the run's end
// (MessagesWithEnd) stores none as it completes; the end stores them, with the run's end
// and its step, in one write.
func TestEndStoresTheMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, st, mem, release := heldLog(t)
	l.MessagesWithEnd()
	addAnswer(l, "m", "done")
	l.Add(&agui.RunFinished{ThreadID: "t", RunID: "r"})
	release()
	l.WaitEnded()
	assert.Equal(t, []string{"AppendEvents events"}, st.taken())
	msgs, err := mem.LoadMessages(ctx, "t")
	require.NoError(t, err)
	assert.Empty(t, msgs, "left to the run's end")

	endRecords(mem).End(l, RunRef{ThreadID: "t", RunID: "r"}, "completed", slog.New(slog.DiscardHandler))
	rec, err := mem.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	assert.Equal(t, "completed", rec.State)
	msgs, err = mem.LoadMessages(ctx, "t")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "m", msgs[0].ID)
	assert.Contains(t, string(msgs[0].Data), `"done"`)
	steps, err := mem.Steps(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	assert.Equal(t, store.StepRunEnd, steps[0].Kind)
}

// TestEndBeforeTheLogCompletes: a run that could not emit its terminal event has its end
// recorded before its log completes; the end then goes without the messages, and the log's
// writer stores them when it completes, as without MessagesWithEnd.
func TestEndBeforeTheLogCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, mem, release := heldLog(t)
	l.MessagesWithEnd()
	addAnswer(l, "m", "partial")
	endRecords(mem).End(l, RunRef{ThreadID: "t", RunID: "r"}, "error", slog.New(slog.DiscardHandler))
	rec, err := mem.GetRun(ctx, "t", "r")
	require.NoError(t, err)
	assert.Equal(t, "error", rec.State)
	l.RunEnded()
	release()
	<-l.Done()
	msgs, err := mem.LoadMessages(ctx, "t")
	require.NoError(t, err)
	require.Len(t, msgs, 1, "stored by the log's writer")
	assert.Equal(t, "m", msgs[0].ID)
}

// TestTakeoverStoresAFinishedRunsMessages: a lapsed run whose log ends with its terminal
// event (its owner did not get to record its end) is ended by the takeover with the
// messages its log adds to its thread, which its owner would have stored with the end.
func TestTakeoverStoresAFinishedRunsMessages(t *testing.T) {
	t.Parallel()
	st := memoryStore(t)
	runs := lapsedRuns(t, st, "", 1, `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`)
	ctx := context.Background()
	thread, run := "t-"+runs[0], runs[0]
	rec, err := st.GetRun(ctx, thread, run)
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, thread, run, rec.Epoch, []store.Event{
		{Seq: 3, Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"the answer"}`)},
		{Seq: 4, Data: []byte(`{"type":"TEXT_MESSAGE_END","messageId":"m"}`)},
		{Seq: 5, Data: []byte(`{"type":"RUN_FINISHED","threadId":"` + thread + `","runId":"` + run + `"}`)},
	}))
	a := &fakeAdopter{}
	tk := newTestTakeover(st, "replica-b", a)
	require.Equal(t, 1, tk.Look(ctx, false))
	assert.Empty(t, a.claims())
	rec, err = st.GetRun(ctx, thread, run)
	require.NoError(t, err)
	assert.NotEqual(t, store.RunRunning, rec.State)
	msgs, err := st.LoadMessages(ctx, thread)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "m", msgs[0].ID)
	assert.Contains(t, string(msgs[0].Data), `"the answer"`)
}
