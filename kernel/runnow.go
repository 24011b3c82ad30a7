package kernel

import (
	"context"
	"fmt"

	"github.com/axsched/ax/timewheel"
)

// RunNow makes the tasks of id that wait for their time due now, and returns how
// many of its tasks wait: a delayed or retrying one leaves its timer for its bucket
// (a group's task for its group's gate) as if due, keeping its attempt number; a
// queued one is counted; a running one neither. It finds tasks as [Kernel.Cancel]
// does. On a [store.SharedStore] a durable task's stored RunAt becomes now too, and
// a task waiting in the pool, put there by any kernel, is made due for the next
// claim ([store.SharedStore.RunNow]); on another Store the stored RunAt stays.
//
// It returns an error wrapping [ErrUnknownTask] when no live task has the ID, an
// error for an empty id, [ErrClosed] once the kernel has stopped, and the store's
// error, wrapped. It blocks until the loop and the store have applied it, or until
// ctx ends (it returns ctx.Err(), and the change may still apply). A nil ctx is
// context.Background(). Safe for concurrent use, also from inside a task.
func (k *Kernel) RunNow(ctx context.Context, id string) (int, error) {
	n := 0
	if k.dur != nil && k.dur.reg.RunHeldNow(id) {
		n = 1
	}
	c, err := k.askID(ctx, "RunNow", ctrlRunNowID, id)
	if err != nil {
		return n, err
	}
	found, n := n > 0 || c >= 0, n+max(c, 0)
	if ctx == nil {
		ctx = context.Background()
	}
	if d := k.dur; d != nil && d.own != nil {
		ok, err := storeCall(k, "RunNow", func() (bool, error) { return d.own.RunNow(ctx, d.j.Flush, k.clk.Now(), id) })
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
	case !h.placed: // a recovered task in the backlog: due when the loop takes it in
		h.dueAt = min(h.dueAt, k.ls.nowMono)
	case h.has(featDurable) && h.dur.inPool: // waiting in the pool: the store moves its RunAt
	case (st == Delayed || st == Retrying) && h.cur.tkind == timerDue:
		a := h.cur
		k.ls.wheel.Cancel(a.timer)
		a.tkind, a.timer = timerNone, timewheel.Handle[timerEntry]{}
		k.ls.delayed[h.ticket()]--
		k.toBucket(h, st)
	case st != Queued:
		return 0
	}
	return 1
}
