package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/internal/breaker"
)

// settleAttempt handles an attempt an executor handed back.
func (k *Kernel) settleAttempt(a *attempt) {
	h := a.h
	k.durableEnded(a) // what follows journals its end or retry, if not done at its timeout
	if a.zombie != nil {
		k.zombieReturned(a)
	}
	rateLimited := false
	if a.brAdmitted && !a.brReported {
		k.breakerDone(a, k.outcomeOf(a))
	}
	if a.err != nil && !a.settled && h.cancelErr == nil && !k.ls.closing && h.has(featGroup) {
		// The key pauses before its permit returns, so that no other task of the
		// key takes it meanwhile.
		var d time.Duration
		if d, rateLimited = isRateLimited(a.err); rateLimited {
			k.holdKey(h.ext.ks, d)
		}
	}
	if a.permit {
		k.gateRelease(a)
	}
	if a.settled {
		return // timed out or closed earlier; the caller already knows
	}
	if a.tkind == timerTimeout {
		k.ls.wheel.Cancel(a.timer)
		a.tkind = timerNone
	}
	k.m.observe(0, h.bucket, time.Duration(a.startAt-h.submitAt), time.Duration(a.endAt-a.startAt))
	err := a.err
	if rateLimited {
		k.rateLimited(h, a)
		return
	}
	switch {
	case err == nil:
		k.m.succeeded[h.bucket].Inc()
		k.end(h, Succeeded, nil)
		recycle(h, a)
	case h.cancelErr != nil:
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, h.cancelErr)
	case errors.As(err, new(*PanicError)): // allocates only for a failed attempt
		// A panic is a bug; retrying it rarely helps. It ends the task Failed.
		k.m.panics[h.bucket].Inc()
		k.m.failed[h.bucket].Inc()
		k.end(h, Failed, err)
		recycle(h, a)
	default:
		k.retryOrEnd(h, a, err, Failed)
	}
}

// retryOrEnd schedules the next attempt if the policy and the budget allow, and
// otherwise ends the task in state final with err. A durable task's retry that
// the budget refuses waits for it instead (retryDue), at its backoff or when the
// budget's window next slides, whichever is later.
func (k *Kernel) retryOrEnd(h *Handle, a *attempt, err error, final State) {
	p := h.retry
	if p == nil {
		p = k.ls.rcl.retry[h.bucket]
	}
	more := !IsPermanent(err) && int(a.n) < p.MaxAttempts
	retry := more && !k.ls.draining && !k.ls.closing && (!h.has(featBatch) || !h.batch.canceled())
	refused := retry && !k.breakerHolds(h) && !k.ls.budget.Allow(k.ls.now)
	if refused {
		k.retryRefused(h, a, err)
	}
	if retry && (!refused || h.has(featDurable)) {
		na := &attempt{h: h, n: a.n + 1, budgetWait: refused}
		na.ctx.a = na
		na.ctx.parent = a.ctx.parent
		h.cur = na
		k.waiting[h.bucket].Add(1) // a retry re-enters without a ticket check (growBucket)
		h.evicts = false           // ...and holds a ticket of its own level
		k.m.retried[h.bucket].Inc()
		at := k.ls.now.Add(k.backoff(p, int(a.n), err))
		if refused {
			at = k.ls.budget.Refill(k.ls.now, at)
		}
		if h.has(featDurable) {
			k.journalRetry(h, a, at, err, final)
		}
		k.toWheel(h, na, Retrying, at, err)
		return
	}
	if more && h.has(featDurable) && (k.ls.draining || k.ls.closing) {
		// The process stops, not the task: the store keeps it for a retry by the next
		// kernel, after its backoff.
		k.journalRetry(h, a, k.ls.now.Add(k.backoff(p, int(a.n), err)), err, final)
		h.dur.keepLive = true
	}
	if refused {
		err = fmt.Errorf("%w: %w", ErrRetryBudget, err)
	}
	if final == TimedOut {
		k.m.timedOut[h.bucket].Inc()
	} else {
		k.m.failed[h.bucket].Inc()
	}
	k.end(h, final, err)
}

