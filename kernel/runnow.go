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

// RunNow makes the waiting tasks whose ID is id due now, and returns how many it
// found waiting: a delayed task, or one waiting for its retry's backoff, leaves
// the timer and goes to its bucket (a group's task to its group's gate, as when it
// comes due), keeping its attempt number; a queued task is eligible already and
// is only counted. A running task is left alone and not counted. The tasks are
// found as [Kernel.Cancel] finds them: those submitted with that Task.ID, and the
// durable task of that stored ID, recovered ones included.
//
// A durable task's stored RunAt moves too, when Config.Store is a
// [store.SharedStore] ([store.SharedStore.RunNow]), so that a restart does not
// delay it again; and a durable task waiting in the store's pool, put there by
// this kernel or another, is made due there for the next claim of any kernel on
// the store. With a Store that is not a SharedStore the stored RunAt keeps its
// value: the task runs now, but a restart before it starts waits for it again.
//
// It returns an error wrapping [ErrUnknownTask] when no live task has the ID (nor
// a pool task, with a SharedStore); the count is 0 and no error when the only
// tasks of that ID are running. RunNow blocks until the loop has applied it and,
// for a durable kernel, the store has answered, or until ctx ends (it returns
// ctx.Err(), and the change may still take effect). It returns [ErrClosed] once the
// kernel has stopped, an error for an empty id, and an error wrapping the store's
// when its call fails. A nil ctx is context.Background(). Safe for concurrent use,
// also from inside a task.
func (k *Kernel) RunNow(ctx context.Context, id string) (int, error) {
	if id == "" {
		return 0, errors.New("kernel: RunNow: id must not be empty")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	n := k.runNowHeld(id)
	found := n > 0
	count := make(chan int, 1)
	k.control(ctrlMsg{kind: ctrlRunNowID, id: id, count: count})
	select {
	case c := <-count:
		if c >= 0 {
			n, found = n+c, true
		}
	case <-k.loopDone:
		return 0, ErrClosed
	case <-ctx.Done():
		return n, ctx.Err()
	}
	if d := k.dur; d != nil && d.own != nil {
		// After the changes the loop journaled for the task (its insert, its retry),
		// so that the stored RunAt they set is the one moved.
		if err := d.j.Flush(ctx); err != nil {
			return n, err
		}
		ok, err := storeCall(k, "RunNow", func() (bool, error) {
			return d.own.Store().RunNow(ctx, d.own.Current(), k.clk.Now(), id)
		})
		if err != nil {
			return n, fmt.Errorf("kernel: run now %q: %w", id, err)
		}
		if ok {
			d.own.ClaimNow()
			if !found {
				n, found = 1, true // a pool task this kernel does not follow
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("kernel: run now %q: %w", id, ErrUnknownTask)
	}
	return n, nil
}

// runNowHeld makes the recovered durable task id due if it waits for its kind's
// Register or its group's configuration. It reports how many it found (0 or 1).
func (k *Kernel) runNowHeld(id string) int {
	d := k.dur
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, held := range []map[string][]store.StoredTask{d.held, d.heldGroups} {
		for _, ts := range held {
			if i := slices.IndexFunc(ts, func(t store.StoredTask) bool { return t.ID == id }); i >= 0 {
				ts[i].RunAt = time.Time{}
				return 1
			}
		}
	}
	return 0
}

// runNowID makes the waiting tasks of id due and returns how many it found
// waiting, or -1 when no live task has the ID. Loop only.
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
		k.addJournal() // RunNow flushes the journal next
	}
	return n
}

// runNowOne makes h due if it waits and reports whether it waits (1 or 0). Loop
// only.
func (k *Kernel) runNowOne(h *Handle) int {
	if !h.placed {
		// A recovered task waiting for a ticket: due when the loop takes it in.
		if slices.Contains(k.ls.backlog[h.bucket], h) {
			h.dueAt = min(h.dueAt, k.ls.nowMono)
			return 1
		}
		return 0
	}
	st := State(h.state.Load())
	if h.has(featDurable) && h.dur.inPool {
		// The store holds its RunAt: RunNow moves it there.
		if st == Delayed || st == Queued {
			return 1
		}
		return 0
	}
	switch st {
	case Queued:
		return 1
	case Delayed, Retrying:
		a := h.cur
		if a.tkind != timerDue {
			return 0
		}
		k.ls.wheel.Cancel(a.timer)
		a.tkind = timerNone
		a.timer = timewheel.Handle[timerEntry]{}
		k.ls.delayed--
		k.toBucket(h, st)
		return 1
	}
	return 0
}
