package kernel

import (
	"time"

	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/timewheel"
)

// accept takes in a newly submitted task.
func (k *Kernel) accept(h *Handle) {
	k.ls.live++
	k.ls.pendSubmitted[h.bucket]++
	if h.has(featBatch) && h.batch.canceled() {
		k.flushCounts() // counted submitted before it is counted ended
		k.release(h.ticket(), 1)
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, h.batch.cause())
		return
	}
	if h.due && h.dueAt > k.ls.nowMono {
		k.toWheel(h, h.cur, Delayed, k.at(h.dueAt), nil)
		return
	}
	k.toBucket(h, 0)
}

// toBucket queues a task in its bucket. from is its previous state (0 when new).
func (k *Kernel) toBucket(h *Handle, from State) {
	if h.has(featGroup) {
		k.gateIn(h, from)
		return
	}
	k.pushBucket(h)
	k.setState(h, Queued)
	if from != 0 || k.events != nil {
		k.emit(h, from, Queued, h.cur, nil)
	}
}

// toWheel parks a task's attempt in the wheel until at (delay or retry backoff).
// err is the error of the attempt that failed, for a retry.
func (k *Kernel) toWheel(h *Handle, a *attempt, to State, at time.Time, err error) {
	from := k.setState(h, to)
	k.emit(h, from, to, a, err)
	k.schedule(a, timerDue, at)
	k.ls.delayed[h.ticket()]++
}

// onTimer handles a wheel entry that came due.
func (k *Kernel) onTimer(e timerEntry) {
	a := e.a
	if a == nil {
		if isGateEntry(&e) {
			k.onGateTimer(e.t.meta)
			return
		}
		k.ls.delayed[levelOf(e.t.prio())]--
		k.toBucket(k.lazyHandle(&e.t), 0)
		return
	}
	kind := a.tkind
	a.tkind = timerNone
	a.timer = timewheel.Handle[timerEntry]{}
	switch kind {
	case timerDue:
		k.ls.delayed[a.h.ticket()]--
		if a.budgetWait && !k.retryDue(a) {
			return
		}
		k.toBucket(a.h, State(a.h.state.Load()))
	case timerTimeout:
		k.onTimeout(a)
	case timerGrace:
		k.onGrace(a)
	}
}

// evictNewestLow ends the newest queued Low task with ErrEvicted for a High
// submitter that found no room (Config.EvictLow), and reports whether there was
// one. Its ticket passes to the submitter's task (Handle.evicts), so the total of
// waiting tasks stays within the total capacity, and Low submitters find no room
// the evicting task took.
func (k *Kernel) evictNewestLow() bool {
	if k.ls.draining || k.ls.closing {
		return false
	}
	v, ok := k.ls.buckets.Bucket(queue.Low).PopBack()
	if !ok {
		return false
	}
	k.m.evicted[queue.Low].Inc()
	if v.h == nil {
		k.ls.live-- // a light task ends here
		return true
	}
	if v.h.cur.permit {
		k.gateRelease(v.h.cur)
	}
	k.end(v.h, Evicted, ErrEvicted)
	return true
}

// admitBacklog takes in recovered durable tasks, in their order, as long as their
// buckets have room: recovery never overfills the kernel nor refuses a stored task.
func (k *Kernel) admitBacklog() {
	for l := range queue.NumLevels {
		b := k.ls.backlog[l]
		if len(b) == 0 {
			continue
		}
		n := 0
		for n < len(b) && k.tryAcquire(queue.Level(l), 1, k.ls.rcl) == nil {
			k.accept(b[n])
			n++
		}
		if n == len(b) {
			k.ls.backlog[l] = nil
		} else {
			clear(b[:n])
			k.ls.backlog[l] = b[n:]
		}
	}
}

// backlogEmpty reports whether no recovered task waits for a ticket.
func (k *Kernel) backlogEmpty() bool {
	return len(k.ls.backlog[0]) == 0 && len(k.ls.backlog[1]) == 0 && len(k.ls.backlog[2]) == 0
}

// dropBacklog forgets the recovered tasks not taken in yet: the process stops and
// their rows stay live for the next kernel.
func (k *Kernel) dropBacklog() {
	for l := range queue.NumLevels {
		for _, h := range k.ls.backlog[l] {
			k.abortDurable(h)
		}
		k.ls.backlog[l] = nil
	}
}
