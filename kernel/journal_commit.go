package kernel

import (
	"context"
	"errors"
	"fmt"
)

// A commit of the journal: launched on a goroutine of its own with its batch, then
// settled by the journal goroutine once the store answered.

// jcommit is one commit in flight: its batch, the slots the loop reserved for its
// prestarts, and the store's answer once it returns.
type jcommit struct {
	batch     []jentry
	changes   []Change
	reserved  int
	unstarted int  // its startable inserts that got no start (see launch)
	keyed     bool // the batch holds an insert with a unique key
	results   []error
	err       error
}

// launch gives batch the starts the loop has slots for (prestart.go) and commits it
// on a goroutine of its own, which hands it to done once the store answered. While a
// commit in flight holds inserts that got no slot, the batch gets no start either:
// those tasks will queue, and a task queued takes a free slot before a new one.
func (j *journal) launch(batch []jentry, done chan<- *jcommit) {
	c := &jcommit{}
	n := 0
	if j.every == 0 {
		for i := range batch {
			if startable(&batch[i]) {
				n++
			}
		}
		if n > 0 && j.unstarted == 0 {
			c.reserved = j.k.askStartBudget(n)
		}
	}
	if c.reserved > 0 {
		batch = j.prestart(batch, c.reserved)
	}
	c.unstarted = n - c.reserved
	j.unstarted += c.unstarted
	c.batch, c.changes = batch, make([]Change, len(batch))
	for i := range batch {
		ch := &batch[i].c
		c.changes[i] = *ch
		j.busy[ch.Task.ID]++
		if ch.Op == OpInsert && ch.Task.UniqueKey != "" {
			c.keyed = true
		}
	}
	j.keyed = j.keyed || c.keyed
	j.mu.Lock()
	j.inflight += len(batch)
	j.setPendingLocked()
	j.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
		if own := j.k.dur.own; own != nil {
			c.results, c.err = own.commit(ctx, c.changes)
		} else {
			c.results, c.err = storeCall(j.k, "Commit", func() ([]error, error) { return j.store.Commit(ctx, c.changes) })
		}
		cancel()
		done <- c
	}()
}

// finish settles a commit that returned (see commit) and reports whether the store
// answered.
func (j *journal) finish(c *jcommit) bool {
	for i := range c.batch {
		id := c.batch[i].c.Task.ID
		if j.busy[id]--; j.busy[id] <= 0 {
			delete(j.busy, id)
		}
	}
	if c.keyed {
		j.keyed = false
	}
	j.unstarted -= c.unstarted
	j.mu.Lock()
	j.inflight -= len(c.batch)
	j.setPendingLocked()
	j.mu.Unlock()
	return j.commit(c)
}

