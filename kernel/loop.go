package kernel

import (
	"math"
	"time"

	"github.com/axsched/ax/queue"
)

// loop is the scheduler: the only goroutine that decides what runs next and how
// many run. It parks when it has nothing to do, on its poke channel and on one
// timer armed for the wheel's next expiry.
func (k *Kernel) loop() {
	defer close(k.loopDone)
	defer k.m.recent.Freeze()       // before loopDone closes: Stats of a stopped kernel stay still
	defer k.m.group.Leave(k.m.name) // a stopped kernel gives its name on a shared set up
	defer k.lightCancel()
	for {
		k.pass()
		// A drain waits for the commits holding prestarts (prestart.go): their
		// tasks were acknowledged and run here.
		if (k.ls.draining || k.ls.closing) && k.ls.live == 0 && (k.ls.closing || k.ls.startReserved == 0 && k.ls.adoptReserved == 0) {
			k.markReady()
			k.stopExecutors()
			k.drainPrestarts()
			return
		}
		k.park()
		k.markReady() // if park returned at once
	}
}

// markReady tells New, once, that the loop has run its first pass and parked.
// Loop only.
func (k *Kernel) markReady() {
	if !k.ls.readyMarked {
		k.ls.readyMarked = true
		close(k.ready)
	}
}

// pass handles everything that arrived since the last pass, then dispatches.
func (k *Kernel) pass() {
	k.ls.nowMono = k.mono()
	k.ls.now = k.at(k.ls.nowMono)
	if k.fastOpen.Load() {
		// The loop decides again: it closes the fast lane before anything (a timer
		// that came due) can fill a bucket, and reopens it as it parks.
		k.in.mu.Lock()
		k.in.fast = false
		k.fastOpen.Store(false)
		k.in.mu.Unlock()
	}

	// Timers first: what came due is dispatched before the loop takes in the
	// intake, which may hold a batch of delayed tasks (see Kernel.enqueueLazy).
	k.unparkDue()
	k.ls.wheel.Advance(k.ls.now, k.ls.fireFn)
	k.dispatch()

	k.in.mu.Lock()
	tasks, lazy, ctrl := k.in.tasks, k.in.lazy.Take(), k.in.ctrl
	k.in.tasks, k.in.ctrl = k.ls.spareTasks, k.ls.spareCtrl
	k.in.lazy.Recycle(k.ls.lazyDone)
	for l, n := range k.in.lazySubmitted {
		if n > 0 {
			// Under the lock, as readers add the two (Kernel.intakeCounts).
			k.m.submitted[l].AddInt64(int64(n))
			k.in.lazySubmitted[l] = 0
		}
	}
	k.in.mu.Unlock()
	k.ls.lazyDone = nil
	for i := range tasks {
		if it := &tasks[i]; it.h != nil {
			if it.h.has(featNamed) {
				k.index(it.h)
			}
			if it.h.has(featDurable) && it.h.dur.inPool {
				k.acceptPooled(it.h)
				continue
			}
			k.accept(it.h)
		} else {
			k.acceptLight(it.l)
		}
	}
	clear(tasks)
	k.ls.spareTasks = tasks[:0]
	k.ls.lazyDone = k.acceptLazies(lazy)
	k.flushCounts()

	k.rq.mu.Lock()
	k.rq.unwatched = false // the pass ends with a stall check
	done := k.rq.done
	k.rq.done = k.ls.spareDone
	lightFailed := k.rq.lightFailed
	k.rq.lightFailed = k.ls.spareLight
	rated := k.rq.rated
	k.rq.rated = k.ls.spareRated
	k.ls.live -= k.rq.selfSettled
	k.rq.selfSettled = 0
	fastStarted := k.rq.fastStarted
	k.rq.fastStarted = 0
	k.rq.mu.Unlock()
	if fastStarted > 0 {
		k.ls.live += fastStarted
		k.ls.budget.FirstN(k.ls.now, fastStarted)
	}
	for _, a := range rated { // before done: an attempt's start before its end
		k.gateStarted(a)
	}
	clear(rated)
	k.ls.spareRated = rated[:0]
	for _, a := range done {
		k.settleAttempt(a)
	}
	clear(done)
	k.ls.spareDone = done[:0]
	for _, d := range lightFailed {
		k.lightFailed(d)
	}
	clear(lightFailed)
	k.ls.spareLight = lightFailed[:0]

	for _, m := range ctrl {
		k.handleCtrl(m)
	}
	clear(ctrl)
	k.ls.spareCtrl = ctrl[:0]

	k.admitBacklog()
	k.ls.wheel.Advance(k.ls.now, k.ls.fireFn)
	k.dispatch()
	k.adoptPool()
	k.publish()
}

