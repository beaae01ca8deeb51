// Package statusflood is an A2A 1.0 JSON-RPC agent for tests and benchmarks of status
// floods: a task that sends its `working` status updates as fast as it can. It answers
// SendStreamingMessage only, with frames in the SDK's own wire encoding (a2a.StreamResponse),
// as a2a's startChunkPeer does. a2a-go v2.4.0's server is not used: it moves every status
// message into the task's history and copies the task for every event, so its cost grows
// with the square of the updates (2,000 took 94 s through it; 10,000 did not finish in
// 5 minutes), which would hide the client's.
package statusflood

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Start serves the agent until the test ends and returns its base URL (the card is at the
// well-known path). A message "<n>" makes a task that sends n working status updates,
// each with its own message "step i of n", then completes; "<n> artifact" sends an
// artifact "done" before it completes.
func Start(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	card := &sdk.AgentCard{
		Name: "statusflood", Description: "sends working status updates as fast as it can", Version: "1.0.0",
		Capabilities: sdk.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*sdk.AgentInterface{{URL: base + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC,
			ProtocolVersion: sdk.Version}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []sdk.AgentSkill{{ID: "flood", Name: "flood", Description: "floods", Tags: []string{"test"}}},
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	var seq atomic.Int64
	mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage        `json:"id"`
			Method string                 `json:"method"`
			Params sdk.SendMessageRequest `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Method != "SendStreamingMessage" || req.Params.Message == nil {
			http.Error(w, "only SendStreamingMessage", http.StatusBadRequest)
			return
		}
		var prompt strings.Builder
		for _, p := range req.Params.Message.Parts {
			prompt.WriteString(p.Text())
		}
		f := strings.Fields(prompt.String())
		n := 0
		if len(f) > 0 {
			n, _ = strconv.Atoi(f[len(f)-1])
			if len(f) > 1 && f[len(f)-1] == "artifact" {
				n, _ = strconv.Atoi(f[len(f)-2])
			}
		}
		artifact := strings.HasSuffix(prompt.String(), "artifact")
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 64<<10)
		send := func(ev sdk.Event) bool {
			b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": sdk.StreamResponse{Event: ev}})
			if err != nil {
				return false
			}
			_, _ = bw.WriteString("data: ")
			_, _ = bw.Write(b)
			_, err = bw.WriteString("\n\n")
			return err == nil
		}
		task := &sdk.Task{ID: sdk.TaskID(fmt.Sprintf("t-flood-%d", seq.Add(1))), ContextID: "c-flood", Status: sdk.TaskStatus{State: sdk.TaskStateSubmitted}}
		if !send(task) {
			return
		}
		for i := 1; i <= n; i++ {
			m := sdk.NewMessage(sdk.MessageRoleAgent, sdk.NewTextPart(fmt.Sprintf("step %d of %d", i, n)))
			m.ID = fmt.Sprintf("m-%d", i)
			m.TaskID, m.ContextID = task.ID, task.ContextID
			if !send(&sdk.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID,
				Status: sdk.TaskStatus{State: sdk.TaskStateWorking, Message: m}}) {
				return
			}
		}
		if artifact {
			send(&sdk.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, LastChunk: true,
				Artifact: &sdk.Artifact{ID: "answer", Parts: []*sdk.Part{sdk.NewTextPart("done")}}})
		}
		send(&sdk.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: sdk.TaskStatus{State: sdk.TaskStateCompleted}})
		_ = bw.Flush()
	})
	srv.Config.Handler = mux
	srv.Start()
	tb.Cleanup(srv.Close)
	return base
}
