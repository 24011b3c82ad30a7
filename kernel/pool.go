package kernel

import (
	"fmt"
	"strings"

	"github.com/axsched/ax/store"
)

// The pool of a SharedStore, seen from one kernel (see "The pool" in SharedStore):
//
//   - A durable task goes to the pool instead of running here when it asks
//     (DurableTask.Pool), when Config.SharedPool says so, or when this kernel has no
//     room for it (Config.Capacity; a durable submit on a SharedStore never waits for
//     room): its row has no owner, and any kernel on the store with a free slot
//     claims and runs it.
//   - The claimer goroutine (package durable) claims due pool tasks while this
//     kernel has free slots: the loop reserves the slots (claimBudget), the store
//     claims and starts the tasks in one write (SharedStore.Claim), and the loop
//     hands them to the run queue (claimed, startClaimed). With nothing to claim it
//     polls with backoff, or until the next pool task is due.
//   - A due task this kernel put in the pool is started here through the journal
//     (adopt.go: an OpStart with Change.Adopt) when a slot frees, before any claim;
//     the claimer leaves those slots to such tasks, and claims other owners' work
//     and delayed pool tasks.
//   - The handle of a task this kernel put in the pool follows it: the task runs on
//     the same handle if this kernel adopts or claims it, and the claimer reads the
//     states of the others (SharedStore.States) so that their handles end as the
//     store says.

// claimBudget reserves the slots for a claim: the free slots (less the tasks
// queued here, which take them first), within the durable attempts' bound. Loop
// only.
func (k *Kernel) claimBudget(hungry bool) int {
	// A Shutdown drains the pool tasks this kernel follows too: it claims on while
	// it follows any.
	// Nor while the lease is in doubt: claimed tasks start at once, and only a
	// commit (SharedStore.CommitAs) renews the lease.
	if k.ls.closing || k.ls.draining && k.ls.pool.Len() == 0 || k.dur.own.Doubt() {
		return 0
	}
	q := &k.rq
	q.mu.Lock()
	free := q.limit - q.running - q.queued()
	q.mu.Unlock()
	// The pool tasks this kernel may adopt take the free slots first (adopt.go): a
	// claim would take them too, in a transaction of its own.
	n := min(free-k.ls.buckets.Len()-k.ls.adoptReserved-k.adoptWaiting()-int(k.dur.poolDue.Load()),
		k.ls.rcl.cfg.MaxConcurrency-k.ls.durRunning)
	if n <= 0 {
		k.ls.claimHungry = hungry
		return 0
	}
	k.ls.durRunning += n
	k.ls.claimReserved += n
	return n
}

// acceptPooled takes in a task this kernel put in the pool: it waits there, counted
// live here, until this kernel claims it or the store says it ended. Loop only.
func (k *Kernel) acceptPooled(h *Handle) {
	k.poolLanded(h)
	k.ls.live++
	k.ls.pendSubmitted[h.bucket]++
	if t, ok := k.ls.pool.TakeEarly(h.id); ok {
		// This kernel claimed it already (claimed): it starts now, on its handle.
		k.ls.durRunning-- // the slot claimed kept; startClaimed takes it
		h.dur.inPool = false
		h.dur.fence = t.Fence
		k.gateClaimed(h)
		k.handOver([]pick{k.startClaimed(h, int32(t.Attempt))})
		return
	}
	to := Queued
	if h.due && h.dueAt > k.ls.nowMono {
		to = Delayed
	}
	from := k.setState(h, to)
	if k.events != nil {
		k.emit(h, from, to, h.cur, nil)
	}
	k.ls.pool.Follow(h.id, h)
	if to == Queued {
		k.ls.pool.QueueAdopt(h.bucket, h) // adopted here (adopt.go)
		return
	}
	k.dur.own.ClaimNow()
}

