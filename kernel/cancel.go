package kernel

import (
	"context"
	"errors"
	"slices"

	"github.com/axsched/ax/store"
)

// Cancel cancels every live task whose ID is id and returns how many it found:
// tasks submitted with that Task.ID (IDs need not be unique), and the durable task
// of that stored ID, recovered ones included, even one whose kind is not
// registered yet. A queued, delayed or retrying task ends Canceled with
// [ErrCanceled] at once; a running one has its context cancelled and ends Canceled
// when its function returns (a durable task's row is then stored Canceled). Only
// tasks with an ID of their own or a stored one can be found: a task whose ID the
// kernel made is cancelled through its [Handle]. Cancel blocks until the loop has
// applied it, or until ctx ends (it returns ctx.Err(), and the cancellation may
// still take effect). It returns [ErrClosed] once the kernel has stopped, and an
// error for an empty id. A nil ctx is context.Background(). Safe for concurrent
// use, also from inside a task.
//
// A task submitted with an ID never travels light nor by the fast lane, and the
// loop keeps it in an index until it ends: naming tasks costs a little more than
// leaving them anonymous.
func (k *Kernel) Cancel(ctx context.Context, id string) (int, error) {
	n := k.cancelHeld(id)
	c, err := k.askID(ctx, "Cancel", ctrlCancelID, id)
	if errors.Is(err, ErrClosed) && n > 0 {
		return n, nil
	}
	return n + c, err
}

// askID hands the loop a control message of kind about id, for the API call name,
// and returns the loop's count. It returns an error for an empty id, [ErrClosed]
// once the loop has stopped, and ctx.Err() when ctx ends first (nil: no end).
func (k *Kernel) askID(ctx context.Context, name string, kind ctrlKind, id string) (int, error) {
	if id == "" {
		return 0, errors.New("kernel: " + name + ": id must not be empty")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	count := make(chan int, 1)
	k.control(ctrlMsg{kind: kind, id: id, count: count})
	select {
	case c := <-count:
		return c, nil
	case <-k.loopDone:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// cancelHeld cancels the recovered durable task id if it waits for its kind's
// Register or its group's configuration: its row is stored Canceled. It reports how many it cancelled (0 or 1).
func (k *Kernel) cancelHeld(id string) int {
	if k.dur == nil {
		return 0
	}
	found, ok := k.dur.reg.TakeHeld(id)
	if !ok {
		return 0
	}
	k.dur.j.Add([]jentry{{C: store.Change{Op: store.OpCancel, Fence: found.Fence, Task: store.StoredTask{ID: id, LastError: ErrCanceled.Error(), UpdatedAt: k.clk.Now()}}}})
	return 1
}

// index adds a named task to the loop's index of IDs. Loop only.
func (k *Kernel) index(h *Handle) {
	if k.ls.byID == nil {
		k.ls.byID = make(map[string]*Handle)
	}
	if _, ok := k.ls.byID[h.id]; !ok {
		k.ls.byID[h.id] = h
		return
	}
	if k.ls.dupID == nil {
		k.ls.dupID = make(map[string][]*Handle)
	}
	k.ls.dupID[h.id] = append(k.ls.dupID[h.id], h)
}

// unindex removes an ended named task from the index. Loop only.
func (k *Kernel) unindex(h *Handle) {
	dups := k.ls.dupID[h.id]
	if k.ls.byID[h.id] == h {
		if len(dups) == 0 {
			delete(k.ls.byID, h.id)
			return
		}
		k.ls.byID[h.id] = dups[0]
		dups = dups[1:]
	} else if i := slices.Index(dups, h); i >= 0 {
		dups = slices.Delete(dups, i, i+1)
	}
	if len(dups) == 0 {
		delete(k.ls.dupID, h.id)
	} else {
		k.ls.dupID[h.id] = dups
	}
}

// cancelID cancels the live tasks of id and returns how many it found. Loop only.
func (k *Kernel) cancelID(id string) int {
	first, ok := k.ls.byID[id]
	if !ok {
		return 0
	}
	hs := append([]*Handle{first}, k.ls.dupID[id]...) // cancel unindexes what ends
	for _, h := range hs {
		if !h.placed && k.cancelBacklog(h) {
			continue
		}
		k.cancel(h, ErrCanceled)
	}
	return len(hs)
}

// cancelBacklog ends a recovered task still waiting for a ticket in the backlog,
// as if it had been taken in and cancelled at once. It reports false when h is not
// in the backlog. Loop only.
func (k *Kernel) cancelBacklog(h *Handle) bool {
	b := k.ls.backlog[h.bucket]
	i := slices.Index(b, h)
	if i < 0 {
		return false
	}
	k.ls.backlog[h.bucket] = slices.Delete(b, i, i+1)
	k.ls.live++
	k.ls.pendSubmitted[h.bucket]++
	k.flushCounts() // counted submitted before it is counted ended
	k.m.canceled[h.bucket].Inc()
	k.end(h, Canceled, ErrCanceled)
	return true
}

// cancel ends or cancels one task, whatever its state.
func (k *Kernel) cancel(h *Handle, err error) {
	if h.has(featDurable) && h.dur.inPool {
		k.cancelPooled(h)
		return
	}
	switch State(h.state.Load()) {
	case Delayed, Retrying:
		a := h.cur
		k.ls.wheel.Cancel(a.timer)
		a.tkind = timerNone
		k.ls.delayed[h.ticket()]--
		k.release(h.ticket(), 1)
		k.ls.freed = true
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, err)
	case Queued:
		switch {
		case k.gateRemove(h), k.unholdCanceled(h):
		default:
			if _, ok := k.ls.buckets.Bucket(h.bucket).Remove(func(x qitem) bool { return x.h == h }); !ok {
				return // still in the intake: impossible, the intake is drained first
			}
			if h.cur.permit {
				k.gateRelease(h.cur)
			}
		}
		k.release(h.ticket(), 1)
		k.ls.freed = true
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, err)
	case Running:
		if h.cancelErr == nil {
			h.cancelErr = err
		}
		h.cur.ctx.Cancel(context.Canceled)
	}
}
