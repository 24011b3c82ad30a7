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
	return k.acquireIfRoom(lvl, n, n, rc)
}

// acquireIfRoom takes n tickets of level lvl if room >= n tickets would fit. It
// returns ErrQueueFull or ErrDegraded otherwise.
func (k *Kernel) acquireIfRoom(lvl queue.Level, n, room int64, rc *resolved) error {
	w := &k.waiting[lvl]
	for {
		cur := w.Load()
		if cur+room > rc.capacity[lvl] {
			return ErrQueueFull
		}
		if lvl != queue.High && rc.degrade > 0 {
			total := k.waiting[0].Load() + k.waiting[1].Load() + k.waiting[2].Load()
			if total+room > rc.degrade {
				return ErrDegraded
			}
		}
		if w.CompareAndSwap(cur, cur+n) {
			return nil
		}
	}
}

// release gives back n tickets of level lvl.
func (k *Kernel) release(lvl queue.Level, n int64) { k.waiting[lvl].Add(-n) }

// admit takes n tickets for level lvl, waiting for room while ctx allows (ctx nil:
// no wait). With evict, a single High task that finds no room asks the loop to
// evict the newest queued Low task (Config.EvictLow): if the loop did, the task is
// admitted with that task's ticket and evicts reports true.
func (k *Kernel) admit(ctx context.Context, lvl queue.Level, n int64, rc *resolved, evict bool) (evicts bool, err error) {
	for {
		if k.isClosed() {
			return false, ErrClosed
		}
		err = k.tryAcquire(lvl, n, rc)
		if err == nil {
			return false, nil
		}
		if k.flushLazyTickets() {
			continue
		}
		if evict && lvl == queue.High && n == 1 && rc.cfg.EvictLow && k.evictable.Load() > 0 && k.evictForRoom() {
			return true, nil
		}
		if ctx == nil {
			k.m.rejected[lvl].Inc()
			return false, err
		}
		if err := k.waitRoom(ctx, lvl, rc); err != nil {
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
func (k *Kernel) waitRoom(ctx context.Context, lvl queue.Level, rc *resolved) error {
	if k.roomSpinners.Add(1) == 1 {
		// One waiter at a time yields its P a while before it sleeps (spinRoom),
		// unless its context ends or the kernel closes meanwhile (the select below
		// answers those).
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
	k.roomWaiters.Add(1)
	defer k.roomWaiters.Add(-1)
	k.roomMu.Lock()
	ch := k.roomCh
	k.roomMu.Unlock()
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