// park arms the timer for the wheel's next expiry (or a parked chunk's first
// due, if sooner) and blocks until a submitter, an executor or the timer wakes
// the loop. It returns at once if work is pending.
func (k *Kernel) park() {
	next, ok := k.ls.wheel.Next()
	if len(k.ls.parked) > 0 {
		if p := k.at(k.ls.parked[0].MinDue); !ok || p.Before(next) {
			next, ok = p, true
		}
	}
	if k.ls.stallAt != 0 {
		if p := k.at(k.ls.stallAt); !ok || p.Before(next) {
			next, ok = p, true
		}
	}
	if ok {
		if !next.Equal(k.ls.timerAt) {
			d := next.Sub(k.clk.Now())
			if d <= 0 {
				return
			}
			if k.ls.timer == nil {
				k.ls.timer = k.clk.Timer(d)
			} else {
				k.ls.timer.Stop()
				k.ls.timer.Reset(d)
			}
			k.ls.timerAt = next
		}
	} else if !k.ls.timerAt.IsZero() {
		k.ls.timer.Stop()
		k.ls.timerAt = time.Time{}
	}
	wakeAt := int64(math.MaxInt64)
	if !k.ls.timerAt.IsZero() {
		wakeAt = int64(k.ls.timerAt.Sub(k.epoch))
	}

	k.in.mu.Lock()
	if len(k.in.tasks) > 0 || k.in.lazy.Len() > 0 || len(k.in.ctrl) > 0 {
		k.in.mu.Unlock()
		return
	}
	k.in.loopWaiting = true
	if k.ls.buckets.Len() == 0 && !k.ls.draining && !k.ls.closing && k.backlogEmpty() && k.ls.gate.pausedLevels == 0 {
		k.in.fast = true
		k.fastOpen.Store(true)
	}
	k.in.wakeAt = wakeAt
	k.in.tasks = trimmed(k.in.tasks)
	k.in.lazy.Recycle(k.ls.lazyDone)
	k.in.mu.Unlock()
	k.ls.spareTasks, k.ls.lazyDone = trimmed(k.ls.spareTasks), nil
	k.rq.mu.Lock()
	if len(k.rq.done) > 0 || len(k.rq.lightFailed) > 0 || len(k.rq.rated) > 0 || k.rq.selfSettled > 0 ||
		k.rq.holdsTickets() && k.roomWanted() {
		k.rq.mu.Unlock()
		return
	}
	k.rq.loopWaiting = true
	k.rq.ratedPoke = k.ls.gate.startWaits > 0
	k.rq.unwatched = k.ls.stallAt == 0
	k.rq.loopWantsRoom = k.ls.buckets.Len() > 0 || k.ls.draining || k.ls.closing || k.adoptWaiting() > 0
	// An executor that finishes takes its next task from the run queue itself: the
	// loop needs to refill it only once it runs low (a poke per completion cost the
	// loop a pass, and the submitters waiting for room a wake-up, per task).
	k.rq.loopRefillAt = k.ls.lookahead / 2
	if k.ls.draining || k.ls.closing {
		k.rq.loopRefillAt = math.MaxInt
	}
	k.rq.mu.Unlock()

	var timerC <-chan time.Time
	if k.ls.timer != nil && !k.ls.timerAt.IsZero() {
		timerC = k.ls.timer.C
	}
	k.markReady()
	select {
	case <-k.pokeCh:
	case <-timerC:
		k.ls.timerAt = time.Time{}
	}
}

