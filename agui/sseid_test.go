package agui

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSSEWriterIDs(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := NewSSEWriter(rec)
	require.NoError(t, w.WriteEventsFrom(7, []Event{
		&RunStarted{ThreadID: "t", RunID: "r", Base: Base{Timestamp: 1}},
		&TextMessageStart{MessageID: "m", Role: RoleAssistant, Base: Base{Timestamp: 2}},
	}))
	require.NoError(t, w.WriteRaw([]RawFrame{{ID: 9, Data: []byte(`{"type":"TEXT_MESSAGE_END","messageId":"m"}`)}}))
	assert.Equal(t, "id: 7\ndata: {\"type\":\"RUN_STARTED\",\"timestamp\":1,\"threadId\":\"t\",\"runId\":\"r\"}\n\n"+
		"id: 8\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"timestamp\":2,\"messageId\":\"m\",\"role\":\"assistant\"}\n\n"+
		"id: 9\ndata: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n", rec.Body.String())

	before := rec.Body.Len()
	for _, bad := range [][]byte{nil, []byte(`[1]`), []byte("{\"a\":\n1}"), []byte("{}\r")} {
		require.Error(t, w.WriteRaw([]RawFrame{{ID: 1, Data: bad}}), "%q", bad)
	}
	assert.Equal(t, before, rec.Body.Len(), "a refused frame writes nothing")
}
