package kernel

import (
	"context"
	"errors"

	"github.com/axsched/ax/internal/goid"
	"github.com/axsched/ax/queue"
)

// Shutdown stops admitting tasks and drains: queued and running tasks run to their
// end; delayed tasks and retries not yet due end Abandoned with [ErrAbandoned], and
// attempts that fail while draining are not retried. It blocks until every task is
// terminal, every executor goroutine has exited — zombies of timed-out tasks
// included — and the OnEvent, OnTimeout, OnEnd and Logger handler callbacks have
// returned, and returns
// nil. If ctx ends first it returns a [*ShutdownError] wrapping ctx.Err() that
// counts what had not finished; the drain goes on, and [Kernel.Close] ends it. If
// Close begins meanwhile, Shutdown returns once Close has ended the tasks, with a
// *ShutdownError wrapping [ErrClosed] if executors were still running. Shutdown is
// idempotent and safe to call concurrently with Close.
//
// Called from the kernel's own goroutines — a task's function, an OnEvent,
// OnTimeout, OnEnd or Logger handler callback — Shutdown would wait for its caller: it begins the drain and
// returns [ErrStopFromInside] at once, and the drain completes once the caller
// returns.
func (k *Kernel) Shutdown(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	k.beginStop(ctrlShutdown)
	if k.onOwnGoroutine() {
		go k.Shutdown(context.Background()) //nolint:errcheck // it ends the stop in the background
		return ErrStopFromInside
	}
	select {
	case <-k.loopDone:
	case <-ctx.Done():
		if !isDone(k.loopDone) {
			// Stats().Queued counts the tasks in groups' queues and picked for the run
			// queue; those picked that hold no ticket count as running.
			st := k.Stats()
			queued := st.Queued.High + st.Queued.Normal + st.Queued.Low + st.Delayed
			lv := k.rq.live()
			return &ShutdownError{Err: ctx.Err(), Queued: queued, Running: st.Running + lv.started}
		}
	}
	select {
	case <-k.workDone:
	case <-k.closeCh:
		// Close ended the tasks and waits for the functions itself: a Shutdown
		// called from a goroutine a task waits for must not wait for that task.
		if !isDone(k.workDone) {
			return &ShutdownError{Err: ErrClosed, Running: k.Stats().Running}
		}
	case <-ctx.Done():
		if !isDone(k.workDone) {
			return &ShutdownError{Err: ctx.Err(), Running: k.Stats().Running}
		}
	}
	if k.dur != nil {
		// A Store method that ignores its ctx must not hold the stop beyond ctx.
		own := k.dur.own
		if own != nil && !waitFor(ctx.Done(), own.Stop) {
			return &ShutdownError{Err: ctx.Err(), Journal: int(k.dur.j.Pending())}
		}
		if err := k.dur.j.Flush(ctx); err != nil && !errors.Is(err, ErrClosed) {
			return &ShutdownError{Err: err, Journal: int(k.dur.j.Pending())}
		}
		if !waitFor(ctx.Done(), k.dur.j.Stop) {
			return &ShutdownError{Err: ctx.Err(), Journal: int(k.dur.j.Pending())}
		}
		if own != nil && !waitFor(ctx.Done(), func() { own.Leave(ctx); k.releaseOwner() }) {
			return &ShutdownError{Err: ctx.Err()}
		}
	}
	n := k.stopCallbacks(ctx.Done())
	if !k.log.Stop(ctx.Done()) {
		n++
	}
	k.m.callbacksAbandoned.Store(int64(n))
	if n > 0 {
		return &ShutdownError{Err: ctx.Err(), Callbacks: n}
	}
	return nil
}

