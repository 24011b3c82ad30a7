package bench

import (
	"context"
	"errors"
	"time"
)

// ErrRejected is returned by [Executor.Go] and [Executor.Submit] of a
// non-blocking executor that has no room for the task. A rejected task never runs.
var ErrRejected = errors.New("bench: task rejected")

// Priority is a task's class. Executors without priorities run every class
// from one FIFO; the scenarios still report each class apart.
type Priority uint8

// The priorities, in the order reports list them.
const (
	High Priority = iota
	Normal
	Low
	numPriorities
)

// String returns "high", "normal" or "low".
func (p Priority) String() string {
	switch p {
	case High:
		return "high"
	case Normal:
		return "normal"
	case Low:
		return "low"
	default:
		return "priority?"
	}
}

// RetryPolicy says how often and after which backoff a failed task runs again:
// attempt n+1 starts after a random delay in [0, min(Max, Base·Multiplier^(n-1))]
// (full jitter). The zero value means one attempt.
type RetryPolicy struct {
	MaxAttempts int
	Base        time.Duration
	Multiplier  float64
	Max         time.Duration
}

// Task is one unit of work for [Executor.Submit].
type Task struct {
	// Priority is the task's class; executors without priorities ignore it.
	Priority Priority
	// Timeout bounds each attempt: Run's ctx is done after it. If zero, none.
	Timeout time.Duration
	// Delay postpones the first attempt. If zero, the task is due at once.
	Delay time.Duration
	// Retry runs the task again after an error. If nil, one attempt.
	Retry *RetryPolicy
	// Run is the work. Its ctx carries the timeout.
	Run func(ctx context.Context) error
	// Done, if not nil, is called once when the task has ended as its submitter
	// sees it: with nil after a success, else the last error ([ErrRejected]
	// when a retry was refused; after a timeout, an error for which
	// errors.Is(err, context.DeadlineExceeded) holds). It is not called for a
	// task that Submit refused. It must not block.
	Done func(err error)
}

// Executor is a scheduler under test. Implementations are safe for concurrent
// use by several submitters, and run every task they accept exactly once
// (each attempt of a retried task once).
type Executor interface {
	// Go runs f: the bare fast path, with no priority, timeout, delay or
	// retry. A blocking executor waits for room; a non-blocking one returns
	// [ErrRejected] at once when full.
	Go(f func()) error
	// Submit runs t with its priority, timeout, delay and retries, waiting or
	// refusing like Go.
	Submit(t Task) error
	// Wait blocks until every accepted task (and every retry of one) has ended.
	// Call it once, after the last submission.
	Wait()
	// Close releases the executor. It is called once, after Wait.
	Close()
}

// Stater is implemented by executors that can report their own state. The
// scenarios sample it into time series and peaks.
type Stater interface {
	// QueueDepth returns the tasks accepted but not yet started.
	QueueDepth() int
	// Zombies returns the tasks that outlived their timeout and still run.
	Zombies() int
}

// Preparer is implemented by executors whose own form of a task is not a
// func(): ax runs a func(context.Context) error, and its Go wraps f, an
// allocation per distinct func that a caller of ax would not make (it writes
// the task in that form). Scenarios that time each submission from the call
// (latency) make each task before the clock read, in the executor's own form,
// and submit it with GoPrepared: what is timed is the executor's hand-over
// alone, and every executor's task costs one allocation, as a caller's own
// closure would.
type Preparer interface {
	// Prepare returns, in the executor's own form, a task that calls body(i).
	Prepare(body func(int), i int) any
	// GoPrepared is Go for a task made by Prepare.
	GoPrepared(task any) error
}

// DelayPreparer is a [Preparer] that schedules a prepared task after a delay:
// the timers scenario makes each near timer's task in the executor's own form
// before the timed loop, so that what is timed is the scheduling call alone,
// as [Delayer.After] of a func made beforehand is for the others.
type DelayPreparer interface {
	Preparer
	// AfterPrepared is Delayer.After for a task made by Prepare.
	AfterPrepared(d time.Duration, task any) error
}

// funcPreparer is the [DelayPreparer] of an executor that takes a func(): a
// task is a closure calling body(i), submitted with Go (or After, d set).
type funcPreparer struct {
	ex Executor
	d  Delayer
}

func (p funcPreparer) Prepare(body func(int), i int) any { return func() { body(i) } }

