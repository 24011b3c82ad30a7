package kernel

import (
	"runtime"
	"time"

	"github.com/axsched/ax/queue"
)

// runFast starts a new task without the loop, if the loop opened the fast lane and
// a slot is free: it hands the attempt straight to the run queue and wakes an
// executor, as the loop would. It reports false, changing nothing, otherwise.
//
// The lane exists for latency. A task that goes through the loop waits for the
// loop's goroutine to be scheduled, and on a busy machine the OS sometimes holds
// that thread back for milliseconds: every task submitted meanwhile would wait
// too. The loop still decides: it opens the lane only as it
// parks with nothing queued — empty buckets, no backlog, no drain — so the one
// candidate to run next is the arriving task, and it closes the lane as soon as it
// wakes. Only tasks the loop needs to see start this way are excluded: delayed
// ones, ones with a timeout (a wheel entry), and all while OnEvent listens. The
// loop counts the tasks started here at its next pass (runq.fastStarted).
func (k *Kernel) runFast(h *Handle) bool {
	return k.runFastItem(h, light{lvl: h.bucket}, h.submitAt)
}

// runFastItem is runFast for a task record h or, h nil, the light task l. now is
// the task's submission time.
func (k *Kernel) runFastItem(h *Handle, l light, now int64) bool {
	k.in.mu.Lock()
	if !k.in.fast || len(k.in.tasks) > 0 || k.in.closed {
		k.in.mu.Unlock()
		return false
	}
	q := &k.rq
	q.mu.Lock()
	high := l.lvl == queue.High
	if q.stopping || q.running+q.queued() >= q.limit ||
		(!high && q.runningOther+q.otherLen() >= q.otherLimit) {
		q.mu.Unlock()
		k.in.fast = false
		k.fastOpen.Store(false)
		k.in.mu.Unlock()
		return false
	}
	// Counted before it can run and end (and h be recycled).
	k.m.submitted[l.lvl].Inc()
	k.m.started[l.lvl].Inc()
	it := ritem{l: l}
	if h != nil {
		it = ritem{a: h.cur}
		h.placed = true
		h.state.Store(uint32(Running))
		h.attempts.Store(1)
	}
	r := q.rings[l.lvl]
	grow(r, 1)
	_ = r.Push(it)
	q.noTicket++
	q.fastStarted++
	// As in the loop's hand-over, wake one executor only if none is on its way:
	// each woken executor wakes the next while tasks wait, rather than a
	// goroutine wake-up per task in a burst.
	var wake *executor
	spawn := false
	if q.needsWakeWithin(now, fastOverdue) {
		wake, spawn = q.takeForWake(now)
	}
	// Yield to the executor woken for this task, or on its way (see below), unless
	// the submissions come in a burst: a mean gap (over about 16 of them) under
	// yieldGap. A burst is better spread over the other P than handed over task by
	// task.
	// The gap is counted from when the last fast submission returned: a yield
	// must not make the next gap look long, or a burst would keep yielding.
	gap := now - max(k.in.lastFast, k.fastEnd.Load())
	k.in.gapMean += (min(max(gap, 0), int64(time.Millisecond)) - k.in.gapMean) / 16
	k.in.lastFast = now
	yield := q.coming > 0 && k.in.gapMean > yieldGap
	q.mu.Unlock()
	k.in.mu.Unlock()
	if wake != nil {
		wake.wake <- struct{}{}
	}
	if spawn {
		k.execWG.Add(1)
		go k.runExecutor(newExecutor(), nil)
	}
	if yield {
		// As a send on an unbuffered channel does: the woken executor waits on this
		// P, and a submitter that kept submitting would keep it waiting until
		// another P steals it, which the runtime does only after a pause. A burst
		// does not yield (see yieldGap): it is better spread over the other Ps.
		runtime.Gosched()
		k.fastEnd.Store(k.mono())
	}
	return true
}

// fastOverdue is how long an executor woken for waiting work may take to arrive
// before a fast-lane submitter wakes another (the loop and the executors wait
// overdue). The lane is open only while the loop is parked with nothing queued,
// so a task that finds one on its way finds it late, likely held back by the OS;
// an extra wake-up here is cheap, as the load is light.
const fastOverdue = int64(3 * time.Microsecond)

// yieldGap is the mean gap between fast-lane submissions above which a
// submitter yields its P to the executor woken for its task (runFastItem).
const yieldGap = int64(time.Microsecond)
