package kernel

import (
	"fmt"
	"math"

	"github.com/axsched/ax/queue"
)

// dispatch moves picked tasks into the run queue while executors have or will
// soon have a free slot, then wakes or starts executors for them.
//
// Each level has room for the free slots plus the lookahead, less the picks of
// its own and higher levels already waiting: lower picks never count against a
// higher level's room, and executors take the highest level first, so a task
// never waits behind lower-priority work picked ahead of it. The picker still
// decides the order: when the level it names has no room, a higher level with
// room may take a pick ahead, overtaking, while the level passed over keeps its
// turn and its floor (queue.Buckets.PopAhead) — so the shares hold under
// saturation, and the run queue stays within three lookaheads.
func (k *Kernel) dispatch() {
	if k.ls.buckets.Len() == 0 {
		return
	}
	q := &k.rq
	// Read the room under the lock, pick and account without it (executors keep
	// running meanwhile: room only grows), then hand the picks over in one short
	// critical section.
	q.mu.Lock()
	var r room
	free := q.limit - q.running + k.ls.lookahead
	freeOther := q.otherLimit - q.runningOther + k.ls.lookahead // Config.Reserve
	above, aboveOther := 0, 0
	for l, ring := range q.rings {
		above += ring.Len()
		r.all[l] = free - above
		if l != int(queue.High) {
			aboveOther += ring.Len()
			r.other[l] = freeOther - aboveOther
		}
	}
	q.mu.Unlock()
	r.other[queue.High] = math.MaxInt
	picked := k.ls.picked[:0]
	for r.all[queue.High] > 0 {
		// A level whose slots (Config.Reserve) are all taken, picks ahead included,
		// is left out, as if it had no work: its share passes on. A level whose
		// room overtaking picks took keeps its turn instead (PopAhead). So is a
		// level whose next task is durable while the durable attempts in flight
		// fill the slots (durableFull).
		mask := r.mask() &^ k.ls.gate.pausedLevels
		if k.durableFull() {
			mask &^= k.durableHeads()
		}
		var it qitem
		var lvl queue.Level
		var ok bool
		if r.all[queue.Low] > 0 {
			it, lvl, ok = k.ls.buckets.Pop(mask) // every level has room
		} else if lvl, ok = k.ls.buckets.Peek(mask); ok {
			if r.all[lvl] > 0 {
				it, lvl, ok = k.ls.buckets.Pop(mask)
			} else {
				it, lvl, ok = k.ls.buckets.PopAhead(mask, r.above(lvl))
			}
		}
		if !ok {
			break
		}
		if it.h != nil && it.h.has(featDurable) && k.ls.gate.pausedKinds != nil && k.holdKind(it.h) {
			continue // its kind is paused (Kernel.Pause): it waits, still Queued, off its bucket
		}
		if it.h == nil {
			// A light task: counted in bulk, its record never touched.
			k.ls.pendStarted[lvl]++
			k.ls.lightStarts++
		} else if !k.start(it.h, it.h.cur) {
			// A durable pick waits for its stored start (gate) without a slot: the
			// starts of the picks of a pass are written in the same group commits
			// while the slots keep running. It takes a slot once handed over.
			continue
		}
		// An aged task waits with the level it was picked as, unless that is High
		// for a Normal one: High's ring is for the slots only High may take.
		as := max(k.ls.buckets.PickedAs(), min(lvl, queue.Normal))
		r.take(as)
		// The pick keeps its ticket until an executor takes it: it still waits
		// under its level's Capacity (see runq.tickets).
		if it.h == nil {
			it.l.tk = uint8(it.l.lvl) + 1
			picked = append(picked, pick{l: it.l, lvl: as})
		} else {
			picked = append(picked, pick{a: it.h.cur, l: light{tk: uint8(it.h.ticket()) + 1}, lvl: as})
		}
	}
	k.flushCounts()
	k.handOver(picked)
	clear(picked)
	k.ls.picked = picked[:0]
}

// room is what dispatch may still pick per level: all is the free slots plus the
// lookahead, less the picks waiting at the level and above; other is the same
// within the slots Normal and Low may use (Config.Reserve), for Normal and Low.
type room struct {
	all, other [queue.NumLevels]int
}

// mask returns the levels whose slots are not all taken (room.other).
func (r *room) mask() queue.Mask {
	m := queue.AllLevels
	for l := queue.Normal; l < queue.NumLevels; l++ {
		if r.other[l] <= 0 {
			m &^= 1 << l
		}
	}
	return m
}

