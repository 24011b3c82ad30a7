package kernel

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/axsched/ax/internal/goid"
	"github.com/axsched/ax/queue"
)

// executor is one pooled goroutine that runs attempts.
type executor struct {
	wake  chan struct{} // size 1: a wake-up is never lost and never blocks the waker
	fresh bool          // started by the loop and counted in runq.coming; guarded by runq.mu
	gid   atomic.Uint64 // goroutine id, for zombie stack dumps and onOwnGoroutine; set by its goroutine
	shard int           // immutable: its shard of the histograms (hist.Shards)
	cur   *attempt      // the attempt it runs, nil between attempts; guarded by runq.mu
	slot  int           // its index in runq.execs, -1 while not in it; guarded by runq.mu

	// The light task it runs or ran last.
	light        light // guarded by runq.mu
	lightRunning bool  // light is running or just ran; guarded by runq.mu
	lightSettled bool  // Close ended light already; guarded by runq.mu
	lightStart   int64 // mono; executor-owned
	lightErr     error // what light returned; executor-owned
}

// newExecutor returns an executor the loop or a submitter is about to start (and
// counted in runq.coming).
func newExecutor() *executor {
	return &executor{wake: make(chan struct{}, 1), fresh: true, slot: -1, shard: int(executorSeq.Add(1))}
}

// executorSeq numbers executors, to spread them over the histograms' shards.
var executorSeq atomic.Uint32

// runExecutor is the body of an executor goroutine. It pops attempts from the run
// queue until the kernel stops or the concurrency limit shrinks below the number of
// executors. prev is an attempt to hand back first (see the Goexit case below).
func (k *Kernel) runExecutor(e *executor, prev *attempt) {
	e.gid.Store(goid.ID())
	var cur *attempt
	inLight := false
	defer func() {
		if cur != nil || inLight {
			// The function called runtime.Goexit: deferred calls run and the goroutine
			// ends, whatever we do. Record it as a *PanicError and let a fresh goroutine
			// take this executor's place, handing the attempt back first (a light task
			// is handed back from e).
			err := &PanicError{Goexit: true, Stack: debug.Stack()}
			if cur != nil {
				cur.err = err
			} else {
				e.lightErr = err
			}
			k.execWG.Add(1)
			go k.runExecutor(e, cur)
		}
		k.execWG.Done()
	}()
	for {
		it, ok := k.next(e, prev)
		if !ok {
			return
		}
		if a := it.a; a != nil {
			cur = a
			k.execute(a)
			cur = nil
			prev = a
			continue
		}
		inLight = true
		e.lightErr = k.executeLight(&it.l)
		inLight = false
		prev = nil
	}
}

