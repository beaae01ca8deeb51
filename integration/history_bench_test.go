package integration

// The 25 × 1 MiB thread (DESIGN §13, design/history.md): one thread, 25 user messages of
// 1 MiB, one per run, each run sending only its new message (the coordinator prepends the
// stored history, as for a client under the body cap). Measured on the coordinator binary
// as a child process: the store on disk (file, WAL and shared memory for SQLite; the
// database's growth for PostgreSQL) against the conversation's bytes, the heap peak (from
// the runtime's own GC trace, GODEBUG=gctrace=1: the heap at the start of each GC, the
// largest it gets) and the RSS peak (VmHWM), and the size of every model request (a proxy in
// front of the fake model counts each body and forwards a small stand-in, so that the test
// process does not keep them).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

const (
	// longThreadMessages and longThreadSize are the thread of DESIGN §13.
	longThreadMessages = 25
	longThreadSize     = 1 << 20
	// longThreadWindow is the model's context window in tokens (gpt-4.1's): it holds three
	// of the messages; the coordinator's estimate is four bytes a token, and the fake
	// model's window counts four characters a token.
	longThreadWindow = 1_047_576
	// summaryPrompt starts the system prompt of a compaction's summary request.
	summaryPrompt = "You maintain the memory of a conversation"
	// benchCharsHeader carries the size of the model request the proxy stood in for.
	benchCharsHeader = "X-Bench-Chars"
)

// requestSizes records the size of every model request the coordinator sent.
type requestSizes struct {
	mu sync.Mutex
	// bytes and summary are each request's body size and whether it asked for a summary.
	bytes   []int
	summary []bool
}

// last is the size of the last request that was not a summary request, and the largest.
func (s *requestSizes) figures() (last, largest, summaries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.bytes {
		largest = max(largest, n)
		if s.summary[i] {
			summaries++
		} else {
			last = n
		}
	}
	return last, largest, summaries
}

// startMeasuredModel starts the fake model that answers the thread's turns ("noted") and
// summary requests, refusing a request longer than window characters (0: any) as OpenAI
// does, behind a proxy that counts each request's bytes and forwards a small stand-in
// (its system prompt's start, its last message's start, and the request's characters in a
// header). It returns the proxy's URL.
func startMeasuredModel(tb testing.TB, window int, sizes *requestSizes) string {
	tb.Helper()
	model := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		chars, _ := strconv.Atoi(req.Header.Get(benchCharsHeader))
		if window > 0 && chars > window {
			return fakellm.TooLong(window/4, chars/4)
		}
		if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, summaryPrompt) {
			return fakellm.Reply{Text: "The user sent long messages of random text; each was noted."}
		}
		return fakellm.Reply{Text: "noted"}
	})
	tb.Cleanup(model.Close)
	target, err := url.Parse(model.URL)
	require.NoError(tb, err)
	fwd := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			fwd.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req fakellm.Request
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		small := fakellm.Request{Model: req.Model, Stream: req.Stream, StreamOptions: req.StreamOptions}
		summary := len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, summaryPrompt)
		if len(req.Messages) > 0 {
			first, last := req.Messages[0], req.Messages[len(req.Messages)-1]
			first.Content = first.Content[:min(len(first.Content), 256)]
			last.Content = last.Content[:min(len(last.Content), 256)]
			small.Messages = []fakellm.Message{first, last}
		}
		sizes.mu.Lock()
		sizes.bytes = append(sizes.bytes, len(body))
		sizes.summary = append(sizes.summary, summary)
		sizes.mu.Unlock()
		stand, err := json.Marshal(small)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(stand))
		r.ContentLength = int64(len(stand))
		r.Header.Set(benchCharsHeader, strconv.Itoa(req.Chars()))
		fwd.ServeHTTP(w, r)
	}))
	tb.Cleanup(proxy.Close)
	return proxy.URL + target.Path
}

// longMessage is message i of the thread: size bytes of base64 from a fixed seed (random
// text, so that neither store compresses it away).
func longMessage(i, size int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 25))
	raw := make([]byte, size*3/4)
	for j := range raw {
		raw[j] = byte(rng.Uint32())
	}
	s := fmt.Sprintf("%03d ", i) + base64.StdEncoding.EncodeToString(raw)
	return s[:size]
}

// gcTrace matches a GODEBUG=gctrace=1 line's heap sizes: at the start of the GC, at its
// end, and live after it (MiB).
var gcTrace = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// heapPeak is the largest heap the GC trace in stderr reports (MiB), the largest heap
// live after a GC, and how many GCs it saw.
func heapPeak(stderr string) (peak, live, gcs int) {
	for _, line := range strings.Split(stderr, "\n") {
		m := gcTrace.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		gcs++
		for _, s := range m[1:3] {
			n, _ := strconv.Atoi(s)
			peak = max(peak, n)
		}
		n, _ := strconv.Atoi(m[3])
		live = max(live, n)
	}
	return peak, live, gcs
}

