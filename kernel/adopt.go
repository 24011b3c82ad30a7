package kernel

import (
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
)

// Adoption: the pool tasks this kernel put in the pool itself (its own overflow, see
// pool.go) start through its journal, like local ones, rather than through a claim.
//
// A queued pool task this kernel follows waits in adoptQ. While slots are free that
// no task queued here waits for (the rule of claimBudget), each loop pass journals an
// OpStart with Change.Adopt for up to that many of them, shared among the levels by
// the quotas: the store applies it only while the task is still in the pool (no
// owner, waiting, at the fence this kernel gave it), so a claim by another kernel and
// this adopt never both take it. Each adopt holds a slot among the durable attempts in
// flight from then on (durRunning, adoptReserved), as a gated start does: the rows
// stored Running stay within the slots, and a crash counts an attempt only for tasks
// that could have begun. Once the commit landed (adopted), an adopted task runs on its
// handle as a claimed one does; a refused one stays followed, no longer adoptable,
// and its handle ends as the store says (readStates), since another kernel runs it.
// Delayed pool tasks are left to the claimer, which takes them once due.

// adoptWaiting returns how many pool tasks wait to be adopted (stale entries
// included). Loop only.
func (k *Kernel) adoptWaiting() int { return k.ls.pool.AdoptWaiting() }

// adoptPool journals the adopting starts of as many followed pool tasks as slots
// are free. Loop only.
func (k *Kernel) adoptPool() {
	if k.dur == nil || k.dur.own == nil || k.adoptWaiting() == 0 {
		return
	}
	// Nor while a priority or a durable kind is paused (as startBudget), while the
	// lease is in doubt (an adopted task starts once its commit lands, which renews
	// the lease, but the reservation would wait) or the kernel closes.
	if k.ls.closing || k.dur.own.Doubt() || k.ls.gate.pausedLevels != 0 || len(k.ls.gate.pausedKinds) > 0 {
		return
	}
	q := &k.rq
	q.mu.Lock()
	free := q.limit - q.running - q.queued()
	q.mu.Unlock()
	n := min(free-k.ls.buckets.Len()-k.ls.claimReserved-k.ls.startReserved-k.ls.adoptReserved,
		k.ls.rcl.cfg.MaxConcurrency-k.ls.durRunning)
	if n <= 0 {
		if k.adoptWaiting() > 2*k.ls.pool.Len()+64 {
			k.ls.pool.CompactAdopt(k.adoptable) // tasks that left the pool meanwhile
		}
		return
	}
	qs := k.ls.rcl.cfg.Quotas
	k.ls.pool.Adopt(n, [queue.NumLevels]int{qs.High, qs.Normal, qs.LowGuaranteed}, k.adoptable, k.journalAdopt)
}

// adoptable reports whether h, a followed pool task, may be adopted now. Loop only.
func (k *Kernel) adoptable(h *Handle) bool {
	d := h.dur
	return d.inPool && !d.adopting && !d.noAdopt && k.ls.pool.Follows(h.id, h) && State(h.state.Load()) == Queued
}

// journalAdopt journals the adopting start of h and reserves its slot. Loop only.
func (k *Kernel) journalAdopt(h *Handle) {
	d := h.dur
	d.adopting, d.startedAt = true, k.ls.now
	k.ls.durRunning++
	k.ls.adoptReserved++
	k.ls.jbuf = append(k.ls.jbuf, jentry{H: h, Adopt: true, C: store.Change{Op: store.OpStart, Adopt: true, Fence: d.fence, Task: store.StoredTask{
		ID: h.id, Attempt: int(h.attempts.Load()) + 1, Fence: d.fence + 1, UpdatedAt: k.ls.now,
	}}})
}

// adopted takes in the answers of a commit's adopts: the started tasks run here on
// their handles, as claimed ones do; the refused ones stay followed. Each frees its
// reservation. Loop only.
func (k *Kernel) adopted(started, refused []*Handle) {
	picked := k.ls.picked[:0]
	var cancels []*Handle
	for _, h := range started {
		k.ls.durRunning--
		k.ls.adoptReserved--
		d := h.dur
		d.adopting = false
		d.fence++ // the adopt's fence (journalAdopt's rule)
		if !k.ls.pool.Follows(h.id, h) {
			// Its handle ended meanwhile (Close): the row stays Running, for a rescue
			// once this kernel left, as for any attempt a Close interrupts.
			continue
		}
		k.ls.pool.Unfollow(h.id)
		d.inPool = false
		if k.ls.closing {
			d.keepLive = true
			k.flushCounts()
			k.m.abandoned[h.bucket].Inc()
			k.endFromPool(h, Abandoned, ErrAbandoned)
			continue
		}
		k.gateClaimed(h)
		picked = append(picked, k.startClaimed(h, h.attempts.Load()+1))
		if d.cancel != nil {
			cancels = append(cancels, h)
		}
	}
	k.flushCounts()
	k.handOver(picked)
	clear(picked)
	k.ls.picked = picked[:0]
	for _, h := range cancels {
		err := h.dur.cancel
		h.dur.cancel = nil
		k.cancel(h, err)
	}
	for _, h := range refused {
		k.ls.durRunning--
		k.ls.adoptReserved--
		d := h.dur
		d.adopting, d.noAdopt = false, true
		if d.cancel != nil && k.ls.pool.Follows(h.id, h) {
			d.cancel = nil
			k.cancelPooled(h)
		}
	}
	if len(started)+len(refused) > 0 {
		k.ls.freed = true
	}
}
