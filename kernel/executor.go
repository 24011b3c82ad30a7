package kernel

import (
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/queue"
)

// runq is the hand-off between the loop and the executors. The loop alone decides
// what goes in, in which order and how many may run (limit, otherLimit); executors
// take the head when they free a slot, without waiting for a loop pass, and hand
// finished attempts back in done. Every field is guarded by mu.
//
// Executors count their own starts and completions under mu, the lock they take
// anyway to pop the next attempt: no channel operation per task.
type runq struct {
	mu spinMutex

	// rings hold the chosen attempts and light tasks by level. An executor takes
	// High first, then Normal, then Low: a pick made ahead never makes a
	// higher-priority pick wait (see Kernel.dispatch).
	rings       [queue.NumLevels]*queue.Ring[ritem]
	done        []*attempt  // finished attempts, swapped out by the loop
	lightFailed []lightDone // light tasks that failed, swapped out by the loop

	idle    []*executor // parked executors, most recent last
	coming  int         // executors woken and not yet back under mu
	wokenAt int64       // mono: when the last of them was woken or started

	pops     uint64 // attempts and light tasks popped, ever
	popAt    int64  // mono: when an executor last popped
	lastLong bool   // the task handed back last ran overdue or longer
	wakeMark uint64 // pops when an executor was last woken or started for waiting work
	workers  int    // live executors, zombies excluded

	running      int // attempts executing, zombies excluded
	runningOther int // of which not High
	zombies      int
	fastDone     int         // attempts executors settled themselves since the loop's last pass
	fastStarted  int         // tasks submitters started on the fast lane since the loop's last pass
	execs        []*executor // live executor goroutines, zombies included: Close finds running attempts here

	limit      int // MaxConcurrency
	otherLimit int // MaxConcurrency - Reserve.High
	maxZombies int

	loopWaiting    bool // the loop parked and wants a poke on the next completion
	loopWantsRoom  bool // ...even one an executor settles itself (tasks wait, or the kernel drains)
	loopRefillAt   int  // ...but, unless it drains, only once the run queue holds this many or fewer
	stopping       bool // executors exit once nothing is left to run
	workDoneClosed bool
}

// overdue is how long an executor woken for waiting work may take to arrive
// before another is woken for it. Normally one arrives within microseconds, and
// each arrival wakes the next while work waits, so one wake-up is on the way at a
// time. But the OS sometimes holds a thread back for milliseconds (a 2-core
// machine showed 4 ms stalls): without a bound, every task submitted meanwhile
// waited for that one executor, while the submitter's own core was free to run
// another.
const overdue = int64(20 * time.Microsecond)

// needsWake reports whether work waiting in the run queue needs an executor woken
// at mono time now: none is on the way, or the last one woken is overdue.
func (q *runq) needsWake(now int64) bool { return q.needsWakeWithin(now, overdue) }

// needsWakeWithin is needsWake with late as the bound on a woken executor's
// arrival (overdue, or fastOverdue on the fast lane).
func (q *runq) needsWakeWithin(now, late int64) bool {
	return q.queued() > 0 && (q.coming == 0 || now-q.wokenAt > late)
}

// chainWake reports whether an executor (or the loop, handing work over) should
// wake another executor for waiting work: needsWake, and either the work is
// long (the caller's last task, or the last task any executor handed back, ran
// overdue or longer: such work blocks, and needs more executors) or nobody but
// the last one woken took work since the last wake-up. When executors keep popping short tasks, those awake drain them:
// waking more only made them contend for mu (a no-op task cost a third less with
// the chain damped so, and the executors used fell from about 60 to 8). If every
// executor awake then takes a long task at once, the loop's stall check restarts
// the chain (Kernel.checkStall).
func (q *runq) chainWake(now int64, long bool) bool {
	return q.needsWake(now) && (long || q.lastLong || q.pops-q.wakeMark <= 1)
}

// takeForWake takes an idle executor to wake, or counts one to start (spawn),
// for work waiting at mono time now. Called with mu held.
func (q *runq) takeForWake(now int64) (wake *executor, spawn bool) {
	switch {
	case len(q.idle) > 0:
		wake = q.idle[len(q.idle)-1]
		q.idle = q.idle[:len(q.idle)-1]
	case q.workers < q.limit && !q.stopping:
		q.workers++
		spawn = true
	default:
		return nil, false
	}
	q.coming++
	q.wokenAt = now
	q.wakeMark = q.pops
	return wake, spawn
}

// cycling reports whether some executor is awake and popped work in the last
// overdue/4 before now: it will be back for more at once.
func (q *runq) cycling(now int64) bool {
	return q.workers > len(q.idle) && now-q.popAt < overdue/4
}

// takeRefillPoke reports whether a success an executor settled itself should
// poke the parked loop: the loop waits for room (or drains) and the run queue
// ran low (loopRefillAt). It clears loopWaiting when it does. Called with mu held.
func (q *runq) takeRefillPoke() bool {
	if q.loopWaiting && q.loopWantsRoom && q.poppableLen() <= q.loopRefillAt {
		q.loopWaiting = false
		return true
	}
	return false
}

// poppableLen returns how many waiting attempts and light tasks executors could
// pop now (Normal and Low ones only while the reserve leaves them a slot).
func (q *runq) poppableLen() int {
	n := q.rings[queue.High].Len()
	if q.runningOther < q.otherLimit {
		n += q.otherLen()
	}
	return n
}

// otherLen returns how many Normal and Low picks wait in the run queue.
func (q *runq) otherLen() int { return q.rings[queue.Normal].Len() + q.rings[queue.Low].Len() }

