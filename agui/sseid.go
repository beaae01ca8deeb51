package agui

import (
	"bytes"
	"fmt"
	"strconv"
)

// appendFrameID appends one SSE frame with an id line, "id: <id>\ndata: <json>\n\n". The id
// is the event's sequence number in its run (DESIGN §3): a client that reconnects sends the
// last one it saw as Last-Event-ID.
func appendFrameID(dst []byte, id int64, ev Event) ([]byte, error) {
	n := len(dst)
	dst = appendID(dst, id)
	dst, err := appendFrame(dst, ev)
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

func appendID(dst []byte, id int64) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, id, 10)
	return append(dst, '\n')
}

// WriteEventsFrom writes evs as frames numbered first, first+1, ... with one write and one
// flush, like WriteEvents.
func (s *SSEWriter) WriteEventsFrom(first int64, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.frame()
	for i, ev := range evs {
		var err error
		if buf, err = appendFrameID(buf, first+int64(i), ev); err != nil {
			return err
		}
	}
	return s.send(buf)
}

// RawFrame is an event already encoded as JSON (a stored event being replayed) with its id.
type RawFrame struct {
	ID   int64
	Data []byte
}

// WriteRaw writes already-encoded events as frames with one write and one flush. Data must
// be one JSON object without raw newlines (what MarshalEvent produces); anything else is
// refused, so that a damaged log can never break the framing of a stream.
func (s *SSEWriter) WriteRaw(frames []RawFrame) error {
	if len(frames) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf, err := appendRawFrames(s.frame(), frames)
	if err != nil {
		return err
	}
	return s.send(buf)
}

// appendRawFrames appends already-encoded events as frames to dst, with WriteRaw's checks:
// on an error dst is returned as it was.
func appendRawFrames(dst []byte, frames []RawFrame) ([]byte, error) {
	n := len(dst)
	for _, f := range frames {
		if len(f.Data) == 0 || f.Data[0] != '{' || bytes.ContainsAny(f.Data, "\r\n") {
			return dst[:n], fmt.Errorf("agui: stored event %d is not a one-line JSON object", f.ID)
		}
		dst = appendID(dst, f.ID)
		dst = append(dst, "data: "...)
		dst = append(dst, f.Data...)
		dst = append(dst, '\n', '\n')
	}
	return dst, nil
}
