package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
)

// The pool of a SharedStore, seen from one kernel (see "The pool" in SharedStore):
//
//   - A durable task goes to the pool instead of running here when it asks
//     (DurableTask.Pool), when Config.SharedPool says so, or when this kernel has no
//     room for it (Config.Capacity; a durable submit on a SharedStore never waits for
//     room): its row has no owner, and any kernel on the store with a free slot
//     claims and runs it.
//   - The claimer goroutine claims due pool tasks while this kernel has free slots:
//     the loop reserves the slots (claimBudget), the store claims and starts the tasks
//     in one write (SharedStore.Claim), and the loop hands them to the run queue
//     (startClaimed). With nothing to claim it polls with backoff, from
//     claimPollMin to claimPollMax, or until the next pool task is due.
//   - The handle of a task this kernel put in the pool follows it: the task runs on
//     the same handle if this kernel claims it, and the claimer reads the states of
//     the others (SharedStore.States) so that their handles end as the store says.

// Poll delays of the claimer.
const (
	claimPollMin = 50 * time.Millisecond
	claimPollMax = 2 * time.Second
)

// claimMsg carries the claimer's news to the loop.
type claimMsg struct {
	tasks    []store.StoredTask // claimed (ctrlClaimed) or ended elsewhere (ctrlPoolEnded)
	reserved int                // slots the loop reserved for the claim
}

// follow is the set of pool tasks whose handles this kernel holds; guarded by its mu.
type follow struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	next []string // a round of IDs to read, refilled from ids when empty
}

func (f *follow) add(ids ...string) {
	f.mu.Lock()
	if f.ids == nil {
		f.ids = make(map[string]struct{})
	}
	for _, id := range ids {
		f.ids[id] = struct{}{}
	}
	f.mu.Unlock()
}

func (f *follow) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

func (f *follow) remove(id string) {
	f.mu.Lock()
	delete(f.ids, id)
	f.mu.Unlock()
}

// batch returns up to StatesMax followed IDs, a different slice of them each call.
func (f *follow) batch() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.next) == 0 {
		for id := range f.ids {
			f.next = append(f.next, id)
		}
	}
	n := min(len(f.next), store.StatesMax)
	out := slices.Clone(f.next[:n])
	f.next = f.next[n:]
	return out
}

// toPool reports whether a durable submit of t goes to the pool whatever the room
// here (a task for which this kernel has no room goes there too: see submitDurable).
func (k *Kernel) toPool(t *DurableTask, rc *resolved) bool {
	return k.dur.own != nil && (t.Pool || rc.cfg.SharedPool)
}

// tryRoom takes n tickets of level l if there is room now, without waiting.
func (k *Kernel) tryRoom(l queue.Level, n int64, rc *resolved) bool {
	for {
		if k.tryAcquire(l, n, rc) == nil {
			return true
		}
		if !k.flushLazyTickets() {
			return false
		}
	}
}

// startClaimer starts the goroutine that claims pool tasks and follows this
// kernel's pool tasks.
func (o *ownership) startClaimer() {
	o.wg.Go(o.claimer)
}

func (o *ownership) claimer() {
	k := o.k
	backoff := time.Duration(0)
	hungry := true // the pool may hold due work (it may, at start)
	var lastStates time.Time
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-o.stopCh:
				t.Stop()
				return
			case <-o.claimNow:
				t.Stop()
				backoff = 0
			case <-t.C:
			}
		} else {
			select {
			case <-o.stopCh:
				return
			default:
			}
		}
		if time.Since(lastStates) >= claimPollMin {
			o.readStates()
			lastStates = time.Now()
		}
		// With work left in the pool and no free slot, the loop wakes the claimer as
		// soon as a slot frees (claimNow); otherwise it polls.
		n := k.askClaimBudget(hungry)
		if n == 0 {
			if hungry {
				backoff = claimPollMax
			} else {
				backoff = min(max(2*backoff, claimPollMin), claimPollMax)
			}
			continue
		}
		claimed, next, err := o.claim(n)
		o.claimed.Add(int64(len(claimed)))
		k.control(ctrlMsg{kind: ctrlClaimed, claim: &claimMsg{tasks: claimed, reserved: n}})
		hungry = err == nil && (len(claimed) > 0 || !next.IsZero() && !next.After(k.clk.Now()))
		switch {
		case err != nil:
			if !errors.Is(err, store.ErrLeaseLost) && o.log != nil {
				o.log.warn("kernel: claim pool tasks", "owner", o.owner().Name, "err", err)
			}
			backoff = min(max(2*backoff, claimPollMin), claimPollMax)
		case len(claimed) > 0:
			backoff = 0
		default:
			backoff = min(max(2*backoff, claimPollMin), claimPollMax)
			if !next.IsZero() {
				// The next pool task is due: not later than then, and not in a loop.
				backoff = max(claimPollMin/5, min(backoff, next.Sub(k.clk.Now())))
			}
		}
	}
}

