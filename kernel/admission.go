package kernel

import (
	"context"
	"errors"
	"runtime"

	"github.com/axsched/ax/queue"
)

// tryAcquire takes n tickets of level lvl if they fit. It returns ErrQueueFull or
// ErrDegraded otherwise.
func (k *Kernel) tryAcquire(lvl queue.Level, n int64, rc *resolved) error {
	return k.acquireIfRoom(lvl, n, n, rc, true)
}

// acquireIfRoom takes n tickets of level lvl if room >= n tickets would fit. It
// returns ErrQueueFull or ErrDegraded otherwise; with reclaim, only once the
// tickets of tasks that executors started since the loop's last pass are back
// (reclaimTickets).
func (k *Kernel) acquireIfRoom(lvl queue.Level, n, room int64, rc *resolved, reclaim bool) error {
	w := &k.waiting[lvl]
	reclaimed := !reclaim
	for {
		cur := w.Load()
		err := error(nil)
		if cur+room > rc.capacity[lvl] {
			err = ErrQueueFull
		} else if lvl != queue.High && rc.degrade > 0 {
			total := k.waiting[0].Load() + k.waiting[1].Load() + k.waiting[2].Load()
			if total+room > rc.degrade {
				err = ErrDegraded
			}
		}
		if err != nil {
			if reclaimed || !k.reclaimTickets() {
				return err
			}
			reclaimed = true
			continue
		}
		if w.CompareAndSwap(cur, cur+n) {
			return nil
		}
	}
}

// release gives back n tickets of level lvl.
func (k *Kernel) release(lvl queue.Level, n int64) { k.waiting[lvl].Add(-n) }

// takeTickets returns the tickets of the run-queue entries executors took since
// the last call (runq.tickets), by level, and reports whether there were any.
// Called with rq.mu held.
func (k *Kernel) takeTickets() (t [queue.NumLevels]int64, any bool) {
	q := &k.rq
	for l := range t {
		t[l] = q.tickets[l+1]
		any = any || t[l] > 0
	}
	q.tickets[1], q.tickets[2], q.tickets[3] = 0, 0, 0
	if q.hinted {
		q.hinted = false
		k.ticketsBack.Store(false)
	}
	return t, any
}

// holdsTickets reports whether executors took entries holding tickets that were
// not given back yet. Called with rq.mu held.
func (q *runq) holdsTickets() bool {
	return q.tickets[1]|q.tickets[2]|q.tickets[3] != 0
}

// releaseAll gives back the tickets t, by level.
func (k *Kernel) releaseAll(t *[queue.NumLevels]int64) {
	for l, n := range t {
		if n > 0 {
			k.release(queue.Level(l), n)
		}
	}
}

// reclaimTickets gives back the tickets of the tasks executors started since the
// loop last did (runq.tickets), and reports whether there were any. A submitter
// that finds no room calls it before it is refused, waits or evicts: the room those
// tasks left is its room.
func (k *Kernel) reclaimTickets() bool {
	if !k.ticketsBack.Load() {
		return false
	}
	q := &k.rq
	q.mu.Lock()
	t, any := k.takeTickets()
	q.mu.Unlock()
	if any {
		k.releaseAll(&t)
	}
	return any
}

// roomWanted reports whether a submitter waits for room, sleeping or yielding
// (waitRoom).
func (k *Kernel) roomWanted() bool { return k.roomWaiters.Load() != 0 || k.roomSpinners.Load() != 0 }

// admitMode says whose room admit takes.
type admitMode uint8

const (
	// admitMemory: in-memory tasks. A single High task that finds no room may evict
	// (Config.EvictLow), and a waiter yields its P a while before it sleeps
	// (waitRoom): executors free the room at their pace.
	admitMemory admitMode = iota
	// admitDurable: durable tasks. They never evict, and a waiter sleeps at once:
	// their room frees at the journal's pace, commits milliseconds apart, and
	// yielding meanwhile would only burn the CPU the journal and the store need.
	admitDurable
)

