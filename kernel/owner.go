package kernel

import (
	"context"
	"time"

	"github.com/axsched/ax/kernel/internal/durable"
	"github.com/axsched/ax/store"
)

// joinStore makes the kernel an owner of s (package durable: membership, lease,
// rescuer, claimer) and reads back the tasks it rescues from ended owners (and from
// no owner): the recovery at New.
func (k *Kernel) joinStore(s store.SharedStore, c *Config, skew *durable.Skew) (*durable.Owner, []store.StoredTask, error) {
	dc := durable.Config{
		Store: s, Name: c.Owner, Lease: c.Lease, Timeout: c.StoreTimeout, Clock: k.clk, Skew: skew,
		GuardFunc: func(f func()) (any, bool) { return callGuarded(k, f) },
		Loop:      durableLoop{k}, Figures: k.replicaFigures,
	}
	if k.log != nil {
		dc.Log = k.log
	}
	return durable.Join(dc)
}

// durKind is the kind of a message of the durable seam to the loop.
type durKind uint8

const (
	durRecover     durKind = iota + 1 // schedule durable tasks read back from the store (hs)
	durStarted                        // the journal stored the starts of gated attempts (as), refused others (refused, errs)
	durClaimBudget                    // how many pool tasks may be claimed now (hungry; answer on count)
	durClaimed                        // a claim's tasks, and the slots reserved for it (tasks, reserved)
	durPoolEnded                      // pool tasks this kernel follows ended elsewhere (tasks)
	durStartBudget                    // how many inserts of the next commit may start in it (want; answer on count)
	durPrestarted                     // a commit stored these tasks started (hs), and frees its reservation (reserved)
	durLeaseLapse                     // the lease may end soon without a renewal: cancel the running durable attempts
	durOrphan                         // pool tasks whose submit's outcome is unknown (hs): they run here if claimed here
	durAdopted                        // a commit stored the adopts of pool tasks (hs) and refused others (refusedHs)
)

// durMsg is a message of the durable seam to the loop: one batch, in a control
// message of kind ctrlDurable.
type durMsg struct {
	kind        durKind
	hs          []*Handle
	refusedHs   []*Handle // durAdopted: the adopts the store refused
	as, refused []*attempt
	errs        []error // durStarted: why each of refused was
	tasks       []store.StoredTask
	reserved    int      // the slots the loop reserved for the claim or the commit
	want        int      // durStartBudget: the inserts that could start
	hungry      bool     // durClaimBudget: due pool work is known
	count       chan int // size 1
}

// handleDurable applies one message of the durable seam. Loop only.
func (k *Kernel) handleDurable(m *durMsg) {
	switch m.kind {
	case durClaimBudget:
		m.count <- k.claimBudget(m.hungry)
	case durClaimed:
		k.claimed(m.tasks, m.reserved)
	case durStartBudget:
		m.count <- k.startBudget(m.want)
	case durPrestarted:
		k.prestarted(m)
	case durLeaseLapse:
		k.leaseLapsed()
	case durPoolEnded:
		k.poolEnded(m.tasks)
	case durOrphan:
		k.orphaned(m.hs)
	case durAdopted:
		k.adopted(m.hs, m.refusedHs)
	case durStarted:
		k.ungate(m.as)
		k.abortGated(m.refused, m.errs)
	case durRecover:
		if k.ls.draining || k.ls.closing {
			for _, h := range m.hs {
				k.abortDurable(h)
			}
			return
		}
		for _, h := range m.hs {
			k.index(h)
			k.ls.backlog[h.bucket] = append(k.ls.backlog[h.bucket], h)
		}
	}
}

// durableLoop is the loop as the durable goroutines see it ([durable.JournalLoop],
// which holds [durable.Loop]): each method hands a batch to the loop as a control
// message, or takes it in as a submitter would (recoverStored, enqueueMany).
type durableLoop struct{ k *Kernel }

func (l durableLoop) ClaimBudget(hungry bool) durable.Budget {
	k := l.k
	n := k.askClaimBudget(hungry)
	if n == 0 {
		return durable.Budget{}
	}
	q := k.rc.Load().cfg.Quotas
	return durable.Budget{Slots: n, Kinds: k.dur.reg.Kinds(), Quotas: [3]int{q.High, q.Normal, q.LowGuaranteed}}
}