// poppable reports whether an executor could pop something now.
func (q *runq) poppable() bool {
	return q.rings[queue.High].Len() > 0 || (q.otherLen() > 0 && q.runningOther < q.otherLimit)
}

// register adds e to execs, once.
func (q *runq) register(e *executor) {
	if e.slot < 0 {
		e.slot = len(q.execs)
		q.execs = append(q.execs, e)
	}
}

// unregister removes e from execs: its goroutine exits.
func (q *runq) unregister(e *executor) {
	if i := e.slot; i >= 0 {
		last := len(q.execs) - 1
		q.execs[i] = q.execs[last]
		q.execs[i].slot = i
		q.execs[last] = nil
		q.execs = q.execs[:last]
		e.slot = -1
	}
}

// queued returns the number of attempts waiting in the run queue.
func (q *runq) queued() int { return q.rings[queue.High].Len() + q.otherLen() }

// pop takes the next attempt or light task an executor may start: the oldest
// High pick, else the oldest Normal one, else the oldest Low one, honouring the
// reserve.
func (q *runq) pop() (ritem, bool) {
	if it, ok := q.rings[queue.High].Pop(); ok {
		q.pops++
		return it, true
	}
	if q.runningOther < q.otherLimit || q.stopping {
		for _, r := range q.rings[queue.Normal:] {
			if it, ok := r.Pop(); ok {
				q.pops++
				q.runningOther++
				return it, true
			}
		}
	}
	return ritem{}, false
}

// checkWorkDone closes workDone once the kernel stops and no executor goroutine,
// zombie or not, is left. Called with rq.mu held.
func (k *Kernel) checkWorkDone() {
	q := &k.rq
	if q.stopping && q.workers == 0 && q.zombies == 0 && !q.workDoneClosed {
		q.workDoneClosed = true
		close(k.workDone)
	}
}

// settlesItself reports whether an executor may settle a finished attempt without
// the loop: it succeeded, the loop did not end it already (timeout, Close), it has
// no timeout entry in the wheel to cancel, nobody listens for events, and it is not
// durable (the loop journals its success). Called
// with runq.mu held.
func (k *Kernel) settlesItself(a *attempt) bool {
	return a.err == nil && !a.settled && a.h.timeout == 0 && k.events == nil && a.h.dur == nil && !a.h.named
}

// finishFast settles a succeeded attempt on its executor (see settlesItself). The
// task is Running and only the loop's Cancel could touch it, which success
// outranks, so it ends Succeeded here; the loop takes runq.fastDone off its count
// of live tasks at its next pass.
func (k *Kernel) finishFast(a *attempt) {
	h := a.h
	h.state.Store(uint32(Succeeded))
	k.m.succeeded[h.bucket].Inc()
	k.m.observe(a.exec.shard, h.bucket, time.Duration(a.startAt-h.submitAt), time.Duration(a.endAt-a.startAt))
	if h.batch != nil {
		h.batch.memberDone()
	}
	if h.pooled {
		recycle(h, a)
	} else {
		h.finish(nil)
	}
}

// executor is one pooled goroutine that runs attempts.
type executor struct {
	wake  chan struct{} // size 1: a wake-up is never lost and never blocks the waker
	fresh bool          // started by the loop and counted in runq.coming; guarded by runq.mu
	gid   atomic.Uint64 // goroutine id, for zombie stack dumps and onOwnGoroutine; set by its goroutine
	shard int           // immutable: its shard of the histograms (histShards)
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
	e.gid.Store(goroutineID())
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
	var fast *attempt
	lightOK := false
	if e.lightRunning {
		e.lightRunning = false
		q.running--
		if e.light.lvl != queue.High {
			q.runningOther--
		}
		switch {
		case e.lightSettled:
			e.lightSettled = false // Close ended it
		case e.lightErr == nil:
			// As a record's success below: counted here, finished after the lock.
			q.fastDone++
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
			q.running--
			if prev.h.prio != High {
				q.runningOther--
			}
			q.fastDone++
			fast = prev
			poke = q.takeRefillPoke() || poke
		default:
			q.running--
			if prev.h.prio != High {
				q.runningOther--
			}
			q.done = append(q.done, prev)
			poke = q.loopWaiting
			q.loopWaiting = false
		}
	}
	// A success settled here (fast, lightOK) is finished after the lock is released
	// on the way out below, so that finishing one task and taking the next cost one
	// critical section, not two.
	for {
		if q.workers > q.limit || (q.stopping && q.queued() == 0) {
			if fast != nil || lightOK {
				// Finish it before this executor counts as gone: Shutdown returns once
				// the last one is, and every task must be terminal by then.
				q.mu.Unlock()
				k.finishSuccess(e, fast, lightOK, now)
				fast, lightOK = nil, false
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
			q.popAt = now
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
			if fast != nil {
				k.finishFast(fast)
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
		if fast != nil || lightOK {
			k.finishSuccess(e, fast, lightOK, now)
			fast, lightOK = nil, false
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

// finishSuccess finishes the successes next settled: a record's (fast) and e's
// light task (lightOK), which ended at endAt.
func (k *Kernel) finishSuccess(e *executor, fast *attempt, lightOK bool, endAt int64) {
	if fast != nil {
		k.finishFast(fast)
	}
	if lightOK {
		k.finishLight(e, &e.light, e.lightStart, endAt)
	}
}

// execute runs one attempt's function, recovering a panic into *PanicError. A
// context already cancelled (the task was cancelled while it waited in the run
// queue) skips the function.
func (k *Kernel) execute(a *attempt) {
	if a.ctx.canceled.Load() {
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
}