// admit takes n tickets for level lvl, waiting for room while ctx allows (ctx nil:
// no wait). Under admitMemory, a single High task that finds no room asks the loop
// to evict the newest queued Low task (Config.EvictLow): if the loop did, the task
// is admitted with that task's ticket and evicts reports true.
func (k *Kernel) admit(ctx context.Context, lvl queue.Level, n int64, rc *resolved, mode admitMode) (evicts bool, err error) {
	for {
		if k.isClosed() {
			return false, ErrClosed
		}
		// A submitter that will wait for room leaves the tickets of the tasks
		// executors started to the loop's next pass (publish), which gives them back
		// in one batch and wakes it: it then finds room for a run of tasks. Taking
		// them back itself, a few at a time, would have it, the executors and the
		// loop trade the run queue's lock and a loop pass every few tasks. A
		// submitter about to be refused or to evict reclaims them first: it is
		// refused only when Capacity is full, and evicts only then.
		evict := mode == admitMemory && lvl == queue.High && n == 1 && rc.cfg.EvictLow && k.evictable.Load() > 0
		err = k.acquireIfRoom(lvl, n, n, rc, ctx == nil || evict)
		if err == nil {
			return false, nil
		}
		if k.flushLazyTickets() {
			continue
		}
		if evict && k.evictForRoom() {
			return true, nil
		}
		if ctx == nil {
			k.m.rejected[lvl].Inc()
			return false, err
		}
		if err := k.waitRoom(ctx, lvl, rc, mode == admitMemory); err != nil {
			if !errors.Is(err, ErrClosed) {
				k.m.rejected[lvl].Inc()
			}
			return false, err
		}
		rc = k.rc.Load()
	}
}