// claim claims up to n pool tasks, shared among the priorities by Config.Quotas; the
// shares a priority could not use go, in a second claim, to the others, High first.
func (o *ownership) claim(n int) ([]store.StoredTask, time.Time, error) {
	k := o.k
	k.dur.mu.Lock()
	kinds := make([]string, 0, len(k.dur.kinds))
	for kind := range k.dur.kinds {
		kinds = append(kinds, kind)
	}
	k.dur.mu.Unlock()
	if len(kinds) == 0 {
		return nil, time.Time{}, nil
	}
	q := k.rc.Load().cfg.Quotas
	want := shareOut(n, [queue.NumLevels]int{q.High, q.Normal, q.LowGuaranteed})
	ctx, cancel := context.WithTimeout(context.Background(), k.dur.j.timeout)
	defer cancel()
	req := store.ClaimRequest{Now: k.clk.Now(), Want: want, Kinds: kinds}
	got, next, err := storeCallClaim(o, ctx, req)
	if err != nil {
		return nil, time.Time{}, err
	}
	left := n - len(got)
	if left == 0 || next.IsZero() || next.After(req.Now) {
		return got, next, nil
	}
	// Due tasks were left while slots are: the shares of the priorities that had
	// fewer tasks than their share go to those that filled theirs (and may have
	// more), High first.
	var per [queue.NumLevels]int
	for _, t := range got {
		per[levelOf(normPriority(t.Priority))]++
	}
	var more ByPriority[int]
	if per[queue.High] == want.High {
		more.High = left
	}
	if per[queue.Normal] == want.Normal {
		more.Normal = left
	}
	if per[queue.Low] == want.Low {
		more.Low = left
	}
	req.Want = capTotal(more, left)
	req.Now = k.clk.Now()
	got2, next2, err := storeCallClaim(o, ctx, req)
	if err != nil {
		return got, next, nil // the first claim stands
	}
	return append(got, got2...), next2, nil
}

func storeCallClaim(o *ownership, ctx context.Context, req store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	var next time.Time
	got, err := storeCall(o.k, "Claim", func() ([]store.StoredTask, error) {
		ts, nx, err := o.store.Claim(ctx, o.owner(), req)
		next = nx
		return ts, err
	})
	return got, next, err
}

// shareOut splits n slots among the priorities by quotas: each gets its share,
// rounded down, and at least one while n allows; High takes the rest.
func shareOut(n int, q [queue.NumLevels]int) ByPriority[int] {
	total := q[0] + q[1] + q[2]
	if total <= 0 {
		return ByPriority[int]{High: n}
	}
	normal := n * q[1] / total
	low := n * q[2] / total
	if q[1] > 0 && normal == 0 && n >= 3 {
		normal = 1
	}
	if q[2] > 0 && low == 0 && n >= 3 {
		low = 1
	}
	high := n - normal - low
	if n < 3 { // too few to share: High first, one each below while n allows
		high, normal, low = n, 0, 0
		if n == 2 {
			high, normal = 1, 1
		}
	}
	return ByPriority[int]{High: high, Normal: normal, Low: low}
}

// capTotal keeps the wants of w within total, High first.
func capTotal(w ByPriority[int], total int) ByPriority[int] {
	w.High = min(w.High, total)
	total -= w.High
	w.Normal = min(w.Normal, total)
	total -= w.Normal
	w.Low = min(w.Low, total)
	return w
}

// readStates reads the states of followed pool tasks and hands those that ended
// elsewhere to the loop.
func (o *ownership) readStates() {
	ids := o.follow.batch()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.k.dur.j.timeout)
	ts, err := storeCall(o.k, "States", func() ([]store.StoredTask, error) { return o.store.States(ctx, ids) })
	cancel()
	if err != nil {
		if o.log != nil {
			o.log.warn("kernel: read the states of pool tasks", "owner", o.owner().Name, "err", err)
		}
		return
	}
	var ended []store.StoredTask
	for _, t := range ts {
		if t.State.Terminal() {
			ended = append(ended, t)
		}
	}
	if len(ended) > 0 {
		o.k.control(ctrlMsg{kind: ctrlPoolEnded, claim: &claimMsg{tasks: ended}})
	}
}

