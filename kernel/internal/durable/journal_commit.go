package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/store"
	"github.com/benbjohnson/clock"
)

// The journal's batches: what a commit takes from the queue, the starts it
// stores with the inserts (prestarts), and the commit itself with its answers.

// gather waits, at most gatherMax, until the queue holds want
// ends (changes that are neither inserts nor starts): the ends of the tasks the last
// commit started, so that a cycle of short tasks ends in one commit rather than in
// two of half as many. It waits only while no acknowledged insert, flush or store
// call (InStream) waits for the journal. It returns false when the journal stops.
func (j *Journal[H, A]) gather(want int) bool {
	var t *clock.Timer
	for !j.gathered(want) {
		if t == nil {
			t = j.clk.Timer(gatherMax)
			defer t.Stop()
		}
		select {
		case <-j.wake:
		case <-t.C:
			return true
		case <-j.stopCh:
			return false
		}
	}
	return true
}

// gathered reports whether the next commit should go now: the queue holds want ends,
// or something in it or beside it waits for the commit.
func (j *Journal[H, A]) gathered(want int) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.flushNow || len(j.calls) > 0 || len(j.queue) >= j.maxBatch {
		return true
	}
	ends := 0
	for i := range j.queue {
		e := &j.queue[i]
		if e.Ack != nil && (j.ins == nil || !forInserts(e)) {
			return true
		}
		if e.C.Op != store.OpInsert && e.C.Op != store.OpStart {
			ends++
		}
	}
	return ends >= want
}

// take removes the next batch from the queue: up to maxBatch changes, never
// splitting the inserts of one submit, and leaving to the insert stream the submits
// it may take while it is idle (journal_inserts.go).
func (j *Journal[H, A]) take() []Entry[H, A] {
	j.mu.Lock()
	defer j.mu.Unlock()
	var batch, rest []Entry[H, A]
	leave, left := j.leaveInsertsLocked(), false
	for i := 0; i < len(j.queue); {
		end := runOf(j.queue, i)
		switch {
		case leave && runForInserts(j.queue, i, end):
			rest, left = append(rest, j.queue[i:end]...), true
		case len(batch) < j.maxBatch:
			batch = append(batch, j.queue[i:end]...)
		default:
			rest = append(rest, j.queue[i:end]...)
		}
		i = end
	}
	clear(j.queue)
	j.queue = append(j.queue[:0], rest...)
	j.pending.Store(int64(len(j.queue)))
	j.roomLocked()
	if left {
		j.wakeInserts()
	}
	return batch
}

// startable counts the inserts of the next batch that could start in its commit:
// acknowledged inserts of tasks due now that run here (not in the pool).
func (j *Journal[H, A]) startable() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n, taken := 0, 0
	leave := j.leaveInsertsLocked()
	for i := 0; i < len(j.queue) && taken < j.maxBatch; {
		end := runOf(j.queue, i)
		if !leave || !runForInserts(j.queue, i, end) {
			for k := i; k < end; k++ {
				if startable(&j.queue[k]) {
					n++
				}
			}
			taken += end - i
		}
		i = end
	}
	return n
}

func startable[H, A comparable](e *Entry[H, A]) bool {
	return e.Ack != nil && e.C.Op == store.OpInsert && !e.C.Pool && e.C.Task.State == store.Queued && e.C.Task.Group == "" && !e.Due
}

// prestart returns batch with an OpStart behind each of its first n startable
// inserts (prestart.go).
func (j *Journal[H, A]) prestart(batch []Entry[H, A], n int) []Entry[H, A] {
	out := make([]Entry[H, A], 0, len(batch)+n)
	now := j.clk.Now()
	for i := range batch {
		e := &batch[i]
		out = append(out, *e)
		if n > 0 && startable(e) {
			n--
			out = append(out, Entry[H, A]{H: e.H, pre: true, C: store.Change{Op: store.OpStart, Fence: e.C.Task.Fence, Task: store.StoredTask{
				ID: e.C.Task.ID, Attempt: 1, Fence: e.C.Task.Fence + 1, UpdatedAt: now,
			}}})
		}
	}
	return out
}

