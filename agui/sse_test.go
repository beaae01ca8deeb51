package agui

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flushCounter is a ResponseWriter that counts flushes and can fail writes.
type flushCounter struct {
	header  http.Header
	buf     bytes.Buffer
	status  int
	flushes int
	failErr error
}

func (f *flushCounter) Header() http.Header {
	if f.header == nil {
		f.header = http.Header{}
	}
	return f.header
}

func (f *flushCounter) Write(p []byte) (int, error) {
	if f.failErr != nil {
		return 0, f.failErr
	}
	if f.status == 0 {
		f.status = http.StatusOK
	}
	return f.buf.Write(p)
}

func (f *flushCounter) WriteHeader(code int) { f.status = code }
func (f *flushCounter) Flush()               { f.flushes++ }

// plainWriter is a ResponseWriter that cannot flush.
type plainWriter struct {
	h   http.Header
	buf bytes.Buffer
}

func (p *plainWriter) Header() http.Header         { return p.h }
func (p *plainWriter) Write(b []byte) (int, error) { return p.buf.Write(b) }
func (p *plainWriter) WriteHeader(int)             {}

func TestSSEWriter(t *testing.T) {
	t.Parallel()
	w := &flushCounter{}
	s := NewSSEWriter(w)
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
	assert.Equal(t, "no", w.Header().Get("X-Accel-Buffering"))

	require.NoError(t, s.Start())
	assert.Equal(t, http.StatusOK, w.status)
	assert.Equal(t, 1, w.flushes)

	require.NoError(t, s.WriteEvent(&TextMessageContent{MessageID: "m1", Delta: "a"}))
	assert.Equal(t, 2, w.flushes)
	require.NoError(t, s.Ping())
	assert.Equal(t, 3, w.flushes)
	require.NoError(t, s.WriteEvent(&TextMessageEnd{MessageID: "m1"}))
	assert.Equal(t, 4, w.flushes)

	assert.Equal(t,
		`data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a"}`+"\n\n"+
			": ping\n\n"+
			`data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}`+"\n\n",
		w.buf.String())
}

func TestSSEWriterErrors(t *testing.T) {
	t.Parallel()
	t.Run("encode error writes nothing", func(t *testing.T) {
		w := &flushCounter{}
		s := NewSSEWriter(w)
		require.Error(t, s.WriteEvent(&Custom{Name: "x", Value: func() {}}))
		assert.Zero(t, w.buf.Len())
		assert.Zero(t, w.flushes)
	})
	t.Run("write error", func(t *testing.T) {
		w := &flushCounter{failErr: errors.New("broken pipe")}
		s := NewSSEWriter(w)
		err := s.WriteEvent(&RunError{Message: "x"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "broken pipe")
		require.Error(t, s.Ping())
	})
	t.Run("writer without flush", func(t *testing.T) {
		s := NewSSEWriter(&plainWriter{h: http.Header{}})
		require.ErrorIs(t, s.WriteEvent(&RunError{Message: "x"}), http.ErrNotSupported)
	})
	t.Run("huge frame does not pin its buffer", func(t *testing.T) {
		w := &flushCounter{}
		s := NewSSEWriter(w)
		require.NoError(t, s.WriteEvent(&TextMessageContent{MessageID: "m", Delta: strings.Repeat("x", 1<<20)}))
		assert.Nil(t, s.bp, "no frame buffer is kept between writes")
		require.NoError(t, s.WriteEvent(&TextMessageContent{MessageID: "m", Delta: "y"}))
		assert.True(t, strings.HasSuffix(w.buf.String(), `"delta":"y"}`+"\n\n"))
	})
}

// TestSSEWriterConcurrentPing writes events and pings from different goroutines: every frame
// on the wire must stay intact.
func TestSSEWriterConcurrentPing(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	s := NewSSEWriter(w)
	const n = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for range n {
			assert.NoError(t, s.Ping())
		}
	})
	wg.Go(func() {
		for range n {
			assert.NoError(t, s.WriteEvent(&TextMessageContent{MessageID: "m1", Delta: "hello world"}))
		}
	})
	wg.Wait()

	frames := strings.Split(strings.TrimSuffix(w.Body.String(), "\n\n"), "\n\n")
	require.Len(t, frames, 2*n)
	var events int
	for _, f := range frames {
		if f == ": ping" {
			continue
		}
		data, ok := strings.CutPrefix(f, "data: ")
		require.True(t, ok, "frame %q", f)
		ev, err := DecodeEvent([]byte(data))
		require.NoError(t, err)
		assert.Equal(t, &TextMessageContent{MessageID: "m1", Delta: "hello world"}, ev)
		events++
	}
	assert.Equal(t, n, events)
}

// discardWriter is the cheapest possible flushing ResponseWriter, so that the benchmarks
// measure Baton's own cost.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

var benchEvent = &TextMessageContent{
	Base:      Base{Timestamp: 1700000000000},
	MessageID: "msg_01HZX3J6M2Q8N4V7K9T5R0B1C2",
	Delta:     "The research agent found three relevant sources; summarising them now.",
}

func BenchmarkAppendFrame(b *testing.B) {
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = appendFrame(buf[:0], benchEvent)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkSSEWriter(b *testing.B) {
	s := NewSSEWriter(&discardWriter{h: http.Header{}})
	b.ReportAllocs()
	for b.Loop() {
		if err := s.WriteEvent(benchEvent); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSequencerSSE is the full per-event path of a run: ordering check, timestamp,
// encoding, write and flush.
func BenchmarkSequencerSSE(b *testing.B) {
	s := NewSequencer(NewSSEWriter(&discardWriter{h: http.Header{}}).WriteEvent, SequencerOptions{})
	if err := s.Emit(&RunStarted{ThreadID: "t1", RunID: "r1"}); err != nil {
		b.Fatal(err)
	}
	if err := s.Emit(&TextMessageStart{MessageID: benchEvent.MessageID}); err != nil {
		b.Fatal(err)
	}
	ev := *benchEvent
	b.ReportAllocs()
	for b.Loop() {
		ev.Timestamp = 0
		if err := s.Emit(&ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkDecodeRunAgentInput(b *testing.B) {
	body := []byte(bodyFull)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRunAgentInput(bytes.NewReader(body), 0); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSSEWriterWriteEvents(t *testing.T) {
	t.Parallel()
	w := &flushCounter{}
	s := NewSSEWriter(w)
	require.NoError(t, s.WriteEvents(nil))
	assert.Zero(t, w.flushes, "nothing to write, nothing flushed")
	require.NoError(t, s.WriteEvents([]Event{
		&TextMessageStart{MessageID: "m1", Role: "assistant"},
		&TextMessageContent{MessageID: "m1", Delta: ""},
		&TextMessageEnd{MessageID: "m1"},
	}))
	assert.Equal(t, 1, w.flushes, "a burst is flushed once")
	assert.Equal(t,
		`data: {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`+"\n\n"+
			`data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":""}`+"\n\n"+
			`data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}`+"\n\n",
		w.buf.String())

	failing := &flushCounter{failErr: errors.New("gone")}
	assert.Error(t, NewSSEWriter(failing).WriteEvents([]Event{&TextMessageEnd{MessageID: "m"}}))
}