// claimed starts the tasks a claim took, on the handles of those this kernel put in
// the pool and on new handles for the others; it frees the reservation. Loop only.
func (k *Kernel) claimed(tasks []store.StoredTask, reserved int) {
	k.ls.durRunning -= reserved
	k.ls.claimReserved -= reserved
	if len(tasks) == 0 {
		return
	}
	rc := k.ls.rcl
	picked := k.ls.picked[:0]
	var orphans []*Handle
	for i := range tasks {
		t := &tasks[i]
		h, followed := k.ls.pool.Get(t.ID)
		switch {
		case followed:
			k.ls.pool.Unfollow(t.ID)
			h.dur.inPool = false
		case strings.HasPrefix(t.ID, k.dur.prefix) && !k.ls.closing:
			// Submitted here and claimed before its handle reached the loop: the
			// handle starts it on arrival (acceptPooled), in the slot kept for it.
			k.ls.pool.Early(t)
			k.ls.durRunning++
			if oh, ok := k.ls.pool.TakeOrphan(t.ID); ok { // its handle never comes: start it on oh
				orphans = append(orphans, oh)
			}
			continue
		default:
			fn := k.dur.reg.Claimed(t)
			prio := normPriority(t.Priority)
			maxAttempts := t.MaxAttempts
			if maxAttempts <= 0 {
				maxAttempts = rc.retry[levelOf(prio)].MaxAttempts
			}
			task := Task{ID: t.ID, Priority: prio, Timeout: t.Timeout}
			var gd *groupDef
			if t.Group != "" {
				// A group this kernel does not have: the claimed attempt runs ungrouped
				// (the claim started it; it cannot be held).
				gd = rc.groups[t.Group]
			}
			h = k.newDurableHandle(&task, rc, fn, t.Kind, t.Payload, t.UniqueKey, maxAttempts, t.Timeout, gd, t.Key)
			h.dur.headers = t.Headers
			k.index(h)
			k.ls.live++
			k.ls.pendSubmitted[h.bucket]++
		}
		h.dur.fence = t.Fence
		if k.ls.closing {
			// The process stops: the row stays the store's, rescued once this kernel left.
			h.dur.keepLive = true
			k.flushCounts()
			k.m.abandoned[h.bucket].Inc()
			k.endFromPool(h, Abandoned, ErrAbandoned)
			continue
		}
		k.gateClaimed(h)
		picked = append(picked, k.startClaimed(h, int32(t.Attempt)))
	}
	k.flushCounts()
	k.handOver(picked)
	clear(picked)
	k.ls.picked = picked[:0]
	for _, h := range orphans {
		k.acceptPooled(h)
	}
}

// orphaned takes in pool tasks whose submit failed with an unknown outcome
// (store.ErrOutcomeUnknown): stored or not, this kernel may claim them, and its
// claimer takes a task of its own ID prefix for one whose handle is on its way. One
// claimed already starts now; the others wait in orphans for a claim. Loop only.
func (k *Kernel) orphaned(hs []*Handle) {
	for _, h := range hs {
		switch {
		case k.ls.closing:
		case k.ls.pool.ClaimedEarly(h.id):
			k.acceptPooled(h)
		default:
			k.ls.pool.Orphan(h.id, h)
		}
	}
}

// startClaimed accounts for attempt n of a claimed task, whose start the claim
// stored: it goes to the run queue without a ticket and without a journaled start.
func (k *Kernel) startClaimed(h *Handle, n int32) pick {
	a := h.cur
	a.n = n
	if h.placed && State(h.state.Load()) == Delayed {
		k.setState(h, Queued)
		k.emit(h, Delayed, Queued, a, nil)
	}
	from := k.setState(h, Running)
	h.attempts.Store(n)
	if n == 1 {
		k.ls.budget.First(k.ls.now)
	}
	k.ls.pendStarted[h.bucket]++
	k.ls.freed = true
	a.durRunning = true
	k.ls.durRunning++
	if h.timeout > 0 {
		k.schedule(a, timerTimeout, k.ls.now.Add(h.timeout))
	}
	if k.events != nil {
		k.emit(h, from, Running, a, nil)
	}
	return pick{a: a, lvl: h.bucket}
}

