package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/axsched/ax/kernel/internal/check"
)

// Errors that callers branch on. Compare with [errors.Is]: the kernel may wrap them
// with detail.
var (
	// ErrClosed is returned by [Kernel.TrySubmit], [Kernel.Submit], [Kernel.TryGo],
	// [Kernel.Go] and [Map] once [Kernel.Shutdown] or [Kernel.Close] has begun, and is the
	// error of queued or delayed tasks that Close ended.
	ErrClosed = errors.New("kernel: closed")

	// ErrResultTooLarge is returned by [SetResult] for a result over the limit.
	ErrResultTooLarge = errors.New("kernel: result too large")

	// ErrQueueFull is returned by [Kernel.TrySubmit] and [Kernel.TryGo] when the bucket
	// of the task's priority holds Config.Capacity tasks already.
	ErrQueueFull = errors.New("kernel: queue full")

	// ErrDegraded is returned by [Kernel.TrySubmit] and [Kernel.TryGo] for a Normal or
	// Low task while the kernel holds more than Config.DegradeAt of its total capacity:
	// only High tasks are admitted then.
	ErrDegraded = errors.New("kernel: degraded, only high priority admitted")

	// ErrEvicted is the error of a queued Low task that a High arrival replaced in a
	// full kernel (Config.EvictLow). Its [Handle.Wait] returns it.
	ErrEvicted = errors.New("kernel: evicted by a high priority task")

	// ErrTimeout is the error of a task whose last attempt outlived its timeout. The
	// task's context reported [context.DeadlineExceeded] to the function.
	ErrTimeout = errors.New("kernel: task timed out")

	// ErrCanceled is the error of a task ended by [Handle.Cancel] or by its batch's
	// context.
	ErrCanceled = errors.New("kernel: task canceled")

	// ErrAbandoned is the error of a delayed or retrying task that [Kernel.Shutdown]
	// ended before it was due.
	ErrAbandoned = errors.New("kernel: task abandoned at shutdown")

	// ErrTaskTaken is the error of a durable task whose attempt the store refused to
	// start because another owner of a [store.SharedStore] holds the task now (it rescued the
	// task after this kernel's lease ended). The task ends Abandoned here, without
	// running; its owner runs it.
	ErrTaskTaken = errors.New("kernel: another owner of the store holds the task")

	// ErrUnknownTask is returned by [Kernel.RunNow] when no live task has the ID.
	ErrUnknownTask = errors.New("kernel: no live task has that ID")
	// ErrRetryBudget is wrapped, beside the last attempt's error, by the error of an
	// in-memory task whose retry Config.RetryBudget refused: the task ends Failed (or
	// TimedOut) with attempts left, and errors.Is finds both errors. A durable task
	// is never ended for it: its retry waits for the budget (see [RetryBudget]).
	ErrRetryBudget = errors.New("kernel: retry refused by the retry budget")

	// ErrGroupFull is returned by the submit methods for a task of a group whose key
	// holds GroupConfig.MaxWaiting tasks not yet started.
	ErrGroupFull = errors.New("kernel: group key full")

	// ErrCircuitOpen is the error of a task of a group whose key's breaker is open
	// while BreakerConfig.FailFast is set: it ends Failed without running.
	ErrCircuitOpen = errors.New("kernel: circuit open")

	// ErrNilFunc is the error of [Batch.Go] with a nil function (returned by
	// [Batch.Wait]) and of [Map] with a nil fn: nothing is submitted for it.
	ErrNilFunc = errors.New("fn must not be nil")

	// ErrStopFromInside is returned by [Kernel.Shutdown] and [Kernel.Close] when
	// called from the kernel's own goroutines — a task's function, an OnEvent,
	// OnTimeout, OnEnd or Logger handler callback, a BackoffFunc, a Store method — which
	// they would wait for: the stop begins and goes on in
	// the background, and the call returns at once.
	ErrStopFromInside = errors.New("kernel: Shutdown or Close called from a task or callback of this kernel: the stop goes on without waiting for its caller")
)

// PanicError is the error of an attempt whose function panicked or called
// [runtime.Goexit]. Value is what was passed to panic (nil for Goexit) and Stack the
// stack of the panicking goroutine.
type PanicError struct {
	Value  any
	Stack  []byte
	Goexit bool
}

// Error implements error.
func (e *PanicError) Error() string {
	if e.Goexit {
		return "kernel: task called runtime.Goexit"
	}
	return fmt.Sprintf("kernel: task panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error, so errors.Is and errors.As see
// through a panic(err).
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// ConfigError is one invalid field of a [Config] or a [Task]. [Config.Validate],
// [New], [Kernel.Update] and the submit methods return them, joined with
// [errors.Join] when several fields are bad.
type ConfigError struct {
	Field  string // "Config.MaxConcurrency", "Task.Timeout", ...
	Value  any    // the rejected value
	Reason string // "must be >= 0"
}

// Error implements error: "kernel: Config.MaxConcurrency = -1: must be >= 0".
func (e *ConfigError) Error() string {
	if e.Value == nil {
		return "kernel: " + e.Field + ": " + e.Reason
	}
	return fmt.Sprintf("kernel: %s = %v: %s", e.Field, e.Value, e.Reason)
}

// fields collects the errors of bad fields as [*ConfigError] values, each field
// named after prefix.
func fields(prefix string) *check.Errs {
	return &check.Errs{Prefix: prefix, New: func(field string, v any, reason string) error {
		return &ConfigError{Field: field, Value: v, Reason: reason}
	}}
}

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the kernel does not retry the task that returned it:
// the task ends Failed with err at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked with [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// ShutdownError is returned by [Kernel.Shutdown] when its context ended before the
// kernel drained. It wraps the context's error and says what had not finished.
type ShutdownError struct {
	Err     error // ctx.Err()
	Queued  int   // tasks still queued or waiting for a retry
	Running int   // tasks still running
	// Journal counts durable-task changes not yet written to Config.Store when
	// Shutdown gave up waiting for the store. The store keeps those tasks' earlier
	// states: a task it still holds as live runs again on the next start.
	Journal int
	// Callbacks counts the OnEvent, OnTimeout, OnEnd and Config.Logger handler callbacks
	// still running when Shutdown gave up waiting for them.
	Callbacks int
}

// Error implements error.
func (e *ShutdownError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel: shutdown: %v: %d queued and %d running not finished",
		e.Err, e.Queued, e.Running)
	if e.Journal > 0 {
		fmt.Fprintf(&b, ", %d journal changes not written", e.Journal)
	}
	if e.Callbacks > 0 {
		fmt.Fprintf(&b, ", %d callbacks still running", e.Callbacks)
	}
	return b.String()
}

// Unwrap returns the context's error.
func (e *ShutdownError) Unwrap() error { return e.Err }
