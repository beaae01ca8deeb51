package runs

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of the port; each surface maps them to its protocol's answer.
var (
	// ErrThreadBusy means the thread already has an active run (HTTP 409).
	ErrThreadBusy = errors.New("thread has an active run")
	// ErrShuttingDown means the engine no longer accepts runs (HTTP 503).
	ErrShuttingDown = errors.New("coordinator is shutting down")
	// ErrRunNotFound means no such run of this principal is known (HTTP 404).
	ErrRunNotFound = errors.New("run not found")
	// ErrRunFinished means the run has already ended (HTTP 409).
	ErrRunFinished = errors.New("run already finished")
	// ErrThreadNotFound means no such thread of this principal (HTTP 404): another
	// principal's thread is not found either, so that nobody learns which exist.
	ErrThreadNotFound = errors.New("thread not found")
	// ErrForbidden means the thread belongs to another principal (HTTP 403).
	ErrForbidden = errors.New("thread belongs to another principal")
	// ErrTooManyThreads means the run would create a thread beyond the principal's cap
	// (HTTP 429).
	ErrTooManyThreads = errors.New("too many threads for this principal")
	// ErrTooManyRuns means the run would go beyond the cap of active runs it was started
	// with (server.max_active_runs; HTTP 503, retry later).
	ErrTooManyRuns = errors.New("too many active runs")
	// ErrThreadExpired means the thread was deleted by server.thread_retention: reads say
	// so (404 THREAD_EXPIRED) and a new run on its id is refused (410 THREAD_EXPIRED).
	ErrThreadExpired = errors.New("thread expired")
	// ErrTooDeep refuses a run deeper than server.max_depth.
	ErrTooDeep = errors.New("nesting too deep")
	// ErrUnavailable means the store could not be read or written (HTTP 503
	// STORE_UNAVAILABLE): never "not found".
	ErrUnavailable = errors.New("the store is unavailable")
	// ErrEventsExpired means the run's events are no longer kept (server.event_retention;
	// HTTP 410 EVENTS_EXPIRED).
	ErrEventsExpired = errors.New("the run's events are no longer kept")
	// ErrBadPosition means a follow position that is not an event of the run (HTTP 400
	// INVALID_LAST_EVENT_ID).
	ErrBadPosition = errors.New("the position is not an event of this run")
	// ErrTooManyFollowers means the run, or the principal, has as many followers as it may
	// (server.max_followers_per_run; HTTP 429).
	ErrTooManyFollowers = errors.New("too many streams follow this run")
	// ErrPrincipalFollowers means the principal follows as many streams as it may
	// (server.max_followers_per_principal; HTTP 429). It wraps ErrTooManyFollowers.
	ErrPrincipalFollowers = fmt.Errorf("%w: the principal follows too many streams", ErrTooManyFollowers)
	// ErrTaskNotFound means no A2A task of this principal has the id.
	ErrTaskNotFound = errors.New("task not found")
	// ErrTaskExists means a new A2A task's id is taken.
	ErrTaskExists = errors.New("task exists")
	// ErrTaskVersion means an A2A task changed since the version an update was based on.
	ErrTaskVersion = errors.New("task version changed")
)

// Causes a surface reports when its client leaves a live stream (Stream.ClientGone).
var (
	// ErrClientGone: the streaming client disconnected.
	ErrClientGone = errors.New("client disconnected")
	// ErrClientTooSlow: the streaming client took nothing for the stream's write timeout
	// and was dropped; it counts as a disconnect.
	ErrClientTooSlow = fmt.Errorf("%w: it did not keep up with the stream", ErrClientGone)
)

// BudgetExceededError refuses a run of a principal whose day is spent (AG-UI: 429
// BUDGET_EXCEEDED). Its message is safe to show: the budget and when it resets.
type BudgetExceededError struct {
	// ResetsAt is when the principal's UTC day ends.
	ResetsAt time.Time
	// Message says which budget is spent and when it resets.
	Message string
}

func (e *BudgetExceededError) Error() string { return e.Message }