// poolEnded ends the handles of pool tasks that ended in another kernel, as the
// store says. Loop only.
func (k *Kernel) poolEnded(tasks []store.StoredTask) {
	for i := range tasks {
		t := &tasks[i]
		h, ok := k.ls.pool.Get(t.ID)
		if !ok {
			continue
		}
		k.ls.pool.Unfollow(t.ID)
		h.dur.keepLive = true // the store has its end already
		var err error
		switch t.State {
		case Succeeded:
			k.m.succeeded[h.bucket].Inc()
		case Canceled:
			k.m.canceled[h.bucket].Inc()
			err = fmt.Errorf("%w (in another kernel): %s", ErrCanceled, t.LastError)
		case TimedOut:
			k.m.timedOut[h.bucket].Inc()
			err = fmt.Errorf("%w (in another kernel): %s", ErrTimeout, t.LastError)
		case Evicted:
			k.m.evicted[h.bucket].Inc()
			err = fmt.Errorf("%w (in another kernel): %s", ErrEvicted, t.LastError)
		case Abandoned:
			k.m.abandoned[h.bucket].Inc()
			err = fmt.Errorf("%w (in another kernel): %s", ErrAbandoned, t.LastError)
		default:
			k.m.failed[h.bucket].Inc()
			err = fmt.Errorf("kernel: task failed in another kernel: %s", t.LastError)
		}
		if t.State != Canceled && t.State != Abandoned {
			// It ran: Queued (or Delayed) → Running → its end, as the store saw it.
			if State(h.state.Load()) == Delayed {
				k.setState(h, Queued)
				k.emit(h, Delayed, Queued, h.cur, nil)
			}
			k.setState(h, Running)
			k.emit(h, Queued, Running, h.cur, nil)
		}
		k.endFromPool(h, t.State, err)
	}
}

// endFromPool ends a task this kernel followed in the pool (or claimed while
// stopping), from whatever state it shows. Loop only.
func (k *Kernel) endFromPool(h *Handle, to State, err error) {
	if st := State(h.state.Load()); h.placed && !canTransition(st, to) {
		// Delayed or Queued to a state only Running leads to (Succeeded...): the
		// task ran elsewhere; Running was emitted by poolEnded.
		k.setState(h, Running)
	}
	k.end(h, to, err)
}

// endPool ends the handles of the tasks this kernel follows in the pool when it
// stops (of the delayed ones only, for a Shutdown, which drains the others): their
// rows stay in the pool, for the other kernels. Loop only.
func (k *Kernel) endPool(to State, err error) {
	for id, h := range k.ls.pool.All() {
		if to == Abandoned && State(h.state.Load()) != Delayed {
			continue
		}
		k.ls.pool.Unfollow(id)
		h.dur.keepLive = true
		if to == Abandoned {
			k.m.abandoned[h.bucket].Inc()
		} else {
			k.m.canceled[h.bucket].Inc()
		}
		k.end(h, to, err)
	}
}

// cancelPooled asks the store to cancel a task this kernel put in the pool: the
// cancel applies if no kernel claimed the task yet, and the handle ends as the
// store then says (readStates). Loop only.
func (k *Kernel) cancelPooled(h *Handle) {
	d := h.dur
	if d.adopting {
		// Its adopt's answer decides: a cancel of the running task, or of the pool's.
		if d.cancel == nil {
			d.cancel = ErrCanceled
		}
		return
	}
	k.ls.jbuf = append(k.ls.jbuf, jentry{C: store.Change{Op: store.OpCancel, Fence: d.fence, Task: store.StoredTask{ID: h.id, LastError: ErrCanceled.Error(), UpdatedAt: k.ls.now}}})
}