// rssPeak is the process's peak resident set (VmHWM), in bytes.
func rssPeak(tb testing.TB, p *proc) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		skipOrFail(tb, "no /proc: "+err.Error())
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// longThreadStore is a store the thread runs on: its DSN, and its size on disk.
type longThreadStore struct {
	dsn  string
	size func() int64
	// detail says where the bytes are ("" when the store cannot tell).
	detail func() string
	// vacuumed is the size once dead row versions are reclaimed (PostgreSQL's VACUUM, which
	// autovacuum runs in time); nil when the store has none.
	vacuumed func() int64
}

// sqliteLongStore is a SQLite file in a fresh directory; its size is the file, its WAL
// and its shared memory.
func sqliteLongStore(tb testing.TB) longThreadStore {
	dir := tb.TempDir()
	path := filepath.Join(dir, "baton.db")
	return longThreadStore{dsn: "sqlite:" + path, size: func() int64 {
		var n int64
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if fi, err := os.Stat(path + suffix); err == nil {
				n += fi.Size()
			}
		}
		return n
	}}
}

// postgresLongStore is a fresh PostgreSQL database; its size is pg_database_size.
func postgresLongStore(tb testing.TB) longThreadStore {
	dsn := pgtest.DSN(tb)
	return longThreadStore{dsn: dsn, size: func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(tb, err)
		defer conn.Close(ctx)
		var n int64
		require.NoError(tb, conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n))
		return n
	}, vacuumed: func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(tb, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `VACUUM`)
		require.NoError(tb, err)
		var n int64
		require.NoError(tb, conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n))
		return n
	}, detail: func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(tb, err)
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT relname, pg_total_relation_size(oid), n_dead_tup FROM pg_class
			LEFT JOIN pg_stat_user_tables USING (relname) WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
			ORDER BY 2 DESC LIMIT 4`)
		require.NoError(tb, err)
		defer rows.Close()
		var parts []string
		for rows.Next() {
			var name string
			var size int64
			var dead *int64
			require.NoError(tb, rows.Scan(&name, &size, &dead))
			parts = append(parts, fmt.Sprintf("%s %.1f MiB (dead tuples %v)", name, float64(size)/(1<<20), deref(dead)))
		}
		return strings.Join(parts, ", ")
	}}
}

// deref is *p, or 0.
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// longThreadFigures are what one thread of 25 × 1 MiB measured.
type longThreadFigures struct {
	storeGrowth, data, vacuumed int64
	heapPeakMiB, liveMiB, gcs   int
	rssPeak                     int64
	lastReq, largestReq, sumReq int
	failedRuns                  int
}

// runLongThread runs the thread on a coordinator binary bin with store st; history adds
// the config's llm.context_window and history section (the baseline binary knows neither).
// A run that fails (the baseline, whose model request outgrows what the model takes) is
// counted, not fatal.
func runLongThread(b *testing.B, bin string, st longThreadStore, compaction bool) longThreadFigures {
	b.Helper()
	sizes := &requestSizes{}
	window := 0
	if compaction {
		window = 4 * longThreadWindow
	}
	modelURL := startMeasuredModel(b, window, sizes)
	cfg := "listen: 127.0.0.1:" + strconv.Itoa(freePort(b)) + "\n" +
		"server:\n  shutdown_grace: 3s\n  max_body_bytes: 4194304\n" +
		"llm:\n  provider: openai\n  base_url: \"" + modelURL + "\"\n  model: fake-model\n  api_key_env: " + llmKeyEnv + "\n  timeout: 5m\n"
	if compaction {
		cfg += "  context_window: " + strconv.Itoa(longThreadWindow) + "\n"
	}
	cfg += "limits:\n  max_run_seconds: 600\nstore: \"" + st.dsn + "\"\n"
	path := filepath.Join(b.TempDir(), "baton.yaml")
	require.NoError(b, os.WriteFile(path, []byte(cfg), 0o600))
	p := startProc(b, "coordinator", []string{bin, "--config", path, "--log-level", "warn"},
		[]string{llmKeyEnv + "=fake-key", "GODEBUG=gctrace=1"}, readyOnLine(`Baton coordinator listening on (http://\S+)`))
	base := p.Match[1]
	before := st.size()
	var f longThreadFigures
	thread := newThreadID("long")
	for i := range longThreadMessages {
		text := longMessage(i, longThreadSize)
		f.data += int64(len(text))
		body, err := json.Marshal(runInput(thread, fmt.Sprintf("r%02d", i), text))
		require.NoError(b, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		resp, err := postAGUI(ctx, base, body)
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode, "run %d", i)
		evs, err := readSSE(resp.Body, nil)
		resp.Body.Close()
		cancel()
		require.NoError(b, err)
		require.NotEmpty(b, evs)
		if last := evs[len(evs)-1]; last["type"] != "RUN_FINISHED" {
			f.failedRuns++
			b.Logf("run %d ended with %v", i, last)
		}
	}
	f.rssPeak = rssPeak(b, p)
	f.storeGrowth = st.size() - before
	if st.detail != nil {
		b.Logf("store: %s", st.detail())
	}
	require.Equal(b, 0, p.Stop(), "the coordinator exits cleanly")
	if st.vacuumed != nil {
		f.vacuumed = st.vacuumed() - before
	}
	_, stderr := p.Logs()
	f.heapPeakMiB, f.liveMiB, f.gcs = heapPeak(stderr)
	require.Positive(b, f.gcs, "the GC trace was read")
	f.lastReq, f.largestReq, f.sumReq = sizes.figures()
	return f
}