// unreserve gives the loop back the slots reserved for the commit, with the
// tasks it started.
func (j *Journal[H, A]) unreserve(started []H) {
	if j.reserved == 0 {
		return
	}
	j.prestarted.Add(len(started))
	j.loop.Prestarted(started, j.reserved)
	j.reserved = 0
}

// commit writes one batch and settles what waits for it. It reports false when the
// store could not be reached: the batch's acknowledged inserts are then refused
// (their submits fail, and a cancel that undoes each, should it have landed, goes
// first in the next commit); its other changes go back to the front of the queue.
func (j *Journal[H, A]) commit(batch []Entry[H, A], changes []store.Change) bool {
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	t0 := j.clk.Now()
	var (
		results []error
		err     error
	)
	if j.own != nil {
		results, err = j.own.Commit(ctx, changes, j.stopCh)
	} else {
		results, err = call(j.guard, "Commit", func() ([]error, error) { return j.store.Commit(ctx, changes) })
	}
	cancel()
	j.lastStarted = 0 // set again once the commit is known to have started some
	if err == nil && len(results) != len(changes) {
		err = fmt.Errorf("kernel: Store.Commit returned %d results for %d changes", len(results), len(changes))
	}
	if errors.Is(err, store.ErrLeaseLost) {
		// Nothing of this try applied (an earlier one may have: err then wraps
		// store.ErrOutcomeUnknown), and the owner joined again (Owner.Commit):
		// refuse its acknowledged inserts, and commit the rest at once as the new owner.
		j.unreserve(nil)
		j.leaseLost(batch, err)
		return true
	}
	if err != nil {
		j.unreserve(nil)
		j.failed(batch, err)
		return false
	}
	j.commits.Inc()
	j.changes.Add(len(changes))
	if j.own != nil {
		j.beatAt = t0.Add(j.own.HeartbeatEvery())
	}
	if j.down.Swap(nil) != nil && j.log != nil {
		j.log.Log(slog.LevelInfo, "kernel: the store answers again; durable submits resume")
	}
	var handed, prestarted, adopted, adoptRefused []H
	var started, refused []A
	var noA A
	var refusals []error
	for i := range batch {
		e := &batch[i]
		r := results[i]
		switch {
		case e.Ack != nil:
			switch {
			case r != nil:
				e.Ack.Errs[e.Idx] = r
				j.refuse(*e)
			case i+1 < len(batch) && batch[i+1].pre && results[i+1] == nil:
				prestarted = append(prestarted, e.H)
			default:
				handed = append(handed, e.H)
			}
		case e.pre:
			// Settled with its insert, above; a refused start leaves the task
			// stored Queued, handed over as such.
		case e.comp:
			// Undoing an insert that may not have landed: unknown is the expected answer.
		case e.Adopt:
			if r != nil {
				adoptRefused = append(adoptRefused, e.H)
			} else {
				adopted = append(adopted, e.H)
			}
		case e.Start != noA:
			// A refused start means another owner holds the task now: the attempt
			// never runs here.
			if r != nil {
				refused = append(refused, e.Start)
				refusals = append(refusals, r)
				j.refused.Inc()
				if j.log != nil {
					j.log.Log(slog.LevelWarn, "kernel: the store refused a start; the attempt does not run", "task", e.C.Task.ID, "err", r)
				}
			} else {
				started = append(started, e.Start)
			}
		case r != nil:
			j.refused.Inc()
			if j.log != nil {
				j.log.Log(slog.LevelWarn, "kernel: the store refused a change", "op", e.C.Op.String(), "task", e.C.Task.ID, "err", r)
			}
		}
	}
	j.lastStarted = len(prestarted) + len(started) + len(adopted)
	j.unreserve(prestarted)
	if len(handed) > 0 {
		j.loop.Stored(handed)
	}
	if len(started) > 0 || len(refused) > 0 {
		j.loop.Started(started, refused, refusals)
	}
	if len(adopted) > 0 || len(adoptRefused) > 0 {
		j.adopted.Add(uint64(len(adopted)))
		j.adoptRefused.Add(uint64(len(adoptRefused)))
		j.loop.Adopted(adopted, adoptRefused)
	}
	settleGroups(batch)
	return true
}

