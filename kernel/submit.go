package kernel

import (
	"context"
)

// TrySubmit validates t and queues it without blocking. It returns [ErrQueueFull]
// or [ErrDegraded] when the kernel has no room for t's priority, [ErrClosed] after
// Shutdown or Close began, and a *ConfigError (joined) naming each bad field of t.
// Nothing is queued when it returns an error.
func (k *Kernel) TrySubmit(t Task) (*Handle, error) {
	return k.submit(noWait, &t, false)
}

// Submit is [Kernel.TrySubmit] that waits for room while the kernel is full. It
// returns ctx.Err() if ctx ends first, and ErrClosed if the kernel stops. The
// task's context carries ctx's values, unless t.Values is set, but not its
// cancellation or deadline (see [Task.Values]).
func (k *Kernel) Submit(ctx context.Context, t Task) (*Handle, error) {
	return k.submit(ctx, &t, false)
}

// TryGo is [Kernel.TrySubmit] for fire-and-forget work: no Handle is returned. The
// task's outcome still shows in Stats, metrics and events. TryGo does not
// allocate: the function must not use its context after it returned.
//
// A task due now, without an ID, Values, a timeout (its own or its priority's
// DefaultTimeout) or a Retry of its own, while no OnEvent listens, travels as a 24-byte value
// with no record at all (a light task): the cheapest way through the kernel. Its
// context is shared with the kernel's other light tasks: it has no deadline and
// ends when Close begins. It gets a record only if its function fails and its
// priority's retry policy allows another attempt. Any other task's record is
// recycled once it ended. A task with a Delay or an At waits in a compact form (32
// to 56 bytes) and gets its full record only when it comes due.
func (k *Kernel) TryGo(t Task) error {
	_, err := k.submit(noWait, &t, true)
	return err
}

// Go is [Kernel.Submit] for fire-and-forget work. Its ctx only bounds the wait for
// room: the task's context does not carry ctx's values, so that a task without
// them may travel light ([Kernel.TryGo]); set t.Values to pass them on.
func (k *Kernel) Go(ctx context.Context, t Task) error {
	_, err := k.submit(ctx, &t, true)
	return err
}

// noWait, passed as the context of submit, admit and acquireSome, means: do not
// wait for room, refuse at once.
var noWait context.Context

// submit validates, admits and hands one task to the loop, on the path pathOf
// decides. ctx noWait means do not wait for room.
func (k *Kernel) submit(ctx context.Context, t *Task, pooled bool) (*Handle, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if t.Values == nil && !pooled && carriesValues(ctx) {
		t.Values = ctx
	}
	prio := normPriority(t.Priority)
	lvl := levelOf(prio)
	rc := k.rc.Load()
	if t.Group != "" || t.Key != "" {
		return k.submitGrouped(ctx, t, prio, rc, pooled)
	}
	var evicts bool
	var err error
	switch k.pathOf(t, prio, rc, pooled) {
	case pathLight:
		return nil, k.submitLight(ctx, t, prio, lvl, rc)
	case pathLazy:
		// The usual way of a lazy task: its ticket comes from the intake's reserve.
		// Without room, it is admitted like any task (it may wait, evict or be
		// refused), then queued with the ticket it got.
		if err := k.enqueueLazy(t, prio, lvl, false, rc); err != errNoTicket { //nolint:errorlint // sentinel of enqueueLazy's own
			return nil, err
		}
		if evicts, err = k.admit(ctx, lvl, 1, rc, admitMemory); err != nil {
			return nil, err
		}
		if !evicts {
			if err := k.enqueueLazy(t, prio, lvl, true, rc); err != nil {
				k.release(lvl, 1)
				return nil, err
			}
			return nil, nil
		}
		// Holding an evicted Low task's ticket, it travels on a record, which knows
		// which ticket to give back (Handle.ticket).
	case pathFast:
		h := k.newRecord(t, prio, rc, pooled)
		if k.runFast(h) {
			if pooled {
				return nil, nil
			}
			return h, nil
		}
		// The lane closed meanwhile: the usual way.
		if evicts, err = k.admit(ctx, lvl, 1, rc, admitMemory); err != nil {
			if pooled {
				*h = Handle{}
				handlePool.Put(h)
			}
			return nil, err
		}
		return k.enqueueRecord(h, evicts, pooled)
	default:
		if evicts, err = k.admit(ctx, lvl, 1, rc, admitMemory); err != nil {
			return nil, err
		}
	}
	return k.enqueueRecord(k.newRecord(t, prio, rc, pooled), evicts, pooled)
}

