package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/store"
)

// The journal's retry and probe delays while the store is down.
const (
	journalBackoffMin = 20 * time.Millisecond
	journalBackoffMax = time.Second
)

// jentry is one change waiting for a group commit.
type jentry struct {
	c    store.Change
	h    *Handle   // an insert: the task, handed to the loop once stored (acknowledged mode)
	ack  *ackGroup // an acknowledged insert: the submit waiting for it
	idx  int       // the task's index in that submit
	comp bool      // a cancel that undoes an insert whose submit was told it failed
	// An OpStart whose attempt waits for it to be stored (acknowledged mode); the
	// journal hands it back to the loop once committed.
	start *attempt
	// pre: the OpStart the journal added behind the insert before it (h's), in the
	// same commit (prestart.go).
	pre bool
}

// ackGroup is one acknowledged durable submit waiting for its commit. The journal
// writes errs and all, then closes done.
type ackGroup struct {
	errs []error // per task of the submit
	all  error   // an error for the whole submit: the commit failed
	left int     // entries not settled yet; journal-owned
	done chan struct{}
}

// journal is the goroutine that writes the durable tasks' lifecycle to the store in
// group commits, one commit at a time and in order: whatever queued up while a commit
// was in flight goes in the next one. In periodic snapshot mode it commits every
// Config.SnapshotEvery instead. Its delays run on the real clock: they are about the
// database, not about task times.
type journal struct {
	k        *Kernel
	store    store.Store
	every    time.Duration
	maxBatch int
	timeout  time.Duration
	log      *kernelLog // nil without Config.Logger

	mu       sync.Mutex
	queue    []jentry        // guarded by mu
	flushing []chan struct{} // guarded by mu: closed once the queue is empty and committed
	flushNow bool            // guarded by mu: commit without waiting for the snapshot tick
	stopped  bool            // guarded by mu: the journal goroutine returned
	room     chan struct{}   // guarded by mu: closed (and replaced) when the queue shrinks below limit
	limit    int             // periodic snapshot mode: submits wait while this many changes wait
	wake     chan struct{}   // size 1
	stopCh   chan struct{}
	doneCh   chan struct{}
	stopOnce sync.Once

	down    atomic.Pointer[error] // the last error while the store is known to be down
	pending atomic.Int64
	// reserved: the slots the loop reserved for the prestarts of the commit being
	// made (prestart.go); journal goroutine only.
	reserved int

	commits, changes, commitErrors, refused, prestarted *metrics.Counter
}

func newJournal(k *Kernel, c *Config) *journal {
	j := &journal{
		k: k, store: c.Store, every: c.SnapshotEvery, maxBatch: c.StoreBatch, timeout: c.StoreTimeout, log: k.log,
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), doneCh: make(chan struct{}),
		room: make(chan struct{}), limit: 4 * c.StoreBatch,
	}
	j.commits = new(metrics.Counter)
	j.changes = new(metrics.Counter)
	j.commitErrors = new(metrics.Counter)
	j.refused = new(metrics.Counter)
	j.prestarted = new(metrics.Counter)
	go j.run()
	return j
}

// add queues changes, in order, after everything queued before. Once the journal
// stopped, it refuses the acknowledged inserts among them and drops the rest.
func (j *journal) add(es []jentry) {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		j.abandon(es)
		return
	}
	j.queue = append(j.queue, es...)
	j.pending.Store(int64(len(j.queue)))
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// availableErr returns an error wrapping ErrStoreUnavailable while the store is
// known to be down, so that durable submits fail fast.
func (j *journal) availableErr() error {
	if p := j.down.Load(); p != nil {
		return fmt.Errorf("kernel: durable submit refused while the store is down: %w (last error: %w)", store.ErrStoreUnavailable, *p)
	}
	return nil
}