// waitRoom blocks until the loop frees room, the kernel closes or ctx ends. It
// re-checks once after registering so a wake-up between check and wait is lost.
// With spin, it may first yield its P a while (spinRoom).
func (k *Kernel) waitRoom(ctx context.Context, lvl queue.Level, rc *resolved, spin bool) error {
	if spin {
		if k.roomSpinners.Add(1) == 1 {
			// One waiter at a time yields its P a while before it sleeps (spinRoom),
			// unless its context ends or the kernel closes meanwhile (the select
			// below answers those).
			for i := 1; i <= spinRoom; i++ {
				runtime.Gosched()
				if k.hasRoom(lvl, rc) {
					k.roomSpinners.Add(-1)
					return nil
				}
				if i%32 == 0 && (ctx.Err() != nil || k.isClosed()) {
					break
				}
			}
		}
		k.roomSpinners.Add(-1)
	}
	k.roomWaiters.Add(1)
	defer k.roomWaiters.Add(-1)
	k.roomMu.Lock()
	ch := k.roomCh
	k.roomMu.Unlock()
	// Tickets of tasks started before this waiter counted (roomWanted) may not be
	// back yet, and no executor would poke the loop for them: a sleeping waiter
	// takes them back itself.
	k.reclaimTickets()
	if k.hasRoom(lvl, rc) {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-k.closedCh:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hasRoom reports whether one ticket of lvl would fit now.
func (k *Kernel) hasRoom(lvl queue.Level, rc *resolved) bool {
	if k.waiting[lvl].Load() >= rc.capacity[lvl] {
		return false
	}
	if lvl != queue.High && rc.degrade > 0 {
		return k.waiting[0].Load()+k.waiting[1].Load()+k.waiting[2].Load() < rc.degrade
	}
	return true
}

// evictForRoom asks the loop to evict the newest queued Low task for a High
// submitter that found no room, and reports whether it did: the evicted task's
// ticket is then the submitter's (Handle.evicts). Only the loop can tell whether
// a Low task still waits, so the submitter waits for its answer; it does so only
// when the kernel is full.
func (k *Kernel) evictForRoom() bool {
	ack := make(chan error, 1)
	k.control(ctrlMsg{kind: ctrlEvict, ack: ack})
	select {
	case err := <-ack:
		return err == nil
	case <-k.loopDone:
		select {
		case err := <-ack:
			if err == nil {
				k.release(queue.Low, 1) // the kernel stopped: nobody takes the ticket
			}
		default:
		}
		return false
	}
}

func (k *Kernel) isClosed() bool {
	select {
	case <-k.closedCh:
		return true
	default:
		return false
	}
}

// spinRoom is how many times a submitter waiting for room yields its P, checking
// for room after each, before it sleeps until the loop frees some. A submitter
// that slept is woken by the loop onto the loop's own P, behind the executors the
// loop just woke there, so a full kernel would run its submitter, its loop and
// its executors in turn on one P while another idles. A yielding submitter lets
// the others run where it was, and is picked up by an idle P. Only one waiter
// spins at a time.
const spinRoom = 256

// lazyTicketBatch is how many tickets the intake takes at once for lazy tasks
// while their level has plenty of room.
const lazyTicketBatch = 64

// takeLazyTicket gives a lazy task of level lvl its ticket, from the intake's
// reserve if it holds one, and reports false if the level has no room. A ticket
// costs a compare-and-swap on the level's count, shared by every submitter and by
// the loop; under the intake's lock, which a lazy task takes anyway, a reserve
// spares that for all but one in lazyTicketBatch (as in.lazySubmitted spares the
// submitted counter's atomic add).
//
// The reserve holds tickets no task uses, so it must never cost a task its room.
// Any submission that finds no room gives it back first (flushLazyTickets), before
// it waits, evicts or is refused; and it is taken only while the level has room
// for twice the batch, so that a submitter already waiting for room, woken when
// some frees up, finds it. Called with in.mu held.
func (k *Kernel) takeLazyTicket(lvl queue.Level, rc *resolved) bool {
	if k.in.lazyTickets[lvl] > 0 {
		k.in.lazyTickets[lvl]--
		return true
	}
	if k.waiting[lvl].Load()+2*lazyTicketBatch <= rc.capacity[lvl] ||
		k.reclaimTickets() && k.waiting[lvl].Load()+2*lazyTicketBatch <= rc.capacity[lvl] {
		// Set before the tickets are taken: a submitter refused for them meanwhile
		// sees it, and takes them back once this lock is free.
		if !k.lazyReserve.Load() {
			k.lazyReserve.Store(true)
		}
		if k.acquireIfRoom(lvl, lazyTicketBatch, 2*lazyTicketBatch, rc, true) == nil {
			k.in.lazyTickets[lvl] = lazyTicketBatch - 1
			return true
		}
	}
	return k.tryAcquire(lvl, 1, rc) == nil
}

// flushLazyTickets gives back the tickets the intake holds in reserve for lazy
// tasks (takeLazyTicket) and reports whether there were any.
func (k *Kernel) flushLazyTickets() bool {
	if !k.lazyReserve.Load() {
		return false
	}
	k.in.mu.Lock()
	freed := k.releaseLazyTickets()
	k.in.mu.Unlock()
	return freed
}

// releaseLazyTickets is flushLazyTickets with in.mu held.
func (k *Kernel) releaseLazyTickets() bool {
	k.lazyReserve.Store(false)
	freed := false
	for l := range queue.NumLevels {
		if n := k.in.lazyTickets[l]; n > 0 {
			k.release(queue.Level(l), n)
			k.in.lazyTickets[l] = 0
			freed = true
		}
	}
	return freed
}

// pushBucket queues a task that may go to its bucket (ungrouped, or holding its
// permit) without changing its state.
func (k *Kernel) pushBucket(h *Handle) {
	h.queuedAt = k.ls.nowMono
	k.growBucket(h.bucket)
	_ = k.ls.buckets.Push(h.bucket, qitem{h: h}) // growBucket made room: no error
}

// growBucket makes room for one more task in bucket l's ring, doubling it when it
// is full: up to ringMax as tasks queue, and past it if need be. Every task that
// reaches a bucket holds a ticket, and an accepted task always finds room: retries
// re-enter their bucket without a ticket check (they may not be refused), and a
// High task that evicted a Low one holds the Low task's ticket, so a bucket may
// briefly hold more than its Capacity (see Config.Capacity).
func (k *Kernel) growBucket(l queue.Level) {
	if r := k.ls.buckets.Bucket(l); r.Len() == r.Cap() {
		n := 2 * r.Cap()
		if r.Cap() < k.ls.ringMax[l] {
			n = min(n, k.ls.ringMax[l])
		}
		_ = r.Resize(n) // growing: no error
	}
}