// report writes the figures as metrics of b and as a log line.
func (f longThreadFigures) report(b *testing.B) {
	const mib = 1 << 20
	b.ReportMetric(float64(f.storeGrowth)/mib, "store-MiB")
	b.ReportMetric(float64(f.storeGrowth)/float64(f.data), "store/data")
	if f.vacuumed > 0 {
		b.ReportMetric(float64(f.vacuumed)/float64(f.data), "vacuumed/data")
		b.Logf("after VACUUM: store +%.1f MiB (%.2fx)", float64(f.vacuumed)/(1<<20), float64(f.vacuumed)/float64(f.data))
	}
	b.ReportMetric(float64(f.heapPeakMiB), "heap-peak-MiB")
	b.ReportMetric(float64(f.liveMiB), "live-peak-MiB")
	b.ReportMetric(float64(f.rssPeak)/mib, "rss-peak-MiB")
	b.ReportMetric(float64(f.lastReq)/mib, "last-request-MiB")
	b.ReportMetric(float64(f.largestReq)/mib, "largest-request-MiB")
	b.ReportMetric(float64(f.sumReq), "summary-requests")
	b.ReportMetric(float64(f.failedRuns), "failed-runs")
	b.Logf("data %.1f MiB; store +%.1f MiB (%.2fx); heap peak %d MiB (live after a GC at most %d MiB; %d GCs), RSS peak %.0f MiB; last model request %.2f MiB, largest %.2f MiB, %d summary requests; %d runs failed",
		float64(f.data)/mib, float64(f.storeGrowth)/mib, float64(f.storeGrowth)/float64(f.data), f.heapPeakMiB, f.liveMiB, f.gcs,
		float64(f.rssPeak)/mib, float64(f.lastReq)/mib, float64(f.largestReq)/mib, f.sumReq, f.failedRuns)
}

// BenchmarkLongThread: the thread of 25 messages of 1 MiB (DESIGN §13) on SQLite and
// PostgreSQL, with compaction (a model window of 1,047,576 tokens that the fake model
// enforces). Targets: the store's growth under 2× the conversation, the heap peak under
// 3× the largest message + 64 MiB, every model request within the window. With
// BATON_BENCH_BASELINE_BIN naming a coordinator binary built from before the history work
// (91f8316), the same thread runs on it too, in the same run, with a model that takes any
// request (it would refuse the baseline's from the fourth message on); with
// BATON_BENCH_BASELINE_COMPACTS set, the baseline is a build with compaction and gets the
// window and model the tree's binary gets. Every iteration is a
// fresh coordinator and store: run it with -benchtime 1x.
//
//	go test -run '^$' -bench BenchmarkLongThread -benchtime 1x -timeout 30m ./integration/
func BenchmarkLongThread(b *testing.B) {
	bin, ok := buildBinaries(b)["coordinator"]
	if !ok {
		b.Fatal("cmd/coordinator has no Go files to build")
	}
	stores := []struct {
		name string
		open func(testing.TB) longThreadStore
	}{{"sqlite", sqliteLongStore}, {"postgres", postgresLongStore}}
	old := os.Getenv("BATON_BENCH_BASELINE_BIN")
	for _, s := range stores {
		if only := os.Getenv("BATON_BENCH_STORES"); only != "" && !strings.Contains(only, s.name) {
			continue
		}
		b.Run(s.name, func(b *testing.B) {
			for range b.N {
				f := runLongThread(b, bin, s.open(b), true)
				f.report(b)
				if f.failedRuns > 0 {
					b.Errorf("%d runs failed", f.failedRuns)
				}
				if f.largestReq > 4*longThreadWindow+(64<<10) {
					b.Errorf("a model request of %d bytes passed the window", f.largestReq)
				}
			}
		})
		if old == "" {
			continue
		}
		// A baseline that knows the history section (a build with compaction) gets the same
		// window and model as the tree's binary.
		compacts := os.Getenv("BATON_BENCH_BASELINE_COMPACTS") != ""
		b.Run(s.name+"-baseline", func(b *testing.B) {
			for range b.N {
				runLongThread(b, old, s.open(b), compacts).report(b)
			}
		})
	}
}
