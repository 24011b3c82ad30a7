package kernel

import (
	"context"
	"time"
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
// A task due now, without a timeout (its own or its priority's DefaultTimeout)
// or a Retry of its own, while no OnEvent listens, travels as a 24-byte value
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

// submit validates, admits and hands one task to the loop. ctx noWait means do
// not wait for room. A delayed fire-and-forget task that fits a lazyTask travels
// and waits as one (see lazy.go); every other task gets its full record now.
func (k *Kernel) submit(ctx context.Context, t *Task, pooled bool) (*Handle, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if t.Values == nil && !pooled && carriesValues(ctx) {
		t.Values = ctx
	}
	prio := t.Priority.normalize()
	lvl := levelOf(prio)
	rc := k.rc.Load()
	if pooled && t.ID == "" && t.Delay == 0 && t.At.IsZero() && t.Retry == nil && t.Values == nil && k.events == nil &&
		taskTimeout(t, prio, rc) == 0 {
		return nil, k.submitLight(ctx, t, prio, lvl, rc)
	}
	fast := k.fastOpen.Load() && t.ID == "" && t.Delay == 0 && t.At.IsZero() && k.events == nil &&
		(t.Timeout == NoTimeout || (t.Timeout == 0 && rc.cfg.DefaultTimeout.Get(prio) == 0))
	lazy := pooled && k.lazyFits(t)
	if lazy {
		// The usual way of a lazy task: its ticket comes from the intake's reserve.
		// Without room, it is admitted below like any task (it may wait, evict or be
		// refused), then queued with the ticket it got.
		if err := k.enqueueLazy(t, prio, lvl, false, rc); err != errNoTicket { //nolint:errorlint // sentinel of enqueueLazy's own
			return nil, err
		}
	}
	var evicts bool
	var err error
	if !fast {
		if evicts, err = k.admit(ctx, lvl, 1, rc, true); err != nil {
			return nil, err
		}
	}
	if lazy && !evicts {
		if err := k.enqueueLazy(t, prio, lvl, true, rc); err != nil {
			k.release(lvl, 1)
			return nil, err
		}
		return nil, nil
	}
	var h *Handle
	if pooled {
		h = handlePool.Get().(*Handle)
		h.pooled = true
	} else {
		h = &Handle{}
	}
	k.initHandle(h, t, prio, rc, nil)
	if fast {
		if k.runFast(h) {
			if pooled {
				return nil, nil
			}
			return h, nil
		}
		// The lane closed meanwhile: the usual way.
		if evicts, err = k.admit(ctx, lvl, 1, rc, true); err != nil {
			if pooled {
				*h = Handle{}
				handlePool.Put(h)
			}
			return nil, err
		}
	}
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

// initHandle fills a task record from t. It reads the clock once.
func (k *Kernel) initHandle(h *Handle, t *Task, prio Priority, rc *resolved, b *Batch) {
	h.k = k
	h.id = t.ID
	h.named = t.ID != ""
	h.seq = k.seq.Add(1)
	h.prio = prio
	h.bucket = levelOf(prio)
	h.run = t.Run
	h.onTimeout = t.OnTimeout
	h.timeout = taskTimeout(t, prio, rc)
	h.retry = nil
	if t.Retry != nil {
		p := t.Retry.withDefaults()
		h.retry = &p
	}
	now := k.mono()
	h.submitAt = now
	h.dueAt, h.due = k.dueOf(t, now)
	h.batch = b
	parent := context.Background()
	switch {
	case b != nil:
		parent = b.ctx
	case t.Values != nil:
		parent = context.WithoutCancel(t.Values)
	}
	h.initFirst(parent)
}

// taskTimeout resolves the timeout of t's attempts: Task.Timeout, else the
// priority's Config.DefaultTimeout of rc; 0 means none.
func taskTimeout(t *Task, prio Priority, rc *resolved) time.Duration {
	d := t.Timeout
	if d == 0 {
		d = rc.cfg.DefaultTimeout.Get(prio)
	}
	if d == NoTimeout {
		return 0
	}
	return d
}

// dueOf returns when t is due, as a mono time, and whether it set Delay or At.
// now is the mono time of its submission.
func (k *Kernel) dueOf(t *Task, now int64) (int64, bool) {
	switch {
	case t.Delay > 0:
		return addMono(now, t.Delay), true
	case !t.At.IsZero():
		return int64(t.At.Sub(k.epoch)), true
	}
	return 0, false
}

// initFirst makes h a new task, about to be taken in by the loop, whose first
// attempt runs under a context derived from parent.
func (h *Handle) initFirst(parent context.Context) {
	h.state.Store(uint32(Queued))
	a := &h.first
	a.h = h
	a.n = 1
	a.ctx.a = a
	a.ctx.parent = parent
	h.cur = a
}
