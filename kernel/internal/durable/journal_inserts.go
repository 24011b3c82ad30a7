package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/axsched/ax/store"
)

// The journal's second stream: on a store.InsertStore, acknowledged inserts commit
// through InsertAs on a goroutine of their own, beside the group commits of the
// journal's goroutine, which renew the lease and hold the owner row meanwhile. The
// two take from one queue. The insert stream takes the submits whose inserts it may
// commit (inserts of acknowledged submits without a unique key, whole submits) while
// it is idle; the group commit leaves those to it then, and takes them itself, with
// the starts it may give them (prestart), only while the insert stream is busy.
// Inserts go first: the loop sees a task only once its insert is stored, so no other
// change of it waits in the queue before then.

// forInserts reports whether e may go to the insert stream.
func forInserts[H, A comparable](e *Entry[H, A]) bool {
	return e.Ack != nil && e.C.Op == store.OpInsert && e.C.Task.UniqueKey == ""
}

// runOf returns the end of the run of entries at i in q: the entries of one submit
// (one Ack), or e alone.
func runOf[H, A comparable](q []Entry[H, A], i int) int {
	end := i + 1
	for g := q[i].Ack; g != nil && end < len(q) && q[end].Ack == g; end++ {
	}
	return end
}

// runForInserts reports whether every entry of q[i:end] may go to the insert stream.
func runForInserts[H, A comparable](q []Entry[H, A], i, end int) bool {
	for k := i; k < end; k++ {
		if !forInserts(&q[k]) {
			return false
		}
	}
	return true
}

// leaveInserts reports whether the group commit leaves the submits of forInserts to
// the insert stream: it runs, is idle, and is not paused. Called with mu held.
func (j *Journal[H, A]) leaveInsertsLocked() bool {
	return j.ins != nil && !j.insBusy && !j.insPausedLocked() && j.down.Load() == nil
}

// insPausedLocked reports whether the insert stream waits for the owner's next
// membership: InsertAs found the lease of the current one ended. Called with mu held.
func (j *Journal[H, A]) insPausedLocked() bool {
	return j.insPaused != 0 && j.own.Current().Epoch == j.insPaused
}

// forMainLocked returns how many entries of the queue the group commit would take
// (not counting maxBatch). Called with mu held.
func (j *Journal[H, A]) forMainLocked() int {
	if !j.leaveInsertsLocked() {
		return len(j.queue)
	}
	n := 0
	for i := 0; i < len(j.queue); {
		end := runOf(j.queue, i)
		if !runForInserts(j.queue, i, end) {
			n += end - i
		}
		i = end
	}
	return n
}

// runInserts is the insert stream's goroutine.
func (j *Journal[H, A]) runInserts() {
	defer close(j.insDone)
	for {
		select {
		case <-j.insWake:
		case <-j.stopCh:
			return
		}
		for {
			batch := j.takeInserts()
			if batch == nil {
				break
			}
			j.commitInserts(batch)
			j.mu.Lock()
			j.insBusy = false
			j.mu.Unlock()
			select { // the group commit: a flush may wait, or entries came back
			case j.wake <- struct{}{}:
			default:
			}
			select {
			case <-j.stopCh:
				return
			default:
			}
		}
	}
}

// wakeInserts wakes the insert stream.
func (j *Journal[H, A]) wakeInserts() {
	if j.ins == nil {
		return
	}
	select {
	case j.insWake <- struct{}{}:
	default:
	}
}

// takeInserts removes from the queue the submits of forInserts, in order, up to
// maxBatch inserts (at least one submit), and marks the insert stream busy; nil when
// there are none or the stream may not take them now.
func (j *Journal[H, A]) takeInserts() []Entry[H, A] {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped || !j.leaveInsertsLocked() {
		return nil
	}
	var batch []Entry[H, A]
	rest := j.queue[:0:0]
	for i := 0; i < len(j.queue); {
		end := runOf(j.queue, i)
		if (len(batch) == 0 || len(batch)+end-i <= j.maxBatch) && runForInserts(j.queue, i, end) {
			batch = append(batch, j.queue[i:end]...)
		} else {
			rest = append(rest, j.queue[i:end]...)
		}
		i = end
	}
	if len(batch) == 0 {
		return nil
	}
	clear(j.queue)
	j.queue = rest
	j.pending.Store(int64(len(rest)))
	j.insBusy = true
	return batch
}

// commitInserts stores one batch of the insert stream and settles its submits. When
// the store finds the owner's lease ended, with nothing applied, the batch goes back
// to the front of the queue, for the group commit, which renews, learns the same and
// joins again (Owner.Commit); the insert stream waits for the next membership.
func (j *Journal[H, A]) commitInserts(batch []Entry[H, A]) {
	changes := make([]store.Change, len(batch))
	for i := range batch {
		changes[i] = batch[i].C
	}
	o := j.own.Current()
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	results, err := call(j.guard, "InsertAs", func() ([]error, error) { return j.ins.InsertAs(ctx, o, changes) })
	cancel()
	if err == nil && len(results) != len(changes) {
		err = fmt.Errorf("kernel: Store.InsertAs returned %d results for %d changes", len(results), len(changes))
	}
	switch {
	case errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, store.ErrOutcomeUnknown):
		j.mu.Lock()
		j.insPaused = o.Epoch
		j.queue = append(batch, j.queue...)
		j.pending.Store(int64(len(j.queue)))
		j.mu.Unlock()
		return
	case errors.Is(err, store.ErrLeaseLost):
		j.mu.Lock()
		j.insPaused = o.Epoch
		j.mu.Unlock()
		j.leaseLost(batch, err) // as the group commit settles it
		return
	case err != nil:
		j.failed(batch, err)
		return
	}
	j.commits.Inc()
	j.changes.Add(len(changes))
	var handed []H
	for i := range batch {
		e := &batch[i]
		if r := results[i]; r != nil {
			e.Ack.Errs[e.Idx] = r
			j.refuse(*e)
			continue
		}
		handed = append(handed, e.H)
	}
	if len(handed) > 0 {
		j.loop.Stored(handed)
	}
	settleGroups(batch)
}
