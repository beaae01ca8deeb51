package store

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// writeFunc is one caller's part of a write transaction. It must use the ctx it is given
// (not its caller's: see groupWriter) and must leave nothing behind in Go that a second
// call would duplicate, since a job is run again on its own when its batch fails.
type writeFunc func(ctx context.Context, tx *sql.Tx) error

// groupWriter is SQLite's single writer with group commit (design/store-group-commit.md):
// every write of the store is a job on a bounded queue, and one goroutine runs whatever
// jobs are waiting in one transaction, each inside a savepoint, so that concurrent runs pay
// one BEGIN/COMMIT (and one WAL append) between them instead of queueing for SQLite's write
// lock in its busy handler, which sleeps in steps of up to 100 ms.
//
// Each job gets its own error: a batch runs first without savepoints; if a job fails, the
// transaction is rolled back and the batch runs again with each job inside a savepoint, so
// that a job that fails is rolled back to its savepoint and the others commit. If the transaction itself fails (BEGIN, a savepoint, COMMIT), nothing of
// it was stored and every job of the batch is run again in a transaction of its own. A
// caller returns only once its job is committed (or failed), so nothing is acknowledged
// before it is in the WAL.
type groupWriter struct {
	db *sql.DB // the one writer connection (MaxOpenConns 1)
	// first holds the jobs a caller's response waits for (a run's start, its end); queue
	// the bulk that can wait (event logs, messages, work documents). Each batch takes from
	// first before queue, so that a run's start never waits behind a backlog of event logs,
	// only behind the batch being committed.
	first, queue chan *writeJob
	// starts holds the run starts: a run's first event waits for its start to commit, and
	// nothing else a run writes can come before it, so a batch takes up to half of its
	// jobs from starts first, then from first. Half, so that the runs already going (their
	// journal steps and ends, on first) still move while runs ramp up.
	starts chan *writeJob
	stop   chan struct{}
	// exited is closed when the writer goroutine has ended; jobs still queued then fail
	// with ErrClosed.
	exited chan struct{}
	// stmts are the writer connection's prepared statements by query text (nil: it could
	// not be prepared), and want the texts to prepare after the current batch (a statement
	// cannot be prepared while the one connection is in a transaction). SQLite parsing a
	// statement on every execution was an eighth of the coordinator's CPU at 1,000 runs/s.
	// Only the writer goroutine uses them.
	stmts map[string]*sql.Stmt
	want  []string
	// check, when set, is asked before each batch: an error fails every job of the batch
	// without running it (the database file was deleted: nothing written would last).
	check func() error
}

// Job states: a job is taken by the writer or abandoned by its caller, never both.
const (
	jobQueued int32 = iota
	jobTaken
	jobAbandoned
)

type writeJob struct {
	fn    writeFunc
	state atomic.Int32
	done  chan error // buffered: the writer never waits for a caller
}

const (
	// writeQueueLen bounds the jobs waiting for the writer; a caller that finds the queue
	// full waits (within its context), so memory stays bounded whatever the load.
	writeQueueLen = 1024
	// maxBatch bounds the jobs of one transaction: a job arriving while a batch commits
	// waits for all of it, and a transaction of a few dozen jobs already pays for its
	// BEGIN/COMMIT many times over.
	maxBatch = 32
	// minBulk is the part of a batch kept for bulk jobs when first is busy, so that they are
	// never starved.
	minBulk = maxBatch / 4
	// batchTimeout bounds one transaction. Statements run under it, never under a caller's
	// context: the driver interrupts a statement whose context ends, and SQLite rolls back
	// the whole transaction of an interrupted write, which would undo the other callers' jobs.
	batchTimeout = 30 * time.Second
	// maxStmts bounds the prepared statements: the store's query texts are a fixed set,
	// but an event batch's INSERT varies with the batch's size.
	maxStmts = 64
)

// newGroupWriter starts the writer on db, which must allow a single open connection.
func newGroupWriter(db *sql.DB) *groupWriter {
	w := &groupWriter{db: db, first: make(chan *writeJob, writeQueueLen), queue: make(chan *writeJob, writeQueueLen),
		starts: make(chan *writeJob, writeQueueLen),
		stop:   make(chan struct{}), exited: make(chan struct{}), stmts: make(map[string]*sql.Stmt)}
	go w.loop()
	return w
}

// do runs fn in a write transaction and returns once it is committed or has failed. A
// caller whose ctx ends while its job is still queued gets ctx's error and the job is not
// run; once the writer has taken the job, the caller waits for its outcome (bounded by
// batchTimeout), so that an error never hides a committed write.
func (w *groupWriter) do(ctx context.Context, fn writeFunc) error { return w.run(ctx, w.first, fn) }

// doStart is do for a run's start: it goes before the jobs of do (see starts).
func (w *groupWriter) doStart(ctx context.Context, fn writeFunc) error {
	return w.run(ctx, w.starts, fn)
}

// doBulk is do for a write that nobody's response waits for: it goes after the jobs of do.
func (w *groupWriter) doBulk(ctx context.Context, fn writeFunc) error {
	return w.run(ctx, w.queue, fn)
}

func (w *groupWriter) run(ctx context.Context, q chan<- *writeJob, fn writeFunc) error {
	j := &writeJob{fn: fn, done: make(chan error, 1)}
	select {
	case q <- j:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.exited:
		return ErrClosed
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return ctx.Err()
		}
	case <-w.exited:
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return ErrClosed
		}
	}
	return <-j.done
}