// waitRoom blocks a periodic-snapshot submit while the journal's queue holds limit
// changes or more, so that a store slower than the submitters bounds their pace
// instead of the kernel's memory. It returns ctx.Err() or ErrClosed if those come
// first.
func (j *journal) waitRoom(ctx context.Context) error {
	for {
		j.mu.Lock()
		if len(j.queue) < j.limit || j.stopped {
			j.mu.Unlock()
			return nil
		}
		ch := j.room
		j.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-j.doneCh:
			return ErrClosed
		}
	}
}

// roomLocked wakes the submits waiting for room once the queue is below limit.
// Called with mu held.
func (j *journal) roomLocked() {
	if len(j.queue) < j.limit {
		close(j.room)
		j.room = make(chan struct{})
	}
}

// flush waits until everything queued so far is committed, or ctx ends.
func (j *journal) flush(ctx context.Context) error {
	ch := make(chan struct{})
	j.mu.Lock()
	j.flushing = append(j.flushing, ch)
	j.flushNow = true
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	select {
	case <-ch:
		return nil
	case <-j.doneCh:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop ends the journal goroutine; what was not committed stays uncommitted.
func (j *journal) stop() {
	j.stopOnce.Do(func() { close(j.stopCh) })
	<-j.doneCh
}

// sleep waits d, or returns false when the journal stops first.
func (j *journal) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-j.stopCh:
		return false
	}
}

// abandon settles the acknowledged inserts of entries that will never be committed:
// their submits fail with ErrClosed. The other changes are lost to the store, which
// keeps those tasks' earlier states.
func (j *journal) abandon(es []jentry) {
	for _, e := range es {
		if e.ack != nil {
			e.ack.all = fmt.Errorf("kernel: durable submit: the kernel closed before the task was stored: %w", ErrClosed)
			j.refuse(e)
		}
	}
	settleGroups(es)
}

func (j *journal) run() {
	defer close(j.doneCh)
	defer func() {
		j.mu.Lock()
		j.stopped = true
		left := j.queue
		j.queue = nil
		j.pending.Store(0)
		j.mu.Unlock()
		j.abandon(left)
	}()
	backoff := time.Duration(0)
	var buf []store.Change
	lastCommit := time.Now()
	for {
		j.mu.Lock()
		n := len(j.queue)
		flushNow := j.flushNow
		if n == 0 {
			j.flushNow = false
			for _, ch := range j.flushing {
				close(ch)
			}
			j.flushing = nil
		}
		j.mu.Unlock()

		if n == 0 {
			if j.down.Load() != nil {
				// Nothing to retry: probe the store so that submits may come back.
				if !j.sleep(backoff) {
					return
				}
				backoff = j.probe(backoff)
				continue
			}
			if !j.idle() {
				return
			}
			continue
		}
		if j.every > 0 && !flushNow && j.down.Load() == nil {
			if wait := j.every - time.Since(lastCommit); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-j.wake: // maybe a flush
					t.Stop()
					continue
				case <-j.stopCh:
					t.Stop()
					return
				}
			}
		}
		if j.every == 0 {
			if n := j.startable(); n > 0 {
				j.reserved = j.k.askStartBudget(n)
			}
		}
		batch := j.take()
		if j.reserved > 0 {
			batch = j.prestart(batch, j.reserved)
		}
		lastCommit = time.Now()
		buf = buf[:0]
		for i := range batch {
			buf = append(buf, batch[i].c)
		}
		if j.commit(batch, buf) {
			backoff = 0
			continue
		}
		backoff = nextBackoff(backoff)
		if own := j.k.dur.own; own != nil {
			backoff = min(backoff, own.HeartbeatEvery()) // a retry renews the lease
		}
		if !j.sleep(backoff) {
			return
		}
	}
}