// Close stops the kernel now: it refuses new tasks, ends queued, delayed and
// retrying tasks Canceled with [ErrClosed], and cancels the contexts of running
// tasks, which end Canceled with ErrClosed at once. It then waits up to
// Config.ZombieGrace (on Config.Clock) for the running functions, zombies
// included, and the OnEvent, OnTimeout and OnEnd callbacks to return, and logs those
// that did not; then it waits up to ZombieGrace more for the Logger's handler to
// take the kernel's records, and returns nil: Close always returns. A callback
// still running then is abandoned (its goroutine ends when it returns;
// Stats.CallbacksAbandoned counts it). With Config.Store it also waits up to
// Config.StoreTimeout for each of the journal's last commit, its stop and the
// owner's leave: a Store method that ignores its ctx holds Close no longer. Close
// is idempotent; after Shutdown it ends what the drain left.
//
// Called from the kernel's own goroutines (a task's function, an OnEvent,
// OnTimeout, OnEnd or Logger handler callback), Close ends the tasks as above but does not wait for its
// caller: it returns [ErrStopFromInside] at once, and the rest of the stop
// completes in the background.
func (k *Kernel) Close() error {
	k.beginStop(ctrlClose)
	if k.onOwnGoroutine() {
		go k.Close() //nolint:errcheck // it ends the stop in the background
		return ErrStopFromInside
	}
	<-k.loopDone
	expired := make(chan struct{})
	t := k.clk.AfterFunc(k.rc.Load().cfg.ZombieGrace, func() { close(expired) })
	defer t.Stop()
	select {
	case <-k.workDone:
	case <-expired:
		if k.log != nil {
			k.log.Warn("kernel: close returned with task functions still running", "running", k.Stats().Running)
		}
	}
	if k.dur != nil {
		// Each step waits StoreTimeout at most: a Store method that ignores its ctx
		// must not hold Close. A goroutine left waiting for it ends when it returns.
		timeout := k.rc.Load().cfg.StoreTimeout
		within := func(f func()) bool {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return waitFor(ctx.Done(), f)
		}
		own := k.dur.own
		if own != nil && !within(own.Stop) && k.log != nil {
			k.log.Warn("kernel: close stopped waiting for a store call of the owner's goroutines", "timeout", timeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := k.dur.j.Flush(ctx); err != nil && !errors.Is(err, ErrClosed) && k.log != nil {
			k.log.Warn("kernel: close gave up writing the journal; the store keeps the tasks' earlier states", "changes", k.dur.j.Pending(), "err", err)
		}
		cancel()
		if !within(k.dur.j.Stop) && k.log != nil {
			k.log.Warn("kernel: close stopped waiting for the journal's store call", "timeout", timeout)
		}
		if own != nil {
			within(func() {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				own.Leave(ctx)
				k.releaseOwner() // once the journal stopped, however long its last call takes
			})
		}
	}
	n := k.stopCallbacks(expired)
	if n > 0 && k.log != nil {
		k.log.Warn("kernel: close abandoned callbacks still running (OnEvent, OnTimeout or OnEnd)", "callbacks", n)
	}
	if k.log != nil {
		// The records above may have been queued after the grace ended: the
		// handler gets a grace of its own to take them.
		logExpired := make(chan struct{})
		lt := k.clk.AfterFunc(k.rc.Load().cfg.ZombieGrace, func() { close(logExpired) })
		if !k.log.Stop(logExpired) {
			n++
		}
		lt.Stop()
	}
	k.m.callbacksAbandoned.Store(int64(n))
	return nil
}

// waitFor runs f on a goroutine of its own and waits until it returns or limit
// is closed; it reports whether f returned. A goroutine left behind ends when f
// returns.
func waitFor(limit <-chan struct{}, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-limit:
		return isDone(done)
	}
}

// onOwnGoroutine reports whether the caller runs on one of the kernel's own
// goroutines: an executor (a task's function, a zombie's included), the OnEvent
// goroutine, the logger's goroutine or an OnTimeout worker. Shutdown and Close ask, since they wait for
// those goroutines. It costs a stack read.
func (k *Kernel) onOwnGoroutine() bool {
	gid := goid.ID()
	if _, ok := k.guarded.Load(gid); ok {
		return true
	}
	if k.sidePool.Has(gid) || (k.events != nil && k.events.GID() == gid) || k.log.OnGoroutine(gid) {
		return true
	}
	if q := k.ends.q.Load(); q != nil && q.GID() == gid {
		return true
	}
	q := &k.rq
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.execs {
		if e.gid.Load() == gid {
			return true
		}
	}
	return false
}

// beginStop refuses further submissions and tells the loop to drain or close.
func (k *Kernel) beginStop(kind ctrlKind) {
	k.cfgMu.Lock()
	k.in.mu.Lock()
	first := !k.in.closed
	k.in.closed = true
	k.releaseLazyTickets()
	k.in.mu.Unlock()
	if first {
		close(k.closedCh)
	}
	if kind == ctrlClose && !isDone(k.closeCh) {
		close(k.closeCh)
	}
	k.cfgMu.Unlock()
	select {
	case <-k.loopDone:
		return
	default:
	}
	k.control(ctrlMsg{kind: kind})
}

// stopCallbacks stops the OnTimeout pool, the event goroutine and the OnEnd
// goroutine, waiting for them until deadline, and returns how many of them were
// still running a callback then. It is called only after the loop returned, so
// that every OnEnd of a task the loop ended is delivered first.
// Its caller then stops the logger's goroutine (klog.Log.Stop), which takes what
// was logged until then, and counts the abandoned goroutines in
// Stats.CallbacksAbandoned. It may be called again.
func (k *Kernel) stopCallbacks(deadline <-chan struct{}) int {
	n := k.sidePool.Stop(deadline)
	if k.events != nil && !k.events.Stop(deadline) {
		n++
	}
	if q := k.ends.q.Load(); q != nil && !q.Stop(deadline) {
		n++
	}
	return n
}

// The loop's side of stopping: only the loop goroutine calls what follows.

// beginDrain starts Shutdown: delayed tasks and retries not yet due end Abandoned.
func (k *Kernel) beginDrain() {
	if k.ls.draining || k.ls.closing {
		return
	}
	k.ls.draining = true
	k.dropBacklog()
	k.endPool(Abandoned, ErrAbandoned)
	k.endParked(Abandoned)
	var keep []*attempt
	var ended []*Handle
	var keepGate []uint64
	k.ls.wheel.Clear(func(e timerEntry) {
		a := e.a
		if a == nil {
			if isGateEntry(&e) {
				keepGate = append(keepGate, e.t.meta)
				return
			}
			k.endLazy(&e.t, Abandoned)
			return
		}
		if a.tkind == timerDue {
			h := a.h
			a.tkind = timerNone
			k.ls.delayed[h.ticket()]--
			k.release(h.ticket(), 1)
			k.m.abandoned[h.bucket].Inc()
			ended = append(ended, h)
			return
		}
		keep = append(keep, a)
	})
	for _, a := range keep {
		k.schedule(a, a.tkind, a.timerAt)
	}
	for _, slot := range keepGate {
		k.keepGateEntry(slot)
	}
	for _, h := range ended { // once the gate's entries are back: an end may free an Ordered key
		k.end(h, Abandoned, ErrAbandoned)
	}
}

// closeAll is Close: every task ends now.
func (k *Kernel) closeAll() {
	if k.ls.closing {
		return
	}
	k.ls.closing = true
	k.ls.draining = false
	k.dropBacklog()
	k.endPool(Canceled, ErrClosed)
	k.endParked(Canceled)
	k.closeGate()
	for l := range queue.NumLevels {
		k.ls.buckets.Bucket(queue.Level(l)).Clear(func(it qitem) {
			k.m.canceled[l].Inc()
			if it.h == nil {
				k.release(queue.Level(l), 1)
				k.ls.live-- // a light task ends here
				return
			}
			if it.h.cur.permit {
				k.gateRelease(it.h.cur)
			}
			k.release(it.h.ticket(), 1)
			k.end(it.h, Canceled, ErrClosed)
		})
	}
	k.ls.wheel.Clear(func(e timerEntry) {
		a := e.a
		if a == nil {
			if isGateEntry(&e) {
				k.dropGateEntry(e.t.meta)
				return
			}
			k.endLazy(&e.t, Canceled)
			return
		}
		if a.tkind == timerDue {
			h := a.h
			k.ls.delayed[h.ticket()]--
			k.release(h.ticket(), 1)
			k.m.canceled[h.bucket].Inc()
			k.end(h, Canceled, ErrClosed)
		}
		a.tkind = timerNone
	})
	var ended []*attempt
	for a := range k.ls.gated {
		a.settled = true
		ended = append(ended, a)
	}
	clear(k.ls.gated)
	q := &k.rq
	q.mu.Lock()
	// The attempts handed over and not handed back: waiting in the run queue, or
	// running on an executor.
	inflight := func(a *attempt) {
		if !a.finished && !a.settled {
			a.settled = true
			ended = append(ended, a)
		}
	}
	var lightEnded [queue.NumLevels]int
	k.lightClosed.Store(true) // a light task popped and not started yet does not start
	for _, r := range q.rings {
		// Light tasks leave the run queue here (nobody could tell an executor to
		// skip one); attempts stay, settled, and are skipped when popped.
		var keep []ritem
		r.Clear(func(it ritem) {
			if it.a == nil {
				lightEnded[it.l.lvl]++
				q.tickets[it.l.tk]++ // given back as if an executor took it
				return
			}
			inflight(it.a)
			keep = append(keep, it)
		})
		for _, it := range keep {
			_ = r.Push(it)
		}
	}
	for _, e := range q.execs {
		if e.cur != nil {
			inflight(e.cur)
		}
		if e.lightRunning && !e.lightSettled {
			e.lightSettled = true
			lightEnded[e.light.lvl]++
		}
	}
	q.mu.Unlock()
	k.lightCancel()
	for l, n := range lightEnded {
		k.m.canceled[l].Add(n)
		k.ls.live -= n
	}
	for _, a := range ended {
		k.durableEnded(a)
		a.ctx.Cancel(context.Canceled)
		k.m.canceled[a.h.bucket].Inc()
		k.end(a.h, Canceled, ErrClosed)
	}
	k.ls.freed = true
}

// stopExecutors tells idle executors to exit; busy ones exit when they finish.
func (k *Kernel) stopExecutors() {
	q := &k.rq
	q.mu.Lock()
	q.stopping = true
	idle := q.idle
	q.idle = nil
	q.coming += len(idle)
	k.checkWorkDone()
	q.mu.Unlock()
	for _, e := range idle {
		e.wake <- struct{}{}
	}
	k.publish()
}