// close stops the writer after the batch it is running and waits for it.
func (w *groupWriter) close() {
	close(w.stop)
	<-w.exited
	for _, st := range w.stmts {
		if st != nil {
			_ = st.Close()
		}
	}
}

// stmt returns the prepared statement of query, or nil when it is not prepared yet (it
// is then prepared after the current batch). Writer goroutine only.
func (w *groupWriter) stmt(query string) *sql.Stmt {
	if st, ok := w.stmts[query]; ok {
		return st
	}
	if len(w.stmts)+len(w.want) < maxStmts && !slices.Contains(w.want, query) {
		w.want = append(w.want, query)
	}
	return nil
}

// prepareWanted prepares the statements asked for during the last batch.
func (w *groupWriter) prepareWanted() {
	for _, q := range w.want {
		// The writer goroutine serves every caller: its statements are bounded by the
		// batch's timeout, not by one caller's context.
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		st, err := w.db.PrepareContext(ctx, q)
		cancel()
		if err != nil {
			st = nil // not asked again: it runs unprepared
		}
		w.stmts[q] = st
	}
	w.want = w.want[:0]
}

// exec runs query in tx, prepared where it can be.
func (w *groupWriter) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := w.stmt(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

func (w *groupWriter) loop() {
	defer close(w.exited)
	batch := make([]*writeJob, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-w.stop:
			return
		case j := <-w.starts:
			batch = take(batch, j)
		case j := <-w.first:
			batch = take(batch, j)
		case j := <-w.queue:
			batch = take(batch, j)
		}
		batch = fillAll(batch, w)
		if len(batch) < maxBatch {
			// The callers the last commit released, runnable now, get to run first: most
			// write again at once (a run's next event, step or checkpoint), and those
			// writes then share this transaction instead of each paying a commit of its
			// own. An idle process yields to nobody: the batch goes at once.
			runtime.Gosched()
			batch = fillAll(batch, w)
		}
		if len(batch) > 0 {
			w.commit(batch)
		}
		if len(w.want) > 0 {
			w.prepareWanted()
		}
		clear(batch[:cap(batch)])
	}
}

// fillAll adds the jobs waiting on the writer's queues to batch: starts first (up to half
// of the batch), then those a response waits for (leaving a quarter for the bulk), then the
// bulk, then whatever room is left.
func fillAll(batch []*writeJob, w *groupWriter) []*writeJob {
	batch = fill(batch, w.starts, maxBatch/2)
	batch = fill(batch, w.first, maxBatch-minBulk)
	batch = fill(batch, w.queue, maxBatch)
	batch = fill(batch, w.first, maxBatch)
	return fill(batch, w.starts, maxBatch)
}

// fill adds the jobs waiting on q to batch, up to n jobs in all.
func fill(batch []*writeJob, q <-chan *writeJob, n int) []*writeJob {
	for len(batch) < n {
		select {
		case j := <-q:
			batch = take(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// take adds j to batch unless its caller has given up on it.
func take(batch []*writeJob, j *writeJob) []*writeJob {
	if j.state.CompareAndSwap(jobQueued, jobTaken) {
		batch = append(batch, j)
	}
	return batch
}

// commit runs batch and gives each job its outcome.
func (w *groupWriter) commit(batch []*writeJob) {
	if w.check != nil {
		if err := w.check(); err != nil {
			for _, j := range batch {
				j.done <- err
			}
			return
		}
	}
	// A batch holds many callers' jobs: one caller going away must not roll back the
	// others', so only the batch's timeout bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(batch) > 1 {
		// First without savepoints: almost every batch has no failing job, and a SAVEPOINT
		// and a RELEASE around each job were two statements for every one a job ran. When a
		// job fails, nothing of the transaction is kept and the batch runs again with them.
		errs, err := w.together(ctx, batch, false)
		if errors.Is(err, errJobFailed) {
			errs, err = w.together(ctx, batch, true)
		}
		if err == nil {
			for i, j := range batch {
				j.done <- errs[i]
			}
			return
		}
		// The transaction failed as a whole: nothing of it is stored. Each job is run again
		// on its own, so that one job's failure is its own.
	}
	for _, j := range batch {
		j.done <- w.alone(ctx, j.fn)
	}
}

// alone runs fn in a transaction of its own.
func (w *groupWriter) alone(ctx context.Context, fn writeFunc) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// errJobFailed is together's answer, without savepoints, when a job failed: the whole
// transaction was rolled back.
var errJobFailed = errors.New("store: a job of the batch failed")

// together runs the jobs of batch in one transaction. With savepoints, each job runs in a
// savepoint that is rolled back when it fails; without, the first job that fails rolls
// back the whole transaction and together returns errJobFailed. It returns each job's
// error, or an error of the transaction itself (then nothing was committed).
func (w *groupWriter) together(ctx context.Context, batch []*writeJob, savepoints bool) ([]error, error) {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(batch))
	for i, j := range batch {
		if !savepoints {
			if err := j.fn(ctx, tx); err != nil {
				_ = tx.Rollback()
				return nil, errJobFailed
			}
			continue
		}
		if _, err := w.exec(ctx, tx, `SAVEPOINT job`); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		errs[i] = j.fn(ctx, tx)
		if errs[i] != nil {
			// ROLLBACK TO keeps the savepoint open; RELEASE then closes it. Either
			// failing means the transaction is gone (SQLite rolls back all of it on some
			// errors), and the batch is run again job by job.
			if _, err := w.exec(ctx, tx, `ROLLBACK TO job`); err != nil {
				_ = tx.Rollback()
				return nil, err
			}
		}
		if _, err := w.exec(ctx, tx, `RELEASE job`); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return errs, nil
}