// askClaimBudget asks the loop how many pool tasks this kernel may claim now; the
// loop reserves that many durable slots until the claim's answer (ctrlClaimed).
// When hungry (due pool work is known) and there is no room, the loop wakes the
// claimer once a slot frees.
func (k *Kernel) askClaimBudget(hungry bool) int {
	ch := make(chan int, 1)
	k.control(ctrlMsg{kind: ctrlClaimBudget, count: ch, hungry: hungry})
	select {
	case n := <-ch:
		return n
	case <-k.loopDone:
		return 0
	}
}

// claimBudget reserves the slots for a claim: the free slots (less the tasks
// queued here, which take them first), within the durable attempts' bound. Loop
// only.
func (k *Kernel) claimBudget(hungry bool) int {
	// A Shutdown drains the pool tasks this kernel follows too: it claims on while
	// it follows any.
	// Nor while the lease is in doubt: claimed tasks start at once, and only a
	// commit (SharedStore.CommitAs) renews the lease.
	if k.ls.closing || k.ls.draining && len(k.ls.pool) == 0 || k.dur.own.doubt() {
		return 0
	}
	q := &k.rq
	q.mu.Lock()
	free := q.limit - q.running - q.queued()
	q.mu.Unlock()
	n := min(free-k.ls.buckets.Len(), k.ls.rcl.cfg.MaxConcurrency-k.ls.durRunning)
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
	k.ls.live++
	k.ls.pendSubmitted[h.bucket]++
	if t, ok := k.ls.claimedEarly[h.id]; ok {
		// This kernel claimed it already (claimed): it starts now, on its handle.
		delete(k.ls.claimedEarly, h.id)
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
	if k.ls.pool == nil {
		k.ls.pool = make(map[string]*Handle)
	}
	k.ls.pool[h.id] = h
	k.dur.own.follow.add(h.id)
	select {
	case k.dur.own.claimNow <- struct{}{}:
	default:
	}
}

// claimed starts the tasks a claim took, on the handles of those this kernel put in
// the pool and on new handles for the others; it frees the reservation. Loop only.
func (k *Kernel) claimed(m *claimMsg) {
	k.ls.durRunning -= m.reserved
	k.ls.claimReserved -= m.reserved
	if len(m.tasks) == 0 {
		return
	}
	rc := k.ls.rcl
	picked := k.ls.picked[:0]
	for i := range m.tasks {
		t := &m.tasks[i]
		h := k.ls.pool[t.ID]
		switch {
		case h != nil:
			delete(k.ls.pool, t.ID)
			k.dur.own.follow.remove(t.ID)
			h.dur.inPool = false
		case strings.HasPrefix(t.ID, k.dur.prefix) && !k.ls.closing:
			// Submitted here and claimed before its handle reached the loop: the
			// handle starts it on arrival (acceptPooled), in the slot kept for it.
			if k.ls.claimedEarly == nil {
				k.ls.claimedEarly = make(map[string]store.StoredTask)
			}
			k.ls.claimedEarly[t.ID] = *t
			k.ls.durRunning++
			continue
		default:
			k.dur.mu.Lock()
			fn := k.dur.kinds[t.Kind]
			if t.UniqueKey != "" {
				k.dur.keys[t.UniqueKey] = struct{}{}
			}
			k.dur.mu.Unlock()
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
		k.ls.budget.first(k.ls.now)
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
func (k *Kernel) poolEnded(m *claimMsg) {
	for i := range m.tasks {
		t := &m.tasks[i]
		h := k.ls.pool[t.ID]
		if h == nil {
			continue
		}
		delete(k.ls.pool, t.ID)
		k.dur.own.follow.remove(t.ID)
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
	for id, h := range k.ls.pool {
		if to == Abandoned && State(h.state.Load()) != Delayed {
			continue
		}
		delete(k.ls.pool, id)
		k.dur.own.follow.remove(id)
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
	k.ls.jbuf = append(k.ls.jbuf, jentry{c: store.Change{Op: store.OpCancel, Fence: d.fence, Task: store.StoredTask{ID: h.id, LastError: ErrCanceled.Error(), UpdatedAt: k.ls.now}}})
}
