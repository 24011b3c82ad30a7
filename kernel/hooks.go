package kernel

import (
	"context"

	"github.com/axsched/ax/kernel/internal/callback"
)

// Hooks lets a tracer follow tasks from their submit through every attempt, here or,
// for durable tasks, in any kernel that runs them later (module axotel implements it
// with OpenTelemetry). The kernel calls its methods concurrently, on the submitter's
// goroutine and on the attempt's executor: they must be fast and must not block. A
// panic in any of them is recovered and counted (Stats.CallbackPanics); the task goes
// on as without hooks.
type Hooks interface {
	// Headers returns the headers to store with the durable tasks a SubmitDurable or
	// SubmitDurableMany under ctx submits (a trace context), called once per call
	// before anything is stored; the kernel keeps a copy. Headers over
	// [store.HeadersMax] bytes are dropped whole and logged. Each attempt gets them in
	// AttemptInfo.Headers, whichever kernel runs it, after a restart too. In-memory
	// tasks need none: their attempts see the submitter's values (Task.Values).
	Headers(ctx context.Context) map[string]string

	// Attempt is called on the executor before an attempt's function runs, with the
	// attempt's context (it carries the task's values; [TaskInfo] answers for it).
	// The function runs with the values of rctx (ctx, or a context derived from it)
	// and the attempt's own cancellation and deadline. end, if not nil, is called on
	// the same goroutine once the function returned, with its error (nil: success; a
	// *PanicError for a panic or runtime.Goexit). It is not called for an attempt
	// cancelled before it began. Light tasks ([Kernel.TryGo]) travel on a record
	// while Hooks is set, so that every attempt is seen.
	Attempt(ctx context.Context, a AttemptInfo) (rctx context.Context, end func(err error))
}

// AttemptInfo describes the attempt a [Hooks] is called for.
type AttemptInfo struct {
	Info // the task and attempt, as [TaskInfo] gives them
	// Group is the task's group (Task.Group, DurableTask.Group), "" for none.
	Group string
	// Headers are a durable task's headers ([Hooks.Headers]); nil for an in-memory
	// task. Read-only.
	Headers map[string]string
}

// hookCtx is an attempt's context under Config.Hooks: the attempt's cancellation and
// deadline, the values of the context the hook returned.
type hookCtx struct {
	*attemptCtx
	vals context.Context
}

// Value returns the hook's context's value for key; for TaskInfo's key, the attempt's
// context.
func (c *hookCtx) Value(key any) any {
	if _, ok := key.(infoKey); ok {
		return c.attemptCtx
	}
	return c.vals.Value(key)
}

// startHook calls Config.Hooks' Attempt for a and returns the context a's function
// runs under and the function to call with its outcome.
func (k *Kernel) startHook(a *attempt) (context.Context, func(error)) {
	h := a.h
	info, _ := TaskInfo(&a.ctx)
	ai := AttemptInfo{Info: info}
	if h.has(featGroup) {
		ai.Group = h.ext.gd.name
	}
	if h.has(featDurable) {
		ai.Headers = h.dur.headers
	}
	vals, end := callback.Start(k.m.callbackPanics, k.hooks.Attempt, &a.ctx, ai)
	if vals == context.Context(&a.ctx) {
		return vals, end
	}
	return &hookCtx{attemptCtx: &a.ctx, vals: vals}, end
}