// idle waits for changes to commit, renewing an owner's lease meanwhile. It returns
// false when the journal stops.
func (j *journal) idle() bool {
	own := j.k.dur.own
	if own == nil {
		select {
		case <-j.wake:
			return true
		case <-j.stopCh:
			return false
		}
	}
	t := time.NewTimer(own.HeartbeatEvery())
	defer t.Stop()
	select {
	case <-j.wake:
		return true
	case <-j.stopCh:
		return false
	case <-t.C:
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	_, err := own.Commit(ctx, nil, j.stopCh) // the lone heartbeat
	cancel()
	if err != nil && !errors.Is(err, store.ErrLeaseLost) && j.log != nil {
		j.log.warn("kernel: renew the lease on the store", "owner", own.Current().Name, "err", err)
	}
	return true
}

func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return journalBackoffMin
	}
	return min(2*d, journalBackoffMax)
}

// storeCall runs a call to the store on a goroutine of its own (callGuarded) and
// waits for it, turning a panic or a runtime.Goexit into an error: a Store is the
// user's code, and the kernel's goroutines must not die with it.
func storeCall[T any](k *Kernel, op string, f func() (T, error)) (v T, err error) {
	r, ok := callGuarded(k, func() { v, err = f() })
	switch {
	case ok:
		return v, err
	case r != nil:
		return v, fmt.Errorf("kernel: Store.%s panicked: %v", op, r)
	default:
		return v, fmt.Errorf("kernel: Store.%s called runtime.Goexit", op)
	}
}

// probe checks whether a down store answers again and returns the next backoff.
func (j *journal) probe(backoff time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	_, err := storeCall(j.k, "Get", func() (store.StoredTask, error) { return j.store.Get(ctx, "ax-probe") })
	cancel()
	if err == nil || errors.Is(err, store.ErrUnknownTask) {
		j.down.Store(nil)
		if j.log != nil {
			j.log.info("kernel: the store answers again; durable submits resume")
		}
		return 0
	}
	return nextBackoff(backoff)
}

// take removes the next batch from the queue: up to maxBatch changes, never
// splitting the inserts of one submit.
func (j *journal) take() []jentry {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := min(len(j.queue), j.maxBatch)
	for n < len(j.queue) && j.queue[n].ack != nil && j.queue[n].ack == j.queue[n-1].ack {
		n++
	}
	batch := make([]jentry, n)
	copy(batch, j.queue)
	rest := copy(j.queue, j.queue[n:])
	clear(j.queue[rest:])
	j.queue = j.queue[:rest]
	j.pending.Store(int64(rest))
	j.roomLocked()
	return batch
}

// startable counts the inserts of the next batch that could start in its commit:
// acknowledged inserts of tasks due now that run here (not in the pool).
func (j *journal) startable() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for i := range min(len(j.queue), j.maxBatch) {
		if startable(&j.queue[i]) {
			n++
		}
	}
	return n
}

func startable(e *jentry) bool {
	return e.ack != nil && e.c.Op == store.OpInsert && !e.c.Pool && e.c.Task.State == Queued && e.c.Task.Group == "" && e.h != nil && !e.h.due
}

// prestart returns batch with an OpStart behind each of its first n startable
// inserts (prestart.go).
func (j *journal) prestart(batch []jentry, n int) []jentry {
	out := make([]jentry, 0, len(batch)+n)
	now := j.k.clk.Now()
	for i := range batch {
		e := &batch[i]
		out = append(out, *e)
		if n > 0 && startable(e) {
			n--
			out = append(out, jentry{h: e.h, pre: true, c: store.Change{Op: store.OpStart, Fence: e.c.Task.Fence, Task: store.StoredTask{
				ID: e.c.Task.ID, Attempt: 1, Fence: e.c.Task.Fence + 1, UpdatedAt: now,
			}}})
		}
	}
	return out
}

// unreserve gives the loop back the slots reserved for the commit, with the
// tasks it started.
func (j *journal) unreserve(started []*Handle) {
	if j.reserved == 0 {
		return
	}
	j.prestarted.Add(len(started))
	j.k.handPrestarted(&prestartMsg{hs: started, reserved: j.reserved})
	j.reserved = 0
}

