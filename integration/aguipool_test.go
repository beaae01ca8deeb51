package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// aguiClients runs agui-client.mjs jobs on long-lived workers (the script's --serve mode),
// one job at a time per worker. Node's start and the client's import cost about half a CPU
// second, more than most jobs, and the suite runs hundreds of jobs on a 2-core machine. A job
// never waits for a worker: when none is idle, another starts. TestMain closes them.
var aguiClients = &aguiPool{idle: map[string][]*aguiWorker{}}

// aguiPool holds the idle workers by node binary, peers directory and lane.
type aguiPool struct {
	mu      sync.Mutex
	idle    map[string][]*aguiWorker
	closed  bool
	started int // workers started, for the pool's own test
}

// aguiWorker is one `node agui-client.mjs <lane> --serve` process.
type aguiWorker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *capBuffer
}

// errPoolClosed is returned for jobs submitted after TestMain closed the pool.
var errPoolClosed = errors.New("agui-client pool closed")

// run sends job for url to an idle worker of lane (or a new one) and returns the worker's
// report line and what the worker printed on stderr meanwhile. A worker that breaks or
// outlives ctx is killed; one that answered goes back to the pool.
func (p *aguiPool) run(ctx context.Context, node, peersDir, lane, url string, job any) (line []byte, stderr string, err error) {
	req, err := json.Marshal(map[string]any{"url": url, "job": job})
	if err != nil {
		return nil, "", fmt.Errorf("agui-client job: %w", err)
	}
	key := node + "\x00" + peersDir + "\x00" + lane
	w, err := p.get(key, node, peersDir, lane)
	if err != nil {
		return nil, "", err
	}
	w.stderr.Reset()
	type answer struct {
		line []byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		if _, err := w.stdin.Write(append(req, '\n')); err != nil {
			done <- answer{err: err}
			return
		}
		l, err := w.stdout.ReadBytes('\n')
		done <- answer{l, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			w.kill()
			return nil, w.stderr.String(), fmt.Errorf("agui-client %s %s: worker: %w", lane, url, a.err)
		}
		var failed struct {
			Error *string `json:"error"`
		}
		if json.Unmarshal(a.line, &failed) == nil && failed.Error != nil {
			p.put(key, w)
			return nil, w.stderr.String(), fmt.Errorf("agui-client %s %s: %s", lane, url, *failed.Error)
		}
		stderr = w.stderr.String()
		p.put(key, w)
		return bytes.TrimSpace(a.line), stderr, nil
	case <-ctx.Done():
		w.kill()
		<-done
		return nil, w.stderr.String(), fmt.Errorf("agui-client %s %s: %w", lane, url, ctx.Err())
	}
}

// get takes an idle worker for key or starts one.
func (p *aguiPool) get(key, node, peersDir, lane string) (*aguiWorker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if ws := p.idle[key]; len(ws) > 0 {
		w := ws[len(ws)-1]
		p.idle[key] = ws[:len(ws)-1]
		p.mu.Unlock()
		return w, nil
	}
	p.started++
	p.mu.Unlock()
	cmd := exec.Command(node, filepath.Join(peersDir, "agui-client.mjs"), lane, "--serve")
	cmd.Dir = peersDir
	w := &aguiWorker{cmd: cmd, stderr: &capBuffer{limit: logDumpLimit}}
	cmd.Stderr = w.stderr
	cmd.WaitDelay = 2 * time.Second
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("agui-client %s: %w", lane, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("agui-client %s: %w", lane, err)
	}
	w.stdout = bufio.NewReaderSize(out, 64<<10)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("agui-client %s: %w", lane, err)
	}
	return w, nil
}

// put returns a worker to the pool, or ends it when the pool is closed.
func (p *aguiPool) put(key string, w *aguiWorker) {
	p.mu.Lock()
	if !p.closed {
		p.idle[key] = append(p.idle[key], w)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	w.stop()
}

// close ends the idle workers and refuses later jobs; a job still running ends its worker
// when it returns.
func (p *aguiPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, ws := range idle {
		for _, w := range ws {
			wg.Go(w.stop)
		}
	}
	wg.Wait()
}

// stop closes the worker's stdin, which ends its job loop, and kills it if it does not exit.
func (w *aguiWorker) stop() {
	_ = w.stdin.Close()
	exited := make(chan struct{})
	go func() {
		_ = w.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(stopGrace):
		_ = w.cmd.Process.Kill()
		<-exited
	}
}

// kill ends a worker that broke or overran its job.
func (w *aguiWorker) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// capBuffer keeps the first limit bytes written to it since its last Reset: a worker's stderr
// during one job (its console lines also reach the report's warnings).
type capBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
}

// Write implements io.Writer; it never fails, dropping what is over the limit.
func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Reset empties the buffer.
func (b *capBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// String returns what the buffer holds.
func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
