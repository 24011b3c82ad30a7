package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/timewheel"
)

// RunNow makes the waiting tasks of id due now and returns how many it found
// waiting. A delayed task, or one waiting for its retry, leaves its timer for its
// bucket (a group's task for its group's gate) as if due, keeping its attempt
// number; a queued task is counted; a running one neither. The tasks are found as
// [Kernel.Cancel] finds them. With a [store.SharedStore] a durable task's stored
// RunAt becomes now too, and a durable task waiting in the pool, put there by this
// kernel or another, is made due for the next claim ([store.SharedStore.RunNow]);
// with another Store the stored RunAt stays, and a restart before the task starts
// waits for it again.
//
// It returns an error wrapping [ErrUnknownTask] when no live task has the ID, an
// error for an empty id, [ErrClosed] once the kernel has stopped, and the store's
// error, wrapped, when its call fails. It blocks until the loop and the store have
// applied it, or until ctx ends (it returns ctx.Err(), and the change may still take
// effect). A nil ctx is context.Background(). Safe for concurrent use, also from
// inside a task.
func (k *Kernel) RunNow(ctx context.Context, id string) (int, error) {
	if id == "" {
		return 0, errors.New("kernel: RunNow: id must not be empty")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	found := k.withHeld(id, func(held map[string][]store.StoredTask, name string, i int) { held[name][i].RunAt = time.Time{} })
	n := 0
	if found {
		n = 1
	}
	count := make(chan int, 1)
	k.control(ctrlMsg{kind: ctrlRunNowID, id: id, count: count})
	select {
	case c := <-count:
		found, n = found || c >= 0, n+max(c, 0)
	case <-k.loopDone:
		return 0, ErrClosed
	case <-ctx.Done():
		return n, ctx.Err()
	}
	if d := k.dur; d != nil && d.own != nil {
		// After the changes journaled for the task (its insert, its retry), which set
		// the stored RunAt this one moves.
		if err := d.j.Flush(ctx); err != nil {
			return n, err
		}
		ok, err := storeCall(k, "RunNow", func() (bool, error) { return d.own.RunNow(ctx, k.clk.Now(), id) })
		if err != nil {
			return n, fmt.Errorf("kernel: run now %q: %w", id, err)
		}
		if ok && !found {
			n, found = 1, true // a pool task this kernel does not follow
		}
	}
	if !found {
		return 0, fmt.Errorf("kernel: run now %q: %w", id, ErrUnknownTask)
	}
	return n, nil
}

// runNowID makes the waiting tasks of id due and returns how many it found
// waiting, -1 when no live task has the ID. Loop only.
func (k *Kernel) runNowID(id string) int {
	first, ok := k.ls.byID[id]
	if !ok {
		return -1
	}
	n := k.runNowOne(first)
	for _, h := range k.ls.dupID[id] {
		n += k.runNowOne(h)
	}
	if k.dur != nil {
		k.addJournal() // before RunNow flushes the journal
	}
	return n
}

// runNowOne makes h due if it waits, and reports whether it waits (1 or 0). Loop
// only.
func (k *Kernel) runNowOne(h *Handle) int {
	st := State(h.state.Load())
	switch {
	case !h.placed: // recovered, waiting for a ticket: due when the loop takes it in
		if !slices.Contains(k.ls.backlog[h.bucket], h) {
			return 0
		}
		h.dueAt = min(h.dueAt, k.ls.nowMono)
	case h.has(featDurable) && h.dur.inPool: // the store moves its RunAt
		if st != Delayed && st != Queued {
			return 0
		}
	case (st == Delayed || st == Retrying) && h.cur.tkind == timerDue:
		a := h.cur
		k.ls.wheel.Cancel(a.timer)
		a.tkind, a.timer = timerNone, timewheel.Handle[timerEntry]{}
		k.ls.delayed--
		k.toBucket(h, st)
	case st != Queued:
		return 0
	}
	return 1
}