// commit writes one batch and settles what waits for it. It reports false when the
// store could not be reached: the batch's acknowledged inserts are then refused
// (their submits fail, and a cancel that undoes each, should it have landed, goes
// first in the next commit); its other changes go back to the front of the queue.
func (j *journal) commit(batch []jentry, changes []store.Change) bool {
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	var (
		results []error
		err     error
	)
	if own := j.k.dur.own; own != nil {
		results, err = own.Commit(ctx, changes, j.stopCh)
	} else {
		results, err = storeCall(j.k, "Commit", func() ([]error, error) { return j.store.Commit(ctx, changes) })
	}
	cancel()
	if err == nil && len(results) != len(changes) {
		err = fmt.Errorf("kernel: Store.Commit returned %d results for %d changes", len(results), len(changes))
	}
	if errors.Is(err, store.ErrLeaseLost) {
		// Nothing of the batch applied, and the owner joined again (durable.Owner.Commit):
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
		j.unreserve(nil)
		j.mu.Lock()
		j.queue = append(keep, j.queue...)
		j.pending.Store(int64(len(j.queue)))
		j.mu.Unlock()
		settleGroups(batch)
		return true
	}
	if err != nil {
		j.commitErrors.Inc()
		if !errors.Is(err, store.ErrStoreUnavailable) {
			err = fmt.Errorf("%w: %w", store.ErrStoreUnavailable, err)
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
			keep = append(keep, jentry{comp: true, c: store.Change{Op: store.OpCancel, Fence: fence, Task: store.StoredTask{
				ID: e.c.Task.ID, UpdatedAt: now, LastError: "kernel: its submit was refused: the store did not answer",
			}}})
			e.ack.all = fmt.Errorf("kernel: durable submit: %w", err)
			j.refuse(e)
		}
		j.mu.Lock()
		j.queue = append(keep, j.queue...)
		j.pending.Store(int64(len(j.queue)))
		j.mu.Unlock()
		j.unreserve(nil)
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
	j.unreserve(prestarted)
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

// journalStart records the start of a durable attempt. Loop only.
func (k *Kernel) journalStart(h *Handle, a *attempt) {
	d := h.dur
	next := d.fence + 1
	k.ls.jbuf = append(k.ls.jbuf, jentry{c: store.Change{Op: store.OpStart, Fence: d.fence, Task: store.StoredTask{ID: h.id, Attempt: int(a.n), Fence: next, UpdatedAt: k.ls.now}}})
	d.fence = next
}

// journalRetry records a failed attempt that will be tried again at at. Loop only.
func (k *Kernel) journalRetry(h *Handle, at time.Time, err error) {
	k.ls.jbuf = append(k.ls.jbuf, jentry{c: store.Change{Op: store.OpRetry, Fence: h.dur.fence, Task: store.StoredTask{ID: h.id, RunAt: at, LastError: errText(err), UpdatedAt: k.ls.now}}})
}

// journalEnd records the end of a durable task, unless the end belongs to this
// process only (Shutdown abandoned it, Close cancelled it, the process stops between
// attempts): its row then stays live, for the next kernel on the store. Loop only.
func (k *Kernel) journalEnd(h *Handle, to State, err error) {
	d := h.dur
	defer k.dur.dropKey(d.unique)
	if d.keepLive || to == Abandoned || (to == Canceled && errors.Is(err, ErrClosed)) {
		return
	}
	c := store.Change{Fence: d.fence, Task: store.StoredTask{ID: h.id, UpdatedAt: k.ls.now}}
	switch to {
	case Succeeded:
		c.Op = store.OpSucceed
	case Canceled:
		c.Op = store.OpCancel
		c.Task.LastError = errText(err)
	default: // Failed, TimedOut, Evicted
		c.Op = store.OpFail
		c.Task.State = to
		c.Task.LastError = errText(err)
	}
	k.ls.jbuf = append(k.ls.jbuf, jentry{c: c})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
