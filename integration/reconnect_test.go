package integration

// The reconnect stream (DESIGN §9a) through both official AG-UI clients: a run is cut off
// mid-text, and the client receives the replay from Last-Event-ID as a stream of its own.

import (
	"bufio"
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/server"
)

// pausedModel streams "first ", then waits for resume before "second" and the end of turn.
type pausedModel struct{ resume chan struct{} }

func (m pausedModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		if !yield(llm.Delta{Text: "first "}, nil) {
			return
		}
		select {
		case <-ctx.Done():
			yield(llm.Delta{}, ctx.Err())
			return
		case <-m.resume:
		}
		if yield(llm.Delta{Text: "second"}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop"}}, nil)
		}
	}
}

func TestReconnectOfficialClients(t *testing.T) {
	t.Parallel()
	for _, lane := range []string{"v1", "legacy"} {
		t.Run(lane, func(t *testing.T) {
			requirePeers(t)
			model := pausedModel{resume: make(chan struct{})}
			e := launchedEngine(t, coordinator.Config{Model: model})
			baton := httptest.NewServer(server.New(server.Config{Engine: coordinator.NewRuns(e, coordinator.RunsConfig{})}))
			defer baton.Close()
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = e.Stop(ctx)
			}()

			thread, run := "reconnect-"+lane, "run-"+lane
			version := `"protocolVersion":"1.0",`
			if lane == "legacy" {
				version = ""
			}
			body := `{"threadId":"` + thread + `","runId":"` + run + `",` + version + `"messages":[{"id":"u1","role":"user","content":"go"}]}`
			req, err := http.NewRequest(http.MethodPost, baton.URL+"/agui", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			live, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer live.Body.Close()
			require.Equal(t, http.StatusOK, live.StatusCode)

			// Read the live stream up to the first text content: the point of reconnection.
			var last string
			sc := bufio.NewScanner(live.Body)
			for sc.Scan() {
				line := sc.Text()
				if id, ok := strings.CutPrefix(line, "id: "); ok {
					last = id
				}
				if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"TEXT_MESSAGE_CONTENT"`) {
					break
				}
			}
			require.NotEmpty(t, last, "the live stream carries ids")

			// The official client POSTs; this front relays its request to the reconnect
			// endpoint with the Last-Event-ID, and lets the model go on once the replay has
			// started, so the client receives both the replay and the live rest.
			var once sync.Once
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				greq, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, baton.URL+"/agui/threads/"+thread+"/runs/"+run+"/events", nil)
				greq.Header.Set("Last-Event-ID", last)
				resp, err := http.DefaultClient.Do(greq)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer resp.Body.Close()
				w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
				w.WriteHeader(resp.StatusCode)
				buf := make([]byte, 4096)
				for {
					n, err := resp.Body.Read(buf)
					if n > 0 {
						_, _ = w.Write(buf[:n])
						w.(http.Flusher).Flush()
						once.Do(func() { close(model.resume) })
					}
					if err != nil {
						return
					}
				}
			}))
			defer front.Close()

			res := runAGUIClient(t, lane, front.URL, map[string]any{"threadId": thread, "runId": run, "messages": []any{}})
			require.Nil(t, res.Failed, "the client rejected the replayed stream")
			assert.Empty(t, res.Warnings, "the client warned about the replayed stream")
			assert.True(t, res.Terminal)
			var types []string
			text := ""
			for _, ev := range res.Events {
				typ, _ := ev["type"].(string)
				types = append(types, typ)
				if typ == "TEXT_MESSAGE_CONTENT" {
					d, _ := ev["delta"].(string)
					text += d
				}
			}
			require.NotEmpty(t, types)
			assert.Equal(t, "RUN_STARTED", types[0])
			assert.Contains(t, types, "TEXT_MESSAGE_START", "the open message is restated")
			assert.Equal(t, "second", text, "the replay holds what followed the last id, once")
			n, _ := strconv.Atoi(last)
			assert.Positive(t, n)
			_, _ = io.Copy(io.Discard, live.Body) // the live stream ends too
		})
	}
}