func (l durableLoop) Claimed(tasks []store.StoredTask, reserved int) {
	l.k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durClaimed, tasks: tasks, reserved: reserved}})
}

func (l durableLoop) PoolEnded(tasks []store.StoredTask) {
	l.k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durPoolEnded, tasks: tasks}})
}

func (l durableLoop) Rescued(tasks []store.StoredTask) { l.k.recoverStored(tasks) }

func (l durableLoop) LeaseLapse() {
	l.k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durLeaseLapse}})
}

func (l durableLoop) StartBudget(want int) int { return l.k.askStartBudget(want) }

func (l durableLoop) Prestarted(hs []*Handle, reserved int) {
	l.k.handPrestarted(&durMsg{kind: durPrestarted, hs: hs, reserved: reserved})
}

func (l durableLoop) Stored(hs []*Handle) {
	k := l.k
	if !k.enqueueMany(hs) {
		for _, h := range hs {
			if !h.dur.inPool {
				k.release(h.ticket(), 1)
			}
			k.abortDurable(h)
		}
	}
}

func (l durableLoop) Started(started, refused []*attempt, errs []error) {
	l.k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durStarted, as: started, refused: refused, errs: errs}})
}

// Refuse gives back the ticket and the unique key of an acknowledged insert whose
// submit fails.
func (l durableLoop) Refuse(h *Handle) {
	l.k.poolLanded(h)
	if !h.dur.inPool { // a pool task holds no ticket
		l.k.release(h.ticket(), 1)
	}
	l.k.dur.reg.DropKeys(h.dur.unique)
}

func (l durableLoop) Adopted(started, refused []*Handle) {
	l.k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durAdopted, hs: started, refusedHs: refused}})
}

func (l durableLoop) Orphan(h *Handle) {
	l.k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durOrphan, hs: []*Handle{h}}})
}

// askClaimBudget asks the loop how many pool tasks this kernel may claim now; the
// loop reserves that many durable slots until the claim's answer (durClaimed).
// When hungry (due pool work is known) and there is no room, the loop wakes the
// claimer once a slot frees.
func (k *Kernel) askClaimBudget(hungry bool) int {
	ch := make(chan int, 1)
	k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durClaimBudget, count: ch, hungry: hungry}})
	select {
	case n := <-ch:
		return n
	case <-k.loopDone:
		return 0
	}
}

// releaseOwner gives back the slot of the kernel's default owner name, if it has
// one, once the journal (which may join again under the name) has stopped.
func (k *Kernel) releaseOwner() {
	k.dur.own.Release(k.dur.j.Stop)
}

// leaseLapsed cancels the contexts of the durable attempts handed to the run queue
// (waiting there or running): the lease that covers their rows may end before
// they do, and another kernel would then run them again. Each attempt ends as its
// function returns, like one cancelled by [Kernel.Cancel] but without the task:
// its end or retry goes to the store, which refuses it if another owner took the
// task over meanwhile. Loop only.
func (k *Kernel) leaseLapsed() {
	q := &k.rq
	var as []*attempt
	q.mu.Lock()
	for _, r := range q.rings {
		r.Range(func(it ritem) bool {
			if it.a != nil && it.a.h.has(featDurable) && !it.a.settled {
				as = append(as, it.a)
			}
			return true
		})
	}
	for _, e := range q.execs {
		if a := e.cur; a != nil && a.h.has(featDurable) && !a.finished && !a.settled {
			as = append(as, a)
		}
	}
	q.mu.Unlock()
	for _, a := range as {
		a.ctx.Cancel(context.Canceled)
	}
}

// StoreOffset returns how far the clock of Config.Store runs ahead of Config.Clock
// (negative: behind), at least, as last measured (see [store.Clock]): zero when the
// clocks agree within the measure's round trip, else the lower bound the round trip
// gives. Its own time plus the offset is the store's time at its earliest, and a
// time on the store's clock less the offset its own at its latest, so a client that
// keeps times in the store and converts with it (package schedule's durable
// schedules) never reaches one early. It is zero without a store and with a store
// that is no store.Clock. Safe for concurrent use.
func (k *Kernel) StoreOffset() time.Duration {
	if k.dur == nil {
		return 0
	}
	return k.dur.skew.Offset()
}
