package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return &readCountingConn{Conn: c, read: l.read}, nil
}

type readCountingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *readCountingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// A client that sends 17.9 MB of junk after its request costs the server a bounded read: the
// stream goes through net/http, which reads ahead at most a byte while a handler runs and
// then at most a request head's worth (the junk is no request), so the server reads well
// under 2 MiB of it and the connection is closed; the run itself completes.
func TestJunkAfterARequestIsNotRead(t *testing.T) {
	const junk = 17_900_000
	release := make(chan struct{})
	close(release)
	e := newStartedEngine(t, coordinator.Config{Model: blockingModel{release: release}})
	var read atomic.Int64
	srv := httptest.NewUnstartedServer(New(Config{Engine: runsOf(e)}))
	srv.Listener = countingListener{srv.Listener, &read}
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
	})

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	b := body("junk", "r1", "")
	head, err := fmt.Fprintf(c, "POST /agui HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", srv.Listener.Addr(), len(b), b)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var sent atomic.Int64
	wg.Go(func() {
		chunk := []byte(strings.Repeat("\x00junk\xff", 8<<10))
		for sent.Load() < junk {
			n, err := c.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return // the server closed the connection
			}
		}
	})

	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	evs := readEvents(t, resp)
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "the run completes")
	// The server closes the connection once it has read a head's worth of junk.
	_, err = io.Copy(io.Discard, br)
	_ = err // a reset or EOF: either way the server is done with the connection
	_ = c.Close()
	wg.Wait()
	junkRead := read.Load() - int64(head)
	t.Logf("junk sent %d bytes, read by the server %d bytes", sent.Load(), junkRead)
	assert.Less(t, junkRead, int64(2<<20), "the server reads a bounded part of the junk")
}
