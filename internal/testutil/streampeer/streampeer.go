// Package streampeer serves a minimal A2A 1.0 JSON-RPC agent for tests and benchmarks of
// large or fast streams: it answers SendStreamingMessage only, writing each event as the
// SDK's own wire encoding (a2a.StreamResponse) as soon as the test's task produces it.
// a2a-go v2.4.0's server is not used: it copies the whole task for every event and moves
// status messages into the history, so its own cost grows with the square of the events
// and would hide the client's.
package streampeer

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Send writes one event of the stream; false means the client is gone.
type Send func(sdk.Event) bool

// Task answers one streaming message: prompt is the text of its parts.
type Task func(prompt string, send Send)

// Serve serves the agent named name until the test ends and returns its base URL (the card
// is at the well-known path, the JSON-RPC endpoint at /a2a). The stream is flushed when
// task returns.
func Serve(tb testing.TB, name string, task Task) string {
	tb.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	card := &sdk.AgentCard{
		Name: name, Description: "streams events as fast as it can", Version: "1.0.0",
		Capabilities: sdk.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*sdk.AgentInterface{{URL: base + "/a2a", ProtocolBinding: sdk.TransportProtocolJSONRPC,
			ProtocolVersion: sdk.Version}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []sdk.AgentSkill{{ID: name, Name: name, Description: "streams", Tags: []string{"test"}}},
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
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
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 64<<10)
		task(prompt.String(), func(ev sdk.Event) bool {
			b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": sdk.StreamResponse{Event: ev}})
			if err != nil {
				return false
			}
			_, _ = bw.WriteString("data: ")
			_, _ = bw.Write(b)
			_, err = bw.WriteString("\n\n")
			return err == nil
		})
		_ = bw.Flush()
	})
	srv.Config.Handler = mux
	srv.Start()
	tb.Cleanup(srv.Close)
	return base
}
