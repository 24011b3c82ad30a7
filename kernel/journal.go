package kernel

import (
	"cmp"
	"errors"
	"time"

	"github.com/axsched/ax/kernel/internal/callback"
	"github.com/axsched/ax/kernel/internal/durable"
	"github.com/axsched/ax/store"
)

// The journal (package durable) writes the durable tasks' lifecycle to the store in
// group commits; the loop fills its entries here, and the kernel's side of the seam
// (owner.go) takes its batches back.

// jentry is one change waiting for a group commit.
type jentry = durable.Entry[*Handle, *attempt]

// journal is the group-commit goroutine of the kernel's durable tasks.
type journal = durable.Journal[*Handle, *attempt]

func newJournal(k *Kernel, c *Config) *journal {
	jc := durable.JournalConfig[*Handle, *attempt]{
		Store: c.Store, Owner: k.dur.own, Every: c.SnapshotEvery, MaxBatch: c.StoreBatch, Timeout: c.StoreTimeout,
		Clock: k.clk, GuardFunc: func(f func()) (any, bool) { return callGuarded(k, f) },
		Loop: durableLoop{k}, ErrClosed: ErrClosed,
	}
	if k.log != nil {
		jc.Log = k.log
	}
	return durable.NewJournal(jc)
}

// storeCall is [callback.StoreCall] for k: a Store is the user's code, and the
// kernel's goroutines must not die with it.
func storeCall[T any](k *Kernel, op string, f func() (T, error)) (T, error) {
	return callback.StoreCall(&k.guarded, op, f)
}

// addJournal hands the changes the loop recorded to the journal. Loop only.
func (k *Kernel) addJournal() {
	if len(k.ls.jbuf) > 0 {
		k.dur.j.Add(k.ls.jbuf)
		clear(k.ls.jbuf)
		k.ls.jbuf = k.ls.jbuf[:0]
	}
}

// journalStart records the start of a durable attempt. Loop only.
func (k *Kernel) journalStart(h *Handle, a *attempt) {
	d := h.dur
	next := d.fence + 1
	k.ls.jbuf = append(k.ls.jbuf, jentry{C: store.Change{Op: store.OpStart, Fence: d.fence, Task: store.StoredTask{ID: h.id, Attempt: int(a.n), Fence: next, UpdatedAt: k.ls.now}}})
	if d.lost != nil {
		k.ls.jbuf[len(k.ls.jbuf)-1].C.Attempt, d.lost = *d.lost, nil
	}
	d.fence, d.startedAt = next, k.ls.now
}

// journalRetry records a failed attempt a (outcome Failed or TimedOut) that will
// be tried again at at (stored on the store's clock). Loop only.
func (k *Kernel) journalRetry(h *Handle, a *attempt, at time.Time, err error, outcome State) {
	msg := durable.ErrText(err)
	c := store.Change{Op: store.OpRetry, Fence: h.dur.fence, Attempt: k.attemptRecord(a, outcome, msg)}
	c.Task = store.StoredTask{ID: h.id, RunAt: k.dur.skew.DueToStore(at), LastError: msg, UpdatedAt: k.ls.now}
	k.ls.jbuf = append(k.ls.jbuf, jentry{C: c})
}

// journalEnd records the end of a durable task, unless the end belongs to this
// process only (Shutdown abandoned it, Close cancelled it, the process stops between
// attempts): its row then stays live, for the next kernel on the store. Loop only.
func (k *Kernel) journalEnd(h *Handle, to State, err error) {
	d := h.dur
	defer k.dur.reg.DropKeys(d.unique)
	if d.keepLive || to == Abandoned || (to == Canceled && errors.Is(err, ErrClosed)) {
		return
	}
	msg := durable.ErrText(err)
	k.ls.jbuf = append(k.ls.jbuf, jentry{C: durable.EndChange(h.id, d.fence, to, msg, k.ls.now, h.cur.ctx.Get(), k.attemptRecord(h.cur, to, msg))})
}

// attemptRecord returns the history record of attempt a, ended now with outcome
// and msg, or none when it never started. Loop only.
func (k *Kernel) attemptRecord(a *attempt, outcome State, msg string) store.Attempt {
	q := &k.rq
	q.mu.Lock() // the executor writes started and startAt under it
	started, startAt := a.started, a.startAt
	q.mu.Unlock()
	if !started {
		return store.Attempt{}
	}
	// Start: its OpStart's UpdatedAt (shared by a pass's starts), else when it ran.
	r := store.Attempt{Number: int(a.n), Start: cmp.Or(a.h.dur.startedAt, k.at(startAt)), End: k.ls.now, Outcome: outcome, Error: msg}
	if k.dur.own != nil {
		r.Owner = k.dur.own.Current().Name
	}
	return r
}
