package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Pool is the least a scheduler must offer to be measured: run a func, wait for
// all, release. [Emulate] builds the rest of an [Executor] on top of it.
type Pool interface {
	// Go runs f, waiting for room or returning [ErrRejected] as the pool's
	// mode says.
	Go(f func()) error
	// Wait blocks until every accepted func has returned. It is called once.
	Wait()
	// Close releases the pool after Wait.
	Close()
}

// Delayer is implemented by executors that schedule a delayed func themselves;
// the timers scenario measures it. After runs f once, d from now, and never blocks.
// It is called from one goroutine at a time, the one that calls Wait, if any,
// after it; so an adapter that counts scheduled funcs needs no atomic for them,
// the time.AfterFunc baseline counts none, and neither measures bookkeeping of
// its own with the scheduling call.
type Delayer interface {
	After(d time.Duration, f func()) error
}

// PriorityPool is a [Pool] that orders funcs by priority. [Emulate] hands
// every attempt of a submitted task to GoAt with the task's priority, and the
// bare funcs of [Executor.Go] to Go.
type PriorityPool interface {
	Pool
	// GoAt runs f at priority pr, waiting for room or returning [ErrRejected]
	// as Go does.
	GoAt(pr Priority, f func()) error
}

// Emulate returns an [Executor] that runs p's funcs and gives [Task] its
// meaning the way a user of a plain pool writes it by hand: every priority in
// one FIFO (or at its priority, when p is a [PriorityPool]), each attempt
// under context.WithTimeout, a delay or a retry backoff through
// time.AfterFunc followed by a fresh submission (which waits or is refused
// like any other; a refused retry ends the task with [ErrRejected]).
func Emulate(p Pool) Executor {
	pp, _ := p.(PriorityPool)
	return &emulated{pool: p, prio: pp}
}

// emulated adapts a Pool. pending counts the tasks given to Submit that have
// not ended (including those waiting for a delay or a retry), so that Wait can
// wait for them before it waits for the pool.
type emulated struct {
	pool    Pool           // immutable
	prio    PriorityPool   // immutable: pool as a PriorityPool, or nil
	pending sync.WaitGroup // one count per accepted Submit task, until its Done
}

var _ Executor = (*emulated)(nil)

func (e *emulated) Go(f func()) error { return e.pool.Go(f) }

func (e *emulated) Submit(t Task) error {
	e.pending.Add(1)
	et := &emuTask{e: e, t: t}
	if t.Delay > 0 {
		time.AfterFunc(t.Delay, et.resubmit)
		return nil
	}
	if err := e.goAttempt(t.Priority, et.run); err != nil {
		e.pending.Done()
		return err
	}
	return nil
}

// goAttempt hands one attempt of a task to the pool, at pr if it has priorities.
func (e *emulated) goAttempt(pr Priority, f func()) error {
	if e.prio != nil {
		return e.prio.GoAt(pr, f)
	}
	return e.pool.Go(f)
}

func (e *emulated) Wait() {
	e.pending.Wait()
	e.pool.Wait()
}

func (e *emulated) Close() { e.pool.Close() }

// emuTask is one task given to emulated.Submit, across its attempts.
type emuTask struct {
	e       *emulated
	t       Task
	attempt int // written by the attempt that runs; attempts never overlap
}

// resubmit hands the next attempt to the pool from a timer's goroutine.
func (et *emuTask) resubmit() {
	if err := et.e.goAttempt(et.t.Priority, et.run); err != nil {
		et.finish(err)
	}
}

// run is one attempt.
func (et *emuTask) run() {
	et.attempt++
	ctx := context.Background()
	cancel := context.CancelFunc(func() {})
	if et.t.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, et.t.Timeout)
	}
	err := et.t.Run(ctx)
	cancel()
	if err != nil {
		if r := et.t.Retry; r != nil && et.attempt < r.MaxAttempts {
			time.AfterFunc(Backoff(r, et.attempt), et.resubmit)
			return
		}
	}
	et.finish(err)
}

func (et *emuTask) finish(err error) {
	if et.t.Done != nil {
		et.t.Done(err)
	}
	et.e.pending.Done()
}

// Backoff returns the full-jitter delay before attempt n+1 after attempt n
// (n >= 1) failed: a uniform random duration in [0, min(Max, Base·Multiplier^(n-1))].
// A zero Multiplier counts as 2 and a zero Max as no cap.
func Backoff(r *RetryPolicy, n int) time.Duration {
	mult := r.Multiplier
	if mult == 0 {
		mult = 2
	}
	ceil := float64(r.Base) * math.Pow(mult, float64(n-1))
	if r.Max > 0 {
		ceil = min(ceil, float64(r.Max))
	}
	if ceil < 1 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}
