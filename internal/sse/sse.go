// Package sse reads the events of a Server-Sent Events stream with a small, pooled buffer
// (design/lean-transport.md): most events fit in 1 KiB, an idle stream holds nothing bigger, and an
// event that does not fit grows a buffer of its own, bounded by the caller's limit.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"iter"
	"sync"
)

// initialBuffer is the buffer a stream starts with.
const initialBuffer = 1024

// ErrEventTooLarge reports an event over the caller's limit.
var ErrEventTooLarge = errors.New("an SSE event is larger than the limit")

// readerPool recycles the small line readers of ended streams.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, initialBuffer) }}

// Read yields the data of each event of an SSE stream (data lines joined by "\n", as
// WHATWG says; other fields ignored). Lines are read with a small buffer; an event that
// does not fit grows a buffer of its own, up to max bytes, which is dropped once the
// event is delivered, so that a stream idle after a large event holds nothing large.
// The yielded slice is valid until the next iteration.
func Read(body io.Reader, max int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		br := readerPool.Get().(*bufio.Reader)
		br.Reset(body)
		defer func() { br.Reset(nil); readerPool.Put(br) }()
		var event []byte
		// As in a2a-go's reader: an event with no data (or only empty data lines) is not
		// delivered, and empty data lines before the first non-empty one add nothing.
		flush := func() bool {
			if len(event) == 0 {
				return true
			}
			ok := yield(event, nil)
			if cap(event) > 4*initialBuffer {
				event = nil
			} else {
				event = event[:0]
			}
			return ok
		}
		var line []byte // a line longer than br's buffer, assembled
		for {
			chunk, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				if len(line)+len(chunk) > max {
					yield(nil, ErrEventTooLarge)
					return
				}
				line = append(line, chunk...)
				continue
			}
			if err != nil && !(errors.Is(err, io.EOF) && len(chunk)+len(line) > 0) {
				if errors.Is(err, io.EOF) {
					flush()
					return
				}
				yield(nil, err)
				return
			}
			full := chunk
			if line != nil {
				line = append(line, chunk...)
				full = line
			}
			full = bytes.TrimSuffix(full, []byte("\n"))
			full = bytes.TrimSuffix(full, []byte("\r"))
			if len(full) == 0 {
				if !flush() {
					return
				}
			} else if data, ok := bytes.CutPrefix(full, []byte("data:")); ok {
				data = bytes.TrimPrefix(data, []byte(" "))
				if len(event)+len(data)+1 > max {
					yield(nil, ErrEventTooLarge)
					return
				}
				if len(event) > 0 {
					event = append(event, '\n')
				}
				event = append(event, data...)
			}
			line = nil
			if err != nil { // EOF after a last line without its newline
				flush()
				return
			}
		}
	}
}
