package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// TestReconnectAcrossTakeover: a run taken over by another replica numbers its events after
// a gap (design/takeover.md). A client whose Last-Event-ID lies in the gap (an event the dead
// replica streamed but never stored) is placed by the first event after it: it gets the
// restated start, then what the new owner wrote. A log that starts after the gap (nothing
// was stored before the takeover) is followed from its own RUN_STARTED, not refused as
// expired.
func TestReconnectAcrossTakeover(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, e := newTestServer(t, blockingModel{release: release}, Config{})
	evs := readEvents(t, post(t, srv.URL+"/agui", body("tk", "r1", "")))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "a run that owns the thread")
	st := storeOf(e)
	ev := func(seq int64, data string) store.Event { return store.Event{Seq: seq, Data: json.RawMessage(data)} }

	// A log of 3 events, the gap, then the new owner's events to the end.
	storedRun(t, st, "tk", "gap", []store.Event{
		ev(1, `{"type":"RUN_STARTED","threadId":"tk","runId":"gap"}`),
		ev(2, `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`),
		ev(3, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a"}`),
		ev(20004, `{"type":"TEXT_MESSAGE_END","messageId":"m1"}`),
		ev(20005, `{"type":"RUN_FINISHED","threadId":"tk","runId":"gap","outcome":{"type":"success"}}`),
	})
	frames := sseFrames(t, get(t, srv.URL+"/agui/threads/tk/runs/gap/events", "Last-Event-ID", "5"))
	require.Len(t, frames, 4, "%v", frames)
	assert.Equal(t, []string{"5:RUN_STARTED", "5:TEXT_MESSAGE_START", "20004:TEXT_MESSAGE_END", "20005:RUN_FINISHED"}, frames)

	// Nothing stored before the takeover: the log starts after the gap.
	storedRun(t, st, "tk", "late", []store.Event{
		ev(20001, `{"type":"RUN_STARTED","threadId":"tk","runId":"late"}`),
		ev(20002, `{"type":"RUN_FINISHED","threadId":"tk","runId":"late","outcome":{"type":"success"}}`),
	})
	for _, id := range []string{"", "4"} {
		frames := sseFrames(t, get(t, srv.URL+"/agui/threads/tk/runs/late/events", "Last-Event-ID", id))
		assert.Equal(t, []string{"20001:RUN_STARTED", "20002:RUN_FINISHED"}, frames, "Last-Event-ID %q", id)
	}
}

// sseFrames reads an SSE response to its end as "id:type" strings.
func sseFrames(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); resp.Body.Close() }()
	var out []string
	id := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var head struct {
				Type string `json:"type"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &head))
			out = append(out, id+":"+head.Type)
		}
	}
	return out
}