// onTimeout handles the timeout entry of a running attempt.
func (k *Kernel) onTimeout(a *attempt) {
	h := a.h
	q := &k.rq
	q.mu.Lock()
	if a.finished {
		q.mu.Unlock() // its completion is on its way
		return
	}
	if !a.started {
		q.mu.Unlock() // still in the run queue: the timeout counts from the start
		k.schedule(a, timerTimeout, k.ls.now.Add(h.timeout))
		return
	}
	if dl := k.at(a.startAt).Add(h.timeout); dl.After(k.ls.now) {
		q.mu.Unlock()
		k.schedule(a, timerTimeout, dl)
		return
	}
	detach := q.zombies < q.maxZombies
	if detach {
		a.detached = true
		q.zombies++
		q.ran(levelOf(h.prio))
		q.workers--
	}
	startAt := a.startAt
	a.settled = true
	q.mu.Unlock()
	a.ctx.Cancel(context.DeadlineExceeded)
	k.m.observe(0, h.bucket, time.Duration(startAt-h.submitAt), time.Duration(k.ls.nowMono-startAt))
	if h.has(featOnTimeout) {
		f, n := h.ext.onTimeout, int(a.n)
		if !k.sidePool.Submit(func() { f(n) }) {
			k.m.onTimeoutDropped.Inc()
		}
	}
	if detach {
		k.zombieStarted(a)
	}
	if a.brAdmitted {
		k.breakerDone(a, breaker.Failure) // judged at its timeout, even if its function runs on
	}
	// Its retry or end is journaled now, even if its function runs on: the store no
	// longer shows it Running.
	k.durableEnded(a)
	k.retryOrEnd(h, a, ErrTimeout, TimedOut)
}

// settlesItself reports whether an executor may settle a finished attempt without
// the loop: it succeeded, the loop did not end it already (timeout, Close), it has
// no timeout entry in the wheel to cancel, nobody listens for events, and it is not
// durable (the loop journals its success). Called
// with runq.mu held.
func (k *Kernel) settlesItself(a *attempt) bool {
	return a.err == nil && !a.settled && a.h.timeout == 0 && k.events == nil && !a.h.has(featLoopEnd)
}

// finishSelfSettled settles a succeeded attempt on its executor (see
// settlesItself). The task is Running and only the loop's Cancel could touch it,
// which success outranks, so it ends Succeeded here; the loop takes
// runq.selfSettled off its count of live tasks at its next pass.
func (k *Kernel) finishSelfSettled(a *attempt) {
	h := a.h
	h.state.Store(uint32(Succeeded))
	k.m.succeeded[h.bucket].Inc()
	k.m.observe(a.exec.shard, h.bucket, time.Duration(a.startAt-h.submitAt), time.Duration(a.endAt-a.startAt))
	if h.has(featBatch) {
		h.batch.memberDone()
	}
	if h.pooled {
		recycle(h, a)
	} else {
		a.ctx.Freeze() // before finish: Handle.Result reads it
		h.finish(nil)
	}
}

// finishSuccess finishes the successes next settled on the executor: a record's
// (selfDone) and e's light task (lightOK), which ended at endAt.
func (k *Kernel) finishSuccess(e *executor, selfDone *attempt, lightOK bool, endAt int64) {
	if selfDone != nil {
		k.finishSelfSettled(selfDone)
	}
	if lightOK {
		k.finishLight(e, &e.light, e.lightStart, endAt)
	}
}

// finishLight settles a light task that succeeded on its executor, as
// finishSelfSettled does a record.
func (k *Kernel) finishLight(e *executor, l *light, startAt, endAt int64) {
	k.m.succeeded[l.lvl].Inc()
	k.m.observe(e.shard, l.lvl, time.Duration(startAt-l.at), time.Duration(endAt-startAt))
}