// above returns the levels of higher priority than l that have room.
func (r *room) above(l queue.Level) queue.Mask {
	var m queue.Mask
	for h := queue.High; h < l; h++ {
		if r.all[h] > 0 {
			m |= 1 << h
		}
	}
	return m
}

// take accounts for a pick of level l: it waits ahead of every level at or
// below it.
func (r *room) take(l queue.Level) {
	for x := l; x < queue.NumLevels; x++ {
		r.all[x]--
		if l != queue.High {
			r.other[x]--
		}
	}
}

// flushCounts applies the counts the loop gathered: submitted and started
// tasks, and the tickets of tasks that left their bucket. It runs before any
// task reaches an executor, so a reader never sees a task end that was not
// counted as submitted and started.
func (k *Kernel) flushCounts() {
	for l := range queue.NumLevels {
		if n := k.ls.pendSubmitted[l]; n > 0 {
			k.m.submitted[l].Add(n)
			k.ls.pendSubmitted[l] = 0
		}
		if n := k.ls.pendStarted[l]; n > 0 {
			k.m.started[l].Add(n)
			k.ls.pendStarted[l] = 0
		}
		if n := k.ls.pendRelease[l]; n > 0 {
			k.release(queue.Level(l), n)
			k.ls.pendRelease[l] = 0
		}
	}
	if k.ls.lightStarts > 0 {
		k.ls.budget.FirstN(k.ls.now, k.ls.lightStarts)
		k.ls.lightStarts = 0
	}
}

// pick is an attempt (or a light task, a nil) the loop chose to run, and its
// level: handOver reads it here rather than in the task's record, a cache line it
// does not touch otherwise. l.tk is the ticket the run-queue entry holds, for an
// attempt too.
type pick struct {
	a   *attempt
	l   light
	lvl queue.Level
}

// handOver moves picked attempts into the run queue and wakes or starts an
// executor for them.
func (k *Kernel) handOver(picked []pick) {
	if len(picked) == 0 {
		return
	}
	q := &k.rq
	var wake [8]*executor
	nwake, spawn := 0, 0
	q.mu.Lock()
	// Durable picks handed over after their start was stored may exceed the free
	// slots and the lookahead (see gate): grow the rings rather than lose one.
	// Executors that found the run queue empty may have parked: new work for an
	// empty queue wakes one even while others keep popping (see runq.chainWake),
	// unless one of them popped a moment ago and is coming back for more.
	wasEmpty := q.queued() == 0 && !q.cycling(k.ls.nowMono)
	for _, r := range q.rings {
		grow(r, len(picked))
	}
	for _, p := range picked {
		_ = q.rings[p.lvl].Push(ritem{a: p.a, l: p.l})
		if p.l.tk == 0 {
			q.noTicket++
		}
	}
	// One wake-up at a time (unless the one on the way is overdue), and none while
	// executors keep popping what was already queued: each woken executor wakes the
	// next while work waits (runq.chainWake).
	if q.chainWake(k.ls.nowMono, wasEmpty) {
		w, sp := q.takeForWake(k.ls.nowMono)
		if w != nil {
			wake[0], nwake = w, 1
		}
		if sp {
			spawn = 1
		}
	}
	q.mu.Unlock()
	for i := range nwake {
		wake[i].wake <- struct{}{}
	}
	for range spawn {
		k.execWG.Add(1)
		go k.runExecutor(newExecutor(), nil)
	}
}

// start accounts for an attempt about to be handed to the run queue, where it
// keeps its ticket until an executor takes it. It reports false when the attempt
// must wait for its start to be stored first (a durable task in acknowledged mode,
// see gate): its ticket is given back then, as it counts as running from there.
func (k *Kernel) start(h *Handle, a *attempt) bool {
	from := k.setState(h, Running)
	// A new task's first attempt is number 1: known without reading a.n, whose
	// cache line the loop does not touch otherwise (a recovered durable task's first
	// attempt may be a later one).
	n := int32(1)
	if a != &h.first || h.has(featDurable) {
		n = a.n
	}
	h.attempts.Store(n)
	if n == 1 {
		k.ls.budget.First(k.ls.now)
	}
	k.ls.pendStarted[h.bucket]++
	if h.has(featDurable) {
		k.journalStart(h, a)
		a.durRunning = true
		k.ls.durRunning++
	}
	if h.timeout > 0 {
		k.schedule(a, timerTimeout, k.ls.now.Add(h.timeout))
	}
	if k.events != nil {
		k.emit(h, from, Running, a, nil)
	}
	// In periodic snapshot mode a start waits for the store only while this kernel's
	// lease on a SharedStore is in doubt: it must not start an attempt the lease may
	// not cover.
	if h.has(featDurable) && (k.dur.j.Every() == 0 || k.dur.own != nil && k.dur.own.Doubt()) {
		k.ls.pendRelease[h.ticket()]++
		k.ls.freed = true
		k.gate(a)
		return false
	}
	return true
}