func (p funcPreparer) GoPrepared(task any) error { return p.ex.Go(task.(func())) }

func (p funcPreparer) AfterPrepared(d time.Duration, task any) error {
	return p.d.After(d, task.(func()))
}

// preparerOf returns ex as a Preparer: its own, or funcPreparer.
func preparerOf(ex Executor) Preparer {
	if pr, ok := ex.(Preparer); ok {
		return pr
	}
	return funcPreparer{ex: ex}
}

// delayPreparerOf returns ex, which schedules delays with d, as a
// DelayPreparer: its own, or funcPreparer.
func delayPreparerOf(ex Executor, d Delayer) DelayPreparer {
	if dp, ok := ex.(DelayPreparer); ok {
		return dp
	}
	return funcPreparer{ex: ex, d: d}
}

// Quoter is implemented by executors with priorities that promise each one a
// share of the dispatches while every priority has work waiting; the mixed
// scenario checks the promise.
type Quoter interface {
	// QuotaShares returns the promised shares of High, Normal and Low (summing to 1).
	QuotaShares() [3]float64
}

// Mode is how an executor answers a submission when it is full.
type Mode uint8

// The modes.
const (
	// Blocking: the submitter waits for room.
	Blocking Mode = iota + 1
	// NonBlocking: the submitter gets [ErrRejected] at once.
	NonBlocking
	// Unbounded: neither; the executor queues or spawns without limit.
	Unbounded
)

// String returns "blocking", "non-blocking" or "unbounded".
func (m Mode) String() string {
	switch m {
	case Blocking:
		return "blocking"
	case NonBlocking:
		return "non-blocking"
	case Unbounded:
		return "unbounded"
	default:
		return "mode?"
	}
}

// Factory describes an executor and builds it.
type Factory struct {
	// Name is the executor's name on the command line and in reports.
	Name string
	// Doc is a one-line description for axbench -list.
	Doc string
	// Mode says what a submission to a full executor does.
	Mode Mode
	// Priorities is true when the executor orders tasks by [Task.Priority].
	Priorities bool
	// Delays is true when the executor schedules [Task.Delay] itself (the
	// timers scenario runs only these).
	Delays bool
	// Only, if not empty, names the scenarios the executor runs in (a
	// baseline or a variant that matters only where priorities do). If empty,
	// it runs in every scenario that accepts it.
	Only []string
	// New builds an executor for p (Conc workers, a queue of Queue tasks
	// where it has one). ctx ends with the run; New must not keep goroutines
	// past Close. Nil for a durable configuration.
	New func(ctx context.Context, p Params) (Executor, error)
	// Durable, if not nil, makes the factory a durable-task configuration
	// instead of an executor (New is then nil): the scenarios marked
	// [Scenario.Durable], and only they, run a kernel on the store it opens.
	// It is called once per measured kernel, and each call opens a fresh
	// store (a table of its own) that [DurableSetup.Close] drops.
	Durable func(ctx context.Context, p Params) (*DurableSetup, error)
	// Keyed, if not nil, builds the executor of the scenarios marked
	// [Scenario.Keyed] (groups): tasks with a key, under per-key limits. A
	// factory may have it beside New, or alone (then it runs in those
	// scenarios only).
	Keyed func(ctx context.Context, p Params, cfg KeyedConfig) (KeyedExecutor, error)
	// Schedules, if not nil, builds the recurring scheduler of the scenarios
	// marked [Scenario.Schedules]. A factory may have it beside New, or alone
	// (then it runs in those scenarios only).
	Schedules func(ctx context.Context, p Params) (ScheduleExecutor, error)
	// DurableJoin, if not nil, opens in another process the store of a
	// DurableSetup that Durable returned, named by its Shared; the setup's Close
	// releases it without dropping it. The durable-multi scenario runs only
	// configurations that have it.
	DurableJoin func(ctx context.Context, p Params, shared string) (*DurableSetup, error)
	// DurableTx reports that the DurableSetups Durable returns have TxSubmit:
	// the durable-tx scenario runs only configurations that have it.
	DurableTx bool
	// Flows reports that the configuration runs the flows-durable scenario:
	// ax on its store (package flow's durable runs), a peer with
	// [DurableSetup.FlowPeer], or ax's flows in memory
	// ([DurableSetup.MemoryFlows]).
	Flows bool
}
