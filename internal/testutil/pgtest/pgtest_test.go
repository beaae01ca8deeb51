package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// TestFreshDatabases checks that each test gets its own empty database on a working server.
func TestFreshDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls gave the same database %q", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE x (v int); INSERT INTO x VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database b sees a's table")
	}
}

// TestPrivateStopStart checks that a private server stops (connections fail) and starts
// again on the same address with its data intact.
func TestPrivateStopStart(t *testing.T) {
	ctx := context.Background()
	s := Private(t)
	c, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	_ = c.Close(ctx)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(ctx, s.DSN); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int
	if err := c.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("after a restart: v=%d err=%v", v, err)
	}
}