// leaseLost settles a batch that the store refused with ErrLeaseLost: its
// acknowledged inserts are refused (their submits fail), its other changes go back
// to the front of the queue, for the owner's next membership.
func (j *Journal[H, A]) leaseLost(batch []Entry[H, A], err error) {
	keep := make([]Entry[H, A], 0, len(batch))
	for _, e := range batch {
		if e.pre {
			continue // its insert is refused
		}
		if e.Ack == nil {
			keep = append(keep, e)
			continue
		}
		e.Ack.All = fmt.Errorf("kernel: durable submit: %w", err)
		j.refuse(e)
	}
	j.mu.Lock()
	j.queue = append(keep, j.queue...)
	j.pending.Store(int64(len(j.queue)))
	j.mu.Unlock()
	settleGroups(batch)
}

// failed settles a batch whose commit failed otherwise: the store is down. Its
// acknowledged inserts are refused (a cancel that undoes each, should it have
// landed, goes first in the next commit); its other changes go back to the front
// of the queue.
func (j *Journal[H, A]) failed(batch []Entry[H, A], err error) {
	j.commitErrors.Inc()
	// An outcome the store could not learn goes to the submitters as it is: their
	// tasks may be stored, and may run. Any other failure stored nothing.
	unknown := errors.Is(err, store.ErrOutcomeUnknown)
	if !unknown && !errors.Is(err, store.ErrStoreUnavailable) {
		err = fmt.Errorf("%w: %w", store.ErrStoreUnavailable, err)
	}
	if j.down.Swap(&err) == nil && j.log != nil {
		j.log.Log(slog.LevelWarn, "kernel: the store is down; durable submits fail until it answers", "err", err)
	}
	now := j.clk.Now()
	keep := make([]Entry[H, A], 0, len(batch))
	for i, e := range batch {
		if e.pre {
			continue // its insert is refused, and undone
		}
		if e.Ack == nil {
			keep = append(keep, e)
			continue
		}
		if unknown && e.C.Pool {
			// Stored or not, another kernel may claim it before a cancel lands:
			// leave it be, so that it runs exactly when it was stored.
			e.Ack.All = fmt.Errorf("kernel: durable submit: %w", err)
			j.refuse(e)
			j.loop.Orphan(e.H)
			continue
		}
		fence := e.C.Task.Fence
		if i+1 < len(batch) && batch[i+1].pre {
			fence = batch[i+1].C.Task.Fence // the insert landed with its start, if at all
		}
		keep = append(keep, Entry[H, A]{comp: true, C: store.Change{Op: store.OpCancel, Fence: fence, Task: store.StoredTask{
			ID: e.C.Task.ID, UpdatedAt: now, LastError: "kernel: its submit was refused: the store did not answer",
		}}})
		e.Ack.All = fmt.Errorf("kernel: durable submit: %w", err)
		j.refuse(e)
	}
	j.mu.Lock()
	j.queue = append(keep, j.queue...)
	j.pending.Store(int64(len(j.queue)))
	j.mu.Unlock()
	settleGroups(batch)
}

// settleGroups wakes the submits whose inserts were all in batch.
func settleGroups[H, A comparable](batch []Entry[H, A]) {
	for i := range batch {
		if g := batch[i].Ack; g != nil {
			g.left--
			if g.left == 0 {
				close(g.done)
			}
		}
	}
}

// refuse gives back what an acknowledged insert whose submit fails holds.
func (j *Journal[H, A]) refuse(e Entry[H, A]) { j.loop.Refuse(e.H) }

// sleep waits d, or returns false when the journal stops first.
func (j *Journal[H, A]) sleep(d time.Duration) bool { return sleep(j.clk, d, j.stopCh) }