// submitGrouped is submit for a task of a group: it always travels by record.
func (k *Kernel) submitGrouped(ctx context.Context, t *Task, prio Priority, rc *resolved, pooled bool) (*Handle, error) {
	gd, err := groupOf(t, rc)
	if err != nil {
		return nil, err
	}
	if err := countWaiting(gd, t.Key, 1); err != nil {
		return nil, err
	}
	uncount := func() {
		if gd.counts != nil {
			gd.counts.Sub(t.Key, 1)
		}
	}
	evicts, err := k.admit(ctx, levelOf(prio), 1, rc, admitMemory)
	if err != nil {
		uncount()
		return nil, err
	}
	h := k.newRecord(t, prio, rc, pooled)
	h.joinGroup(gd, t.Key, gd.counts != nil)
	h2, err := k.enqueueRecord(h, evicts, pooled)
	if err != nil {
		uncount()
	}
	return h2, err
}

// taskPath is the way a submitted task travels through the kernel (see pathOf).
type taskPath uint8

const (
	pathRecord taskPath = iota // a full record, through the intake, the loop and the run queue
	pathFast                   // a full record, handed straight to the run queue (fastlane.go)
	pathLight                  // a 24-byte value and no record (light.go)
	pathLazy                   // a compact form while it waits, a full record once due (lazy.go)
)

// pathOf decides the path of a task t of priority prio submitted under rc; pooled
// marks a fire-and-forget submission (TryGo, Go). It is the only place that
// decides it. The first row whose conditions all hold wins:
//
//	path       conditions
//	---------  ----------------------------------------------------------------
//	light      fire-and-forget; no ID; due now (no Delay, no At); no Retry of
//	           its own; no Values; no OnEnd; no timeout (Task.Timeout, else
//	           the priority's DefaultTimeout, is 0 or NoTimeout); no OnEvent; no Hooks
//	fast lane  the parked loop opened the lane (fastOpen); no ID; due now; no
//	           OnEnd; Task.Timeout is NoTimeout, or 0 with no DefaultTimeout for
//	           its priority; no OnEvent
//	lazy       fire-and-forget; delayed (Delay or At); no ID, OnTimeout, OnEnd,
//	           Retry of its own or Values; Task.Timeout at most lazyTimeoutMax or
//	           NoTimeout; no OnEvent
//	record     every other task
//
// A path may change on the way. A light task tries the fast lane first while it
// is open (submitLight). A fast-lane task goes by record when the lane closed
// meanwhile (runFast), and a lazy or light task does when it took an evicted
// Low task's ticket, which only a record knows to give back (Handle.ticket).
//
// How a task's attempt is settled is decided when it ends, on its executor
// (Kernel.next):
//
//	settled    conditions
//	---------  ----------------------------------------------------------------
//	executor   a light task that succeeded; or a record's attempt that
//	           succeeded, has no timeout, is not durable, has no ID, no OnEnd,
//	           no group, no OnEvent listens and the loop did not end it already
//	           (settlesItself)
//	loop       every other attempt (failed, panicked, timed out, cancelled,
//	           durable, named, with an OnEnd or a group, or watched by OnEvent)
//
// Batch members (Batch.Go, Map) and durable tasks do not pass here: they always
// travel by record.
func (k *Kernel) pathOf(t *Task, prio Priority, rc *resolved, pooled bool) taskPath {
	switch {
	case pooled && t.ID == "" && t.Delay == 0 && t.At.IsZero() && t.Retry == nil && t.Values == nil && t.OnEnd == nil &&
		k.events == nil && k.hooks == nil && taskTimeout(t, prio, rc) == 0:
		return pathLight
	case k.fastOpen.Load() && t.ID == "" && t.Delay == 0 && t.At.IsZero() && t.OnEnd == nil && k.events == nil &&
		(t.Timeout == NoTimeout || (t.Timeout == 0 && rc.cfg.DefaultTimeout.Get(prio) == 0)):
		return pathFast
	case pooled && (t.Delay > 0 || !t.At.IsZero()) && t.ID == "" && t.OnTimeout == nil && t.OnEnd == nil && t.Retry == nil &&
		t.Values == nil && k.events == nil && (t.Timeout <= lazyTimeoutMax || t.Timeout == NoTimeout):
		return pathLazy
	}
	return pathRecord
}

// newRecord returns a task record for t: pooled (recycled once the task ended)
// for a fire-and-forget submission.
func (k *Kernel) newRecord(t *Task, prio Priority, rc *resolved, pooled bool) *Handle {
	var h *Handle
	if pooled {
		h = handlePool.Get().(*Handle)
		h.pooled = true
	} else {
		h = &Handle{}
	}
	k.initHandle(h, t, prio, rc, nil)
	return h
}

// enqueueRecord hands the admitted record h to the loop; evicts says it holds an
// evicted Low task's ticket. It returns the Handle to give the caller: nil for a
// fire-and-forget submission.
func (k *Kernel) enqueueRecord(h *Handle, evicts, pooled bool) (*Handle, error) {
	h.evicts = evicts
	if !k.enqueue(h) {
		k.release(h.ticket(), 1)
		return nil, ErrClosed
	}
	if pooled {
		return nil, nil
	}
	return h, nil
}