// publish makes loop state visible to Stats, gauges and blocked submitters.
func (k *Kernel) publish() {
	k.flushCounts()
	m := k.m
	for l := range queue.NumLevels {
		m.delayed[l].Store(int64(k.ls.delayed[l]))
	}
	k.evictable.Store(int64(k.ls.buckets.Bucket(queue.Low).Len()))
	k.rq.mu.Lock()
	tickets, started := k.takeTickets()
	wake, spawn := k.checkStall()
	claimRoom := k.ls.claimHungry && k.rq.limit-k.rq.running-k.rq.queued()-k.ls.buckets.Len() > 0 &&
		k.ls.durRunning < k.ls.rcl.cfg.MaxConcurrency
	k.rq.mu.Unlock()
	if started {
		k.releaseAll(&tickets)
		k.ls.freed = true
	}
	if claimRoom {
		k.ls.claimHungry = false
		k.dur.own.ClaimNow()
	}
	if wake != nil {
		wake.wake <- struct{}{}
	}
	if spawn {
		k.execWG.Add(1)
		go k.runExecutor(newExecutor(), nil)
	}
	if k.ls.freed {
		k.ls.freed = false
		if k.roomWaiters.Load() > 0 {
			k.roomMu.Lock()
			close(k.roomCh)
			k.roomCh = make(chan struct{})
			k.roomMu.Unlock()
		}
	}
	if k.ls.gate.groups != nil {
		k.publishGroups()
	}
	k.flushEvents()
	k.addJournal()
}

// checkStall restarts the executors' wake-up chain when it stopped too early:
// work an executor could take waits in the run queue, a slot and an executor are
// free, nobody is on the way (or is overdue), and nobody took any work for
// overdue. That happens when the
// executors awake, which damped the chain while they kept popping short tasks
// (runq.chainWake), all took long ones. It sets stallAt for park while the
// condition may come. Called with runq.mu held, at the end of each pass.
func (k *Kernel) checkStall() (wake *executor, spawn bool) {
	q := &k.rq
	if !q.poppable() || q.running >= q.limit || q.stopping || (len(q.idle) == 0 && q.workers >= q.limit) {
		k.ls.seenPops, k.ls.seenAt, k.ls.stallAt = q.pops, k.ls.nowMono, 0
		return nil, false
	}
	if q.pops != k.ls.seenPops {
		k.ls.seenPops, k.ls.seenAt = q.pops, k.ls.nowMono
	} else if k.ls.nowMono-k.ls.seenAt >= overdue && q.needsWake(k.ls.nowMono) {
		wake, spawn = q.takeForWake(k.ls.nowMono)
		k.ls.seenAt = k.ls.nowMono
	}
	k.ls.stallAt = k.ls.seenAt + overdue
	return wake, spawn
}

// handleCtrl applies one control message.
func (k *Kernel) handleCtrl(m ctrlMsg) {
	switch m.kind {
	case ctrlCancel:
		k.cancel(m.h, ErrCanceled)
	case ctrlCancelBatch:
		m.b.mu.Lock()
		members := m.b.members // submitters append; the ones taken in so far suffice
		m.b.mu.Unlock()
		for _, h := range members {
			k.cancel(h, m.b.cause())
		}
	case ctrlUpdate:
		k.apply(m.rc)
		k.rc.Store(m.rc)
		k.applyGroups(m.rc)
		m.ack <- nil
	case ctrlPause:
		err := k.pause(m.sel, m.pause)
		k.publishPaused(m.sel)
		if k.ls.gate.groups != nil {
			k.publishGroups() // Stats after Pause or Resume returns shows it
		}
		m.ack <- err
	case ctrlShutdown:
		k.beginDrain()
	case ctrlClose:
		k.closeAll()
	case ctrlDurable:
		k.handleDurable(m.dur)
	case ctrlEvict:
		if k.evictNewestLow() {
			m.ack <- nil
		} else {
			m.ack <- ErrQueueFull
		}
	case ctrlCancelID:
		m.count <- k.cancelID(m.id)
	case ctrlRunNowID:
		m.count <- k.runNowID(m.id)
	}
}