// gate holds a durable attempt back until the journal stored its start: a task runs
// only once the store knows it runs, so a crash re-runs only tasks the store shows
// Running (at least once). Gated attempts hold no slot, so that their starts share
// group commits while the slots keep running; but they count among the durable
// attempts in flight, which never outnumber the slots (durableFull), so the rows
// stored Running are at most the attempts that could have begun. (A crash counts
// such an attempt whether or not its function had begun.) In periodic snapshot
// mode nothing waits for a commit.
func (k *Kernel) gate(a *attempt) {
	if k.ls.gated == nil {
		k.ls.gated = make(map[*attempt]struct{})
	}
	k.ls.gated[a] = struct{}{}
	k.ls.jbuf[len(k.ls.jbuf)-1].Start = a // the OpStart journalStart just added
}

// abortGated ends the gated attempts whose start the store refused: another owner
// holds their tasks (it rescued them, or this kernel's lease ended), so they never
// run here. Each ends Abandoned with an error wrapping [ErrTaskTaken] and the store's
// refusal; its row is left to its owner. Loop only.
func (k *Kernel) abortGated(as []*attempt, errs []error) {
	for i, a := range as {
		if _, ok := k.ls.gated[a]; !ok {
			continue // Close ended it meanwhile
		}
		delete(k.ls.gated, a)
		k.durableEnded(a)
		h := a.h
		if a.tkind == timerTimeout {
			k.ls.wheel.Cancel(a.timer)
			a.tkind = timerNone
		}
		if a.permit {
			k.gateRelease(a) // it never ran
		}
		a.settled = true
		h.dur.keepLive = true
		k.m.abandoned[h.bucket].Inc()
		k.end(h, Abandoned, fmt.Errorf("%w: %w", ErrTaskTaken, errs[i]))
	}
}

// ungate hands attempts whose start the journal stored to the run queue.
func (k *Kernel) ungate(as []*attempt) {
	picked := k.ls.picked[:0]
	for _, a := range as {
		if _, ok := k.ls.gated[a]; !ok {
			continue // Close ended it meanwhile
		}
		delete(k.ls.gated, a)
		picked = append(picked, pick{a: a, lvl: a.h.bucket})
	}
	k.handOver(picked)
	clear(picked)
	k.ls.picked = picked[:0]
}

// durableFull reports whether the durable attempts in flight (ls.durRunning) fill
// the slots, MaxConcurrency as now in force: dispatch then starts no durable
// attempt until one of them ends. A durable attempt counts from the pick that
// journals its start to the journaling of its end or retry (durableEnded), the span
// its row is Running for the store (or will be once the journal caught up; the
// journal writes changes in the order the loop made them).
func (k *Kernel) durableFull() bool {
	return k.ls.durRunning > 0 && k.ls.durRunning >= k.ls.rcl.cfg.MaxConcurrency
}

// durableHeads returns the levels whose bucket's next task is durable. While
// durableFull, dispatch leaves them out as if they had no work: their share passes
// on to the other levels, and the tasks behind such a head wait their turn (FIFO).
func (k *Kernel) durableHeads() queue.Mask {
	var m queue.Mask
	for l := range queue.NumLevels {
		if it, ok := k.ls.buckets.Bucket(queue.Level(l)).Peek(); ok && it.h != nil && it.h.has(featDurable) {
			m |= 1 << l
		}
	}
	return m
}

// durableEnded takes a durable attempt off the attempts in flight: its end or retry
// is journaled, or the process stops and it will never be (Close). It does nothing
// for an attempt not counted, or counted off already.
func (k *Kernel) durableEnded(a *attempt) {
	if a.durRunning {
		a.durRunning = false
		k.ls.durRunning--
	}
}
