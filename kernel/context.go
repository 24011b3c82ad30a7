package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/kernel/internal/lazycancel"
	"github.com/axsched/ax/kernel/internal/taskctx"
)

// attemptCtx is the context a task's function runs under. It costs no allocation
// until Done is called (lazycancel.State). The loop cancels it (timeout, Cancel,
// batch context, Close); nothing else does. Its result is taskctx.Result's.
type attemptCtx struct {
	parent context.Context // values come from it: the batch's context, Task.Values without its cancellation, or Background
	a      *attempt
	lazycancel.State
	taskctx.Result
}

// Deadline returns the attempt's start plus its timeout, once it started.
func (c *attemptCtx) Deadline() (time.Time, bool) {
	h := c.a.h
	if h.timeout > 0 && c.a.started {
		return h.k.at(c.a.startAt).Add(h.timeout), true
	}
	return c.parent.Deadline()
}

// Value returns the parent's value for key; for TaskInfo's key, c itself.
func (c *attemptCtx) Value(key any) any {
	if _, ok := key.(infoKey); ok {
		return c
	}
	return c.parent.Value(key)
}

// carriesValues reports whether ctx may hold values: any context but noWait,
// context.Background and context.TODO.
func carriesValues(ctx context.Context) bool {
	return ctx != noWait && ctx != context.Background() && ctx != context.TODO()
}

// Info describes the task and attempt a function runs for ([TaskInfo]).
type Info struct {
	// ID is the task's ID (Task.ID, or the one the kernel made; a durable task's
	// stored ID), the same across its attempts.
	ID string
	// Priority is the task's priority (never PriorityDefault).
	Priority Priority
	// Attempt is the attempt's number, 1 for the first: with ID, a key for
	// idempotency under retries and, for durable tasks, at-least-once runs.
	Attempt int
	// Kind is a durable task's registered kind; "" for an in-memory task.
	Kind string
}

// infoKey is the context key TaskInfo asks for.
type infoKey struct{}

// TaskInfo returns the task and attempt that ctx, or a context derived from it,
// belongs to, and false for any other context. A light task (a TryGo or Go task
// due now, without an ID, a timeout or a Retry of its own, see [Kernel.TryGo]) runs under
// a context shared by all of them and has no Info; give it a Timeout, or submit it
// with a Handle, when its function needs one. Safe for concurrent use; it does not
// allocate beyond the ID a kernel-made ID needs.
func TaskInfo(ctx context.Context) (Info, bool) {
	if ctx == nil {
		return Info{}, false
	}
	c, ok := ctx.Value(infoKey{}).(*attemptCtx)
	if !ok {
		return Info{}, false
	}
	h := c.a.h
	info := Info{ID: h.ID(), Priority: h.prio, Attempt: int(c.a.n)}
	if h.has(featDurable) {
		info.Kind = h.dur.kind
	}
	return info, true
}

// String names the context in panics and logs.
func (c *attemptCtx) String() string { return "kernel.taskContext(" + c.a.h.ID() + ")" }

var _ context.Context = (*attemptCtx)(nil)

// SetResult leaves b as the result of the task that ctx belongs to (see
// [TaskInfo]): [Handle.Result] returns it once the task ended Succeeded or Failed
// with this attempt, and a durable task's store keeps it with the terminal state
// ([store.StoredTask.Result]). It keeps a copy of b; a later call replaces it, and
// each attempt starts with none. It refuses, keeping the result set before, a b
// longer than the limit (Config.MaxResult, or less if the store accepts less),
// with an error wrapping [ErrResultTooLarge] that names it; a call after the
// attempt ended; and a ctx that belongs to no task (a light task's: see
// [TaskInfo]). The task ends as its function says either way. Safe for concurrent use.
func SetResult(ctx context.Context, b []byte) error {
	c, _ := ctx.Value(infoKey{}).(*attemptCtx)
	if c == nil {
		return errors.New("kernel: SetResult: ctx belongs to no task with a Handle")
	}
	if err := c.Set(b, c.a.h.k.maxResult); errors.Is(err, taskctx.ErrEnded) {
		return fmt.Errorf("kernel: SetResult: %w", err)
	} else if err != nil {
		return fmt.Errorf("%w: %w (Config.MaxResult, or the store's limit if lower)", ErrResultTooLarge, err)
	}
	return nil
}
