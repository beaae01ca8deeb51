package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgListener keeps one connection LISTENing for stop requests and turns each notification
// into a signal. NOTIFY is not durable (nothing is delivered while the connection is down),
// so a signal is also sent after every (re)connection: the receiver then looks at the rows,
// which are the requests themselves.
type pgListener struct {
	pool   *pgxpool.Pool
	sig    chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func startListener(pool *pgxpool.Pool) *pgListener {
	// The listener lives as long as the store; its Close cancels it.
	ctx, cancel := context.WithCancel(context.Background())
	l := &pgListener{pool: pool, sig: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go l.run(ctx)
	return l
}

func (l *pgListener) signal() {
	select {
	case l.sig <- struct{}{}:
	default:
	}
}

func (l *pgListener) run(ctx context.Context) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		slog.Warn("store: stop listener disconnected; reconnecting", "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listen holds one connection out of the pool (hijacked: a LISTENing connection must not go
// back to the pool) until it fails or ctx ends.
func (l *pgListener) listen(ctx context.Context) error {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	// Closed as ctx ends too: the close must not inherit it.
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{stopChannel}.Sanitize()); err != nil {
		return err
	}
	l.signal() // catch up with requests made while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		l.signal()
	}
}

func (l *pgListener) close() {
	l.cancel()
	<-l.done
}
