package kernel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is the context a task's function runs under. It costs no allocation
// until Done is called: its channel is made lazily. The loop cancels it (timeout,
// Cancel, batch context, Close); nothing else does.
type attemptCtx struct {
	parent context.Context // values come from it: the batch's context, Task.Values without its cancellation, or Background
	a      *attempt

	canceled atomic.Bool
	mu       sync.Mutex
	done     chan struct{}
	err      error
	afters   []*afterFunc
}

type afterFunc struct {
	f    func()
	once sync.Once
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Deadline returns the attempt's start plus its timeout, once it started.
func (c *attemptCtx) Deadline() (time.Time, bool) {
	h := c.a.h
	if h.timeout > 0 && c.a.started {
		return h.k.at(c.a.startAt).Add(h.timeout), true
	}
	return c.parent.Deadline()
}

// Done returns a channel closed when the attempt is cancelled.
func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

// Err returns nil until the attempt is cancelled, then context.DeadlineExceeded
// (timeout) or context.Canceled.
func (c *attemptCtx) Err() error {
	if !c.canceled.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
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

// AfterFunc lets context.AfterFunc and derived contexts hook cancellation without a
// goroutine each.
func (c *attemptCtx) AfterFunc(f func()) func() bool {
	af := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		af.once.Do(func() { go f() })
		return func() bool { return false }
	}
	c.afters = append(c.afters, af)
	c.mu.Unlock()
	return func() bool {
		stopped := false
		af.once.Do(func() { stopped = true })
		return stopped
	}
}

// cancel cancels the context with err (context.Canceled or DeadlineExceeded). Only
// the loop calls it. Idempotent.
func (c *attemptCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.canceled.Store(true)
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, af := range afters {
		af.once.Do(func() { go af.f() })
	}
}

// String names the context in panics and logs.
func (c *attemptCtx) String() string { return "kernel.taskContext(" + c.a.h.ID() + ")" }

var _ context.Context = (*attemptCtx)(nil)