// commit settles what waits for commit c, which the store answered. It reports false
// when the store could not be reached: the batch's acknowledged inserts are then
// refused (their submits fail, and a cancel that undoes each, should it have landed,
// goes first in the next commit); its other changes go back to the front of the
// queue. The batch shares no task with the commits still in flight (take), so its
// changes keep their order there too.
func (j *journal) commit(c *jcommit) bool {
	batch, changes, results, err := c.batch, c.changes, c.results, c.err
	if err == nil && len(results) != len(changes) {
		err = fmt.Errorf("kernel: Store.Commit returned %d results for %d changes", len(results), len(changes))
	}
	if errors.Is(err, ErrLeaseLost) {
		// Nothing of the batch applied, and the owner joined again (ownership.commit):
		// refuse its acknowledged inserts, and commit the rest at once as the new owner.
		keep := make([]jentry, 0, len(batch))
		for _, e := range batch {
			if e.pre {
				continue // its insert is refused
			}
			if e.ack == nil {
				keep = append(keep, e)
				continue
			}
			e.ack.all = fmt.Errorf("kernel: durable submit: %w", err)
			j.refuse(e)
		}
		j.unreserve(c, nil)
		j.mu.Lock()
		j.queue = append(keep, j.queue...)
		j.setPendingLocked()
		j.mu.Unlock()
		settleGroups(batch)
		return true
	}
	if err != nil {
		j.commitErrors.Inc()
		if !errors.Is(err, ErrStoreUnavailable) {
			err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
		if j.down.Swap(&err) == nil {
			j.log.warn("kernel: the store is down; durable submits fail until it answers", "err", err)
		}
		now := j.k.clk.Now()
		keep := make([]jentry, 0, len(batch))
		for i, e := range batch {
			if e.pre {
				continue // its insert is refused, and undone
			}
			if e.ack == nil {
				keep = append(keep, e)
				continue
			}
			fence := e.c.Task.Fence
			if i+1 < len(batch) && batch[i+1].pre {
				fence = batch[i+1].c.Task.Fence // the insert landed with its start, if at all
			}
			keep = append(keep, jentry{comp: true, c: Change{Op: OpCancel, Fence: fence, Task: StoredTask{
				ID: e.c.Task.ID, UpdatedAt: now, LastError: "kernel: its submit was refused: the store did not answer",
			}}})
			e.ack.all = fmt.Errorf("kernel: durable submit: %w", err)
			j.refuse(e)
		}
		j.mu.Lock()
		j.queue = append(keep, j.queue...)
		j.setPendingLocked()
		j.mu.Unlock()
		j.unreserve(c, nil)
		settleGroups(batch)
		return false
	}
	j.commits.Inc()
	j.changes.Add(len(changes))
	if j.down.Swap(nil) != nil {
		j.log.info("kernel: the store answers again; durable submits resume")
	}
	var handed, prestarted []*Handle
	var started, refused []*attempt
	var refusals []error
	for i := range batch {
		e := &batch[i]
		r := results[i]
		switch {
		case e.ack != nil:
			switch {
			case r != nil:
				e.ack.errs[e.idx] = r
				j.refuse(*e)
			case i+1 < len(batch) && batch[i+1].pre && results[i+1] == nil:
				prestarted = append(prestarted, e.h)
			default:
				handed = append(handed, e.h)
			}
		case e.pre:
			// Settled with its insert, above; a refused start leaves the task
			// stored Queued, handed over as such.
		case e.comp:
			// Undoing an insert that may not have landed: unknown is the expected answer.
		case e.start != nil:
			// A refused start means another owner holds the task now: the attempt
			// never runs here.
			if r != nil {
				refused = append(refused, e.start)
				refusals = append(refusals, r)
				j.refused.Inc()
				if j.log != nil {
					j.log.warn("kernel: the store refused a start; the attempt does not run", "task", e.c.Task.ID, "err", r)
				}
			} else {
				started = append(started, e.start)
			}
		case r != nil:
			j.refused.Inc()
			if j.log != nil {
				j.log.warn("kernel: the store refused a change", "op", e.c.Op.String(), "task", e.c.Task.ID, "err", r)
			}
		}
	}
	j.unreserve(c, prestarted)
	if len(handed) > 0 && !j.k.enqueueMany(handed) {
		for _, h := range handed {
			if !h.dur.inPool {
				j.k.release(h.ticket(), 1)
			}
			j.k.abortDurable(h)
		}
	}
	if len(started) > 0 || len(refused) > 0 {
		j.k.control(ctrlMsg{kind: ctrlStarted, as: started, refused: refused, errs: refusals})
	}
	settleGroups(batch)
	return true
}

// settleGroups wakes the submits whose inserts were all in batch.
func settleGroups(batch []jentry) {
	for i := range batch {
		if g := batch[i].ack; g != nil {
			g.left--
			if g.left == 0 {
				close(g.done)
			}
		}
	}
}

// refuse gives back the ticket and the unique key of an acknowledged insert whose
// submit fails.
func (j *journal) refuse(e jentry) {
	if !e.h.dur.inPool { // a pool task holds no ticket
		j.k.release(e.h.ticket(), 1)
	}
	j.k.dur.dropKey(e.h.dur.unique)
}
