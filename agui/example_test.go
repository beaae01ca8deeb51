package agui_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/baton-dev/baton/agui"
)

// A handler decodes the input, then streams one run through a Sequencer into an SSEWriter.
func ExampleSequencer() {
	body := `{"threadId":"t1","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"hi"}]}`
	in, err := agui.DecodeRunAgentInput(strings.NewReader(body), 0)
	if err != nil {
		panic(err) // a handler would call agui.WriteInputError(w, err)
	}
	w := httptest.NewRecorder()
	seq := agui.NewSequencer(agui.NewSSEWriter(w).WriteEvent, agui.SequencerOptions{
		Legacy: in.Legacy(),
		Now:    func() time.Time { return time.UnixMilli(1) },
	})
	_ = seq.Emit(&agui.RunStarted{ThreadID: in.ThreadID, RunID: in.RunID})
	_ = seq.Emit(&agui.TextMessageStart{MessageID: "m1", Role: agui.RoleAssistant})
	_ = seq.Emit(&agui.TextMessageContent{MessageID: "m1", Delta: "You said: " + in.Messages[0].Text()})
	// Finish closes the open message before RUN_FINISHED.
	_ = seq.Finish("", "", nil, nil)
	fmt.Print(w.Body.String())
	// Output:
	// data: {"type":"RUN_STARTED","timestamp":1,"threadId":"t1","runId":"r1","protocolVersion":"1.0"}
	//
	// data: {"type":"TEXT_MESSAGE_START","timestamp":1,"messageId":"m1","role":"assistant"}
	//
	// data: {"type":"TEXT_MESSAGE_CONTENT","timestamp":1,"messageId":"m1","delta":"You said: hi"}
	//
	// data: {"type":"TEXT_MESSAGE_END","timestamp":1,"messageId":"m1"}
	//
	// data: {"type":"RUN_FINISHED","timestamp":1,"threadId":"t1","runId":"r1"}
}
