package kernel

import (
	"context"
	"errors"
	"time"
)

// NoTimeout as a Task.Timeout runs the task without a timeout even when
// Config.DefaultTimeout sets one for its priority.
const NoTimeout = time.Duration(1<<63 - 1)

// Task is one unit of work to submit. Only Run is required.
type Task struct {
	// ID names the task in events, logs and [Handle.ID]. If empty, the kernel makes
	// one ("ax-" and a sequence number). IDs need not be unique.
	ID string

	// Priority chooses the bucket. The zero value is Normal.
	Priority Priority

	// Delay holds the task back for this long after submission. Must be >= 0; at
	// most one of Delay and At may be set.
	Delay time.Duration

	// At holds the task back until this time (read on Config.Clock). A time in the
	// past runs at once.
	At time.Time

	// Timeout bounds each attempt, from its start. If zero, Config.DefaultTimeout of
	// the priority applies; [NoTimeout] means none. Must be >= 0.
	Timeout time.Duration

	// Retry, if set, replaces Config.Retry for this task (zero fields take the
	// defaults of [RetryPolicy]).
	Retry *RetryPolicy

	// Run is the work. Its context is cancelled when the attempt times out, when the
	// task is cancelled, when its batch's context ends and when the kernel closes; its
	// Deadline is the attempt's timeout. It carries the values of Values (see there)
	// and [TaskInfo]. Required.
	Run func(ctx context.Context) error

	// Values, if set, lends its values (trace IDs, loggers, request-scoped data) to
	// the context of every attempt of the task (a member of a Map or Batch has its
	// batch's context's values instead). Only the values
	// pass on, never Values' cancellation or deadline: a task outlives the request
	// that submitted it unless it is cancelled. If nil, [Kernel.Submit] uses its
	// ctx, so the task sees the submitter's values; the other submit methods pass
	// none. The task keeps Values reachable until it ends. A fire-and-forget task
	// with Values travels on a record of its own rather than as a light or compact
	// task ([Kernel.TryGo]).
	Values context.Context

	// Group, if set, names a group of Config.Groups: the task waits for a permit of
	// its group and key (concurrency, rate, breaker) before it enters its bucket, and
	// holds it until its function returns (see [GroupConfig]). A task of a group
	// travels on a full record (never light, compact or by the fast lane). If empty,
	// the task belongs to no group.
	Group string

	// Key is the task's key within its group (an upstream host, a tenant): the
	// per-key limits apply to the tasks sharing it. The empty key is one key like
	// any other. Must be empty without a Group.
	Key string

	// OnTimeout, if set, is called after an attempt timed out, with the attempt's
	// number (1 for the first), on a small pool of goroutines of its own — never the
	// scheduler's — so it may log or clean up. Calls that find the pool's queue full
	// are dropped and counted (Stats.OnTimeoutDropped).
	OnTimeout func(attempt int)

	// OnEnd, if set, is called exactly once when the task reaches its terminal
	// state (Succeeded, Failed, TimedOut, Canceled, Evicted or Abandoned), with
	// that state and the error [Handle.Wait] returns for it (nil for Succeeded). It is called
	// for every task a submit method accepted, whichever way the task ends —
	// success, failure after its retries, Cancel, a timeout, eviction, Shutdown's
	// abandon, Close — and never for one it refused. It runs on a goroutine of the
	// kernel's own, never the scheduler's, one call at a time in the order the
	// tasks ended, behind a queue that drops nothing; it may be called before or
	// after [Handle.Wait] returns. A panic in it is recovered and counted
	// (Stats.CallbackPanics). Shutdown and Close wait for the calls of the tasks
	// they ended, within their bounds (see [Kernel.Shutdown]). A task with OnEnd
	// travels on a record of its own (never light, lazy or by the fast lane) and
	// ends through the scheduler. Batch members ([Batch.Go], [Map]) and durable
	// tasks have no OnEnd. If nil, nothing is called.
	OnEnd func(state State, err error)
}

// validate checks the task's fields, naming the bad ones.
func (t *Task) validate() error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &ConfigError{Field: "Task." + field, Value: v, Reason: reason})
	}
	if t.Run == nil {
		errs = append(errs, &ConfigError{Field: "Task.Run", Reason: "must not be nil"})
	}
	if !t.Priority.Valid() {
		bad("Priority", t.Priority, "must be High, Normal or Low")
	}
	if t.Delay < 0 {
		bad("Delay", t.Delay, "must be >= 0")
	}
	if t.Delay > 0 && !t.At.IsZero() {
		bad("At", t.At.Round(0), "must be zero when Delay is set")
	}
	if t.Timeout < 0 {
		bad("Timeout", t.Timeout, "must be >= 0")
	}
	if t.Retry != nil {
		errs = append(errs, t.Retry.validate("Task.Retry")...)
	}
	if errs == nil {
		return nil
	}
	return errors.Join(errs...)
}
