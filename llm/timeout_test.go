package llm_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/anthropic"
	"github.com/baton-dev/baton/llm/openai"
)

// hangingServer answers every request with 200 and SSE headers, writes prefix, and then
// sends nothing until the client goes away: a provider that hangs after the headers.
func hangingServer(t *testing.T, prefix string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprint(w, prefix)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func request() *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
}

// collectErr drains a turn and returns its deltas and terminal error.
func collectErr(seq iter.Seq2[llm.Delta, error]) ([]llm.Delta, error) {
	var out []llm.Delta
	for d, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

func requireTimeout(t *testing.T, err error, contains string) {
	t.Helper()
	var le *llm.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, llm.ErrTimeout, le.Kind)
	assert.True(t, le.Transient(), "a timeout is retried like any transient provider failure")
	assert.Contains(t, le.Message, contains)
	assert.NotContains(t, le.Error(), "127.0.0.1", "no internal detail in the user-facing text")
	assert.False(t, errors.Is(err, context.Canceled), "a timeout is not the caller's cancellation")
}

var short = llm.Timeouts{FirstByte: 100 * time.Millisecond, Idle: 100 * time.Millisecond}

func TestFirstByteTimeoutOpenAI(t *testing.T) {
	m, err := openai.New(openai.Config{BaseURL: hangingServer(t, ""), Model: "m", HTTPClient: client(t)})
	require.NoError(t, err)
	_, err = collectErr(llm.WithTimeouts(m, short).Stream(context.Background(), request()))
	requireTimeout(t, err, "did not start answering")
}

func TestIdleTimeoutOpenAI(t *testing.T) {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"
	m, err := openai.New(openai.Config{BaseURL: hangingServer(t, chunk), Model: "m", HTTPClient: client(t)})
	require.NoError(t, err)
	deltas, err := collectErr(llm.WithTimeouts(m, short).Stream(context.Background(), request()))
	requireTimeout(t, err, "stopped sending")
	require.Len(t, deltas, 1, "what arrived before the silence is delivered")
	assert.Equal(t, "Hel", deltas[0].Text)
}

func TestFirstByteTimeoutAnthropic(t *testing.T) {
	m, err := anthropic.New(anthropic.Config{BaseURL: hangingServer(t, ""), Model: "m", HTTPClient: client(t)})
	require.NoError(t, err)
	_, err = collectErr(llm.WithTimeouts(m, short).Stream(context.Background(), request()))
	requireTimeout(t, err, "did not start answering")
}

func TestIdleTimeoutAnthropic(t *testing.T) {
	prefix := "event: message_start\ndata: " +
		`{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n"
	m, err := anthropic.New(anthropic.Config{BaseURL: hangingServer(t, prefix), Model: "m", HTTPClient: client(t)})
	require.NoError(t, err)
	deltas, err := collectErr(llm.WithTimeouts(m, short).Stream(context.Background(), request()))
	requireTimeout(t, err, "stopped sending")
	require.NotEmpty(t, deltas)
	assert.Equal(t, "Hel", deltas[0].Text)
}

// fakeModel yields n text deltas, then Done.
type fakeModel struct{ n int }

func (f fakeModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		for range f.n {
			if ctx.Err() != nil {
				yield(llm.Delta{}, ctx.Err())
				return
			}
			if !yield(llm.Delta{Text: "x"}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}}, nil)
	}
}

// A consumer that takes longer than the idle timeout over each delta is not the
// provider's silence: the turn completes.
// The bubble's fake clock makes the consumer's 60 ms per delta take no real time.
func TestSlowConsumerIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := llm.WithTimeouts(fakeModel{n: 3}, llm.Timeouts{FirstByte: 20 * time.Millisecond, Idle: 20 * time.Millisecond})
		var got int
		var done bool
		for d, err := range m.Stream(context.Background(), request()) {
			require.NoError(t, err)
			if d.Done != nil {
				done = true
				continue
			}
			got++
			time.Sleep(60 * time.Millisecond)
		}
		assert.Equal(t, 3, got)
		assert.True(t, done)
	})
}

// The caller's own cancellation stays a cancellation, never a timeout.
func TestCallerCancelIsNotTimeout(t *testing.T) {
	m, err := openai.New(openai.Config{BaseURL: hangingServer(t, ""), Model: "m", HTTPClient: client(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = collectErr(llm.WithTimeouts(m, llm.Timeouts{FirstByte: time.Hour, Idle: time.Hour}).Stream(ctx, request()))
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
	var le *llm.Error
	if errors.As(err, &le) {
		assert.NotEqual(t, llm.ErrTimeout, le.Kind)
	}
}