// next hands prev (the attempt this executor just ran, or nil; a light task it
// ran is in e) back to the loop and returns the next attempt or light task to
// run, parking while there is none. It reports false when the executor must exit.
func (k *Kernel) next(e *executor, prev *attempt) (ritem, bool) {
	q := &k.rq
	now := k.mono()
	poke := false
	// Whether the task this executor ran was long (see chainWake).
	long := false
	if prev != nil {
		long = now-prev.startAt >= overdue
	} else if e.lightRunning {
		long = now-e.lightStart >= overdue
	}
	q.mu.Lock()
	if e.fresh {
		e.fresh = false
		q.coming--
	}
	q.register(e)
	e.cur = nil
	if prev != nil || e.lightRunning {
		q.lastLong = long
	}
	var selfDone *attempt
	lightOK := false
	if e.lightRunning {
		e.lightRunning = false
		q.ran(e.light.lvl)
		switch {
		case e.lightSettled:
			e.lightSettled = false // Close ended it
		case e.lightErr == nil:
			// As a record's success below: counted here, finished after the lock.
			q.selfSettled++
			lightOK = true
			poke = q.takeRefillPoke() || poke
		default:
			q.lightFailed = append(q.lightFailed, lightDone{l: e.light, err: e.lightErr, startAt: e.lightStart, endAt: now})
			e.lightErr = nil
			poke = q.loopWaiting
			q.loopWaiting = false
		}
	}
	if prev != nil {
		prev.endAt = now
		prev.finished = true
		switch {
		case prev.detached:
			// A zombie came back. It rejoins the pool only if the pool is short.
			q.done = append(q.done, prev)
			poke = q.loopWaiting
			q.loopWaiting = false
			q.zombies--
			if q.workers >= q.limit || q.stopping {
				q.unregister(e)
				k.checkWorkDone()
				q.mu.Unlock()
				if poke {
					k.poke()
				}
				return ritem{}, false
			}
			q.workers++
		case k.settlesItself(prev):
			// The common case needs no loop pass: count it here, finish it below. The
			// loop hears of it only when it waits for room or for the kernel to drain.
			q.ran(levelOf(prev.h.prio))
			q.selfSettled++
			selfDone = prev
			poke = q.takeRefillPoke() || poke
		default:
			q.ran(levelOf(prev.h.prio))
			q.done = append(q.done, prev)
			poke = q.loopWaiting
			q.loopWaiting = false
		}
	}
	// A success settled here (selfDone, lightOK) is finished after the lock is released
	// on the way out below, so that finishing one task and taking the next cost one
	// critical section, not two.
	for {
		if q.workers > q.limit || (q.stopping && q.queued() == 0) {
			if selfDone != nil || lightOK {
				// Finish it before this executor counts as gone: Shutdown returns once
				// the last one is, and every task must be terminal by then.
				q.mu.Unlock()
				k.finishSuccess(e, selfDone, lightOK, now)
				selfDone, lightOK = nil, false
				q.mu.Lock()
				continue
			}
			q.workers--
			q.unregister(e)
			k.checkWorkDone()
			q.mu.Unlock()
			if poke {
				k.poke()
			}
			return ritem{}, false
		}
		if it, ok := q.pop(); ok {
			q.running++
			if (it.a != nil && it.a.h.prio == Low) || (it.a == nil && it.l.lvl == queue.Low) {
				q.runningLow++
			}
			q.popAt = now
			// The entry's ticket goes back with the loop's next pass; a submitter
			// waiting for room meanwhile gets the parked loop poked for it.
			q.tickets[it.l.tk]++
			if it.l.tk != 0 && !q.hinted {
				q.hinted = true
				k.ticketsBack.Store(true)
			}
			if q.loopWaiting && it.l.tk != 0 && k.roomWanted() {
				q.loopWaiting = false
				poke = true
			}
			// A success of a light task must be finished before e.light changes.
			var done light
			if lightOK {
				done = e.light
			}
			if a := it.a; a != nil {
				a.started = true
				a.startAt = now
				a.exec = e
				e.cur = a
				if a.unstarted {
					// Its key and group wait for its start to grant another permit
					// under their rates (gateStarted): the loop hears of it at its next
					// pass, at once if a key or a group waits for it (runq.ratedPoke).
					q.rated = append(q.rated, a)
					if q.loopWaiting && q.ratedPoke {
						q.loopWaiting = false
						poke = true
					}
				}
			} else {
				e.light = it.l
				e.lightRunning = true
			}
			// Wake (or start) the next executor only if work is left and nobody is
			// already on the way: executors that keep finishing tasks keep taking them,
			// so CPU-bound work runs on few goroutines, while blocking work ramps up
			// one wake at a time, each woken executor waking the next.
			var wake *executor
			var spawn bool
			if q.chainWake(now, long) {
				wake, spawn = q.takeForWake(now)
			}
			q.mu.Unlock()
			if selfDone != nil {
				k.finishSelfSettled(selfDone)
			}
			if lightOK {
				k.finishLight(e, &done, e.lightStart, now)
			}
			if it.a == nil {
				e.lightStart = now
			}
			if wake != nil {
				wake.wake <- struct{}{}
			}
			if spawn {
				k.execWG.Add(1)
				go k.runExecutor(newExecutor(), nil)
			}
			// The loop is readied last: a goroutine readied after it would take its
			// place as this P's next to run and push it to the back of the P's queue,
			// behind every executor a bunch of timers readied there.
			if poke {
				k.poke()
			}
			return it, true
		}
		q.idle = append(q.idle, e)
		q.mu.Unlock()
		if selfDone != nil || lightOK {
			k.finishSuccess(e, selfDone, lightOK, now)
			selfDone, lightOK = nil, false
		}
		if poke {
			k.poke()
			poke = false
		}
		<-e.wake
		now = k.mono()
		q.mu.Lock()
		q.coming--
	}
}

// execute runs one attempt's function, recovering a panic into *PanicError. A
// context already cancelled (the task was cancelled while it waited in the run
// queue) skips the function.
func (k *Kernel) execute(a *attempt) {
	if a.ctx.Canceled() {
		a.err = a.ctx.Err()
		return
	}
	defer func() {
		if r := recover(); r != nil {
			a.err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	if h := a.h; h.run != nil {
		a.err = h.run(&a.ctx)
	} else {
		a.err = h.batch.runI(&a.ctx, h.idx)
	}
	if a.err != nil && a.h.has(featGroup) {
		k.classify(a)
	}
}
