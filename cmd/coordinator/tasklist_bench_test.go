package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/store"
)

type benchListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

type benchListResult struct {
	mcp.ResultBase
	Tasks []struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"tasks"`
	NextCursor string `json:"nextCursor"`
}

// BenchmarkTasksListPage measures one tasks/list page (20 tasks) of a principal holding 100
// or 100,000 tasks, through the whole path: go-sdk's client over an in-memory transport,
// the MCP surface, the engine's port, the store (SQLite; PostgreSQL when a server starts).
// "first" is the first page; "deep" the page after the 60th task (its cursor, taken once).
// Another principal holds as many tasks, so that the caller's are not the whole table.
// The tasks (a thread with a finished run of two events each) are inserted with SQL before
// the timer starts. A page should cost the same at both sizes.
//
//	go test -run '^$' -bench TasksListPage -benchtime 200x ./cmd/coordinator/
func BenchmarkTasksListPage(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, n := range []int{100, 100_000} {
			b.Run(fmt.Sprintf("%s/threads=%d", backend, n), func(b *testing.B) {
				var dsn string
				if backend == "sqlite" {
					dsn = "sqlite:" + filepath.Join(b.TempDir(), "bench.db")
				} else {
					dsn = pgtest.DSN(b)
				}
				cs := benchTaskServer(b, dsn, n)
				ctx := context.Background()
				list := func(cursor string) *benchListResult {
					page, err := mcp.CallCustomMethod[*benchListParams, *benchListResult](ctx, cs, "tasks/list", &benchListParams{Cursor: cursor})
					if err != nil {
						b.Fatal(err)
					}
					if len(page.Tasks) != 20 || page.NextCursor == "" {
						b.Fatalf("a page of %d tasks, cursor %q", len(page.Tasks), page.NextCursor)
					}
					return page
				}
				deep := ""
				for range 3 {
					deep = list(deep).NextCursor
				}
				for _, c := range []struct{ name, cursor string }{{"first", ""}, {"deep", deep}} {
					b.Run(c.name, func(b *testing.B) {
						for b.Loop() {
							list(c.cursor)
						}
					})
				}
			})
		}
	}
}

// benchTaskServer fills the store behind dsn with n tasks of the coordinator tool for alice
// and n for bob, and returns a client session of alice's on Baton's MCP surface over it.
func benchTaskServer(b testing.TB, dsn string, n int) *mcp.ClientSession {
	b.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	fillTasks(b, dsn, n)
	return taskServerOver(b, st, n)
}

// taskServerOver returns a client session of alice's on Baton's MCP surface over an engine
// on st, which holds n tasks of alice's.
func taskServerOver(b testing.TB, st store.Store, n int) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	engine, err := coordinator.New(coordinator.Config{Model: waitingModel{}, Store: st, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	if err := engine.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = engine.Stop(sctx)
	})
	cfg := config.Default()
	cfg.MCPServe.CoordinatorTool = "ask"
	cfg.MCPServe.TaskTTL = config.DefaultMCPTaskTTL
	cfg.Server.MaxThreadsPerPrincipal = 2 * n // all of alice's threads
	srv, err := newMCPServer(cfg, coordinator.NewRuns(engine, coordinator.RunsConfig{}), nil, "alice", log)
	if err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	ct, stt := mcp.NewInMemoryTransports()
	go func() { defer close(served); _ = srv.Serve(sctx, stt) }()
	b.Cleanup(func() { stop(); <-served })
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	if err := mcp.AddSendingCustomMethod[*benchListParams, *benchListResult](c, "tasks/list"); err != nil {
		b.Fatal(err)
	}
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// fillTasks inserts n finished tasks of the tool "ask" for alice and n for bob straight into
// the database behind dsn: each a thread (created a millisecond apart) whose run r1 logged
// RUN_STARTED and RUN_FINISHED.
func fillTasks(b testing.TB, dsn string, n int) {
	b.Helper()
	driver, source, series := "sqlite", strings.TrimPrefix(dsn, "sqlite:"),
		`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) SELECT i FROM s`
	if strings.HasPrefix(dsn, "postgres") {
		driver, source, series = "pgx", dsn, `SELECT generate_series(1, %d) AS i`
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tag := sha256.Sum256([]byte("ask"))
	now := time.Now()
	start, _ := agui.MarshalEvent(&agui.RunStarted{ThreadID: "@", RunID: "r1"})
	end, _ := agui.MarshalEvent(&agui.RunFinished{Base: agui.Base{Timestamp: now.UnixMilli()}, ThreadID: "@", RunID: "r1"})
	quoted := func(ev []byte) (string, string) {
		before, after, _ := strings.Cut(string(ev), "@")
		return strings.ReplaceAll(before, "'", "''"), strings.ReplaceAll(after, "'", "''")
	}
	s1, s2 := quoted(start)
	e1, e2 := quoted(end)
	base := now.Add(-time.Hour).UnixNano()
	for _, owner := range []string{"alice", "bob"} {
		id := fmt.Sprintf(`'mcp-%s-%s-' || i`, hex.EncodeToString(tag[:6]), owner)
		for _, q := range []string{
			fmt.Sprintf(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at, last_run_id, last_run_at)
				SELECT %s, '%s', '', %d + 1000000 * CAST(i AS BIGINT), %d + 1000000 * CAST(i AS BIGINT), 'r1', %d + 1000000 * CAST(i AS BIGINT) FROM (`+series+`) AS s`,
				id, owner, base, base, base, n),
			fmt.Sprintf(`INSERT INTO events (thread_id, run_id, seq, at, data)
				SELECT %s, 'r1', 1, %d, '%s' || %s || '%s' FROM (`+series+`) AS s`, id, now.UnixNano(), s1, id, s2, n),
			fmt.Sprintf(`INSERT INTO events (thread_id, run_id, seq, at, data)
				SELECT %s, 'r1', 2, %d, '%s' || %s || '%s' FROM (`+series+`) AS s`, id, now.UnixNano(), e1, id, e2, n),
		} {
			if _, err := db.ExecContext(context.Background(), q); err != nil {
				b.Fatal(err)
			}
		}
	}
}
