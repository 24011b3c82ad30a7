package kernel

import (
	"context"
	"runtime/debug"

	"github.com/axsched/ax/queue"
)

// A light task is a fire-and-forget task that needs nothing of a task record: it
// was submitted with TryGo or Go, is due now, has no timeout and no Retry of its
// own, and nobody listens for events. It travels through the intake, its bucket
// and the run queue as a 24-byte value (light) instead of a 384-byte record,
// and nobody but the executor that runs it reads it: the loop moves it without a
// cache miss, and no record goes back and forth between the cores. It gets a
// record only if its function fails and its priority's retry policy allows
// another attempt (lightFailed). Submitters hand values to the loop, and the
// loop hands values to the executors.
type light struct {
	run func(context.Context) error
	at  int64       // mono: when it was submitted
	lvl queue.Level // its bucket
	// tk is set on a run-queue entry (ritem.l), for a light task or a record's
	// attempt alike: the level of the admission ticket the entry holds, plus one;
	// 0 if it holds none. The executor that takes the entry counts the ticket in
	// runq.tickets, and the loop gives it back (runq.takeTickets).
	tk uint8
}

// ritem is what the run queue holds: an attempt of a task record, or a light task
// (a nil).
type ritem struct {
	a *attempt
	l light
}

// lightDone is a light task whose function failed, handed back to the loop.
type lightDone struct {
	l              light
	err            error
	startAt, endAt int64 // mono
}

// priorityOf maps a bucket to its priority (the inverse of levelOf).
func priorityOf(l queue.Level) Priority {
	switch l {
	case queue.High:
		return High
	case queue.Low:
		return Low
	default:
		return Normal
	}
}

// acceptLight takes in a light task: into its bucket, as toBucket does a record.
func (k *Kernel) acceptLight(l light) {
	k.ls.live++
	k.ls.pendSubmitted[l.lvl]++
	k.growBucket(l.lvl)
	_ = k.ls.buckets.Push(l.lvl, qitem{l: l}) // growBucket made room: no error
}

// lightFailed settles a light task whose function failed or panicked: it gets the
// record it did without, as if its first attempt had run as one, and ends or
// waits for a retry as its priority's policy says.
func (k *Kernel) lightFailed(d lightDone) {
	h := handlePool.Get().(*Handle)
	h.pooled = true
	h.k = k
	h.seq = k.seq.Add(1)
	h.prio = priorityOf(d.l.lvl)
	h.bucket = d.l.lvl
	h.run = d.l.run
	h.submitAt = d.l.at
	h.queuedAt = d.l.at
	h.initFirst(context.Background())
	h.placed = true
	h.state.Store(uint32(Running))
	h.attempts.Store(1)
	a := &h.first
	a.started = true
	a.finished = true
	a.startAt = d.startAt
	a.endAt = d.endAt
	a.err = d.err
	k.settleAttempt(a)
}

// executeLight runs a light task's function, recovering a panic into
// *PanicError. After Close it does not run it: Close ended the task already.
func (k *Kernel) executeLight(l *light) (err error) {
	if k.lightClosed.Load() {
		return ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return l.run(k.lightCtx)
}

// submitLight submits t as a light task: a fire-and-forget task, due now,
// without a timeout, a Retry of its own or an event listener (see pathOf).
func (k *Kernel) submitLight(ctx context.Context, t *Task, prio Priority, lvl queue.Level, rc *resolved) error {
	l := light{run: t.Run, lvl: lvl}
	if k.fastOpen.Load() {
		l.at = k.mono()
		if k.runFastItem(nil, l, l.at) {
			return nil
		}
	}
	evicts, err := k.admit(ctx, lvl, 1, rc, admitMemory)
	if err != nil {
		return err // a refusal does not read the clock
	}
	if l.at == 0 {
		l.at = k.mono()
	}
	if evicts {
		// A task holding an evicted Low task's ticket travels on a record, which
		// knows which ticket to give back (Handle.ticket).
		h := handlePool.Get().(*Handle)
		h.pooled = true
		k.initHandle(h, t, prio, rc, nil)
		h.evicts = true
		if !k.enqueue(h) {
			k.release(queue.Low, 1)
			*h = Handle{}
			handlePool.Put(h)
			return ErrClosed
		}
		return nil
	}
	k.in.mu.Lock()
	if k.in.closed {
		k.in.mu.Unlock()
		k.release(lvl, 1)
		return ErrClosed
	}
	k.in.tasks = append(k.in.tasks, qitem{l: l})
	wake := k.in.loopWaiting
	k.in.loopWaiting = false
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
	return nil
}
