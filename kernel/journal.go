package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// The journal's retry and probe delays while the store is down.
const (
	journalBackoffMin = 20 * time.Millisecond
	journalBackoffMax = time.Second
)

// journalInFlight is how many commits the journal keeps in flight at once in
// acknowledged mode: one commit's log flush and round trips overlap the next one's
// statements. Periodic snapshot mode commits one batch at a time.
const journalInFlight = 2

// jentry is one change waiting for a group commit.
type jentry struct {
	c    Change
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
// group commits: whatever queued up while commits were in flight goes in the next one.
// In acknowledged mode up to journalInFlight commits are in flight at once, each a
// Store call on a goroutine of its own; each task's changes still reach the store in
// order, and the changes of different tasks overtake each other only where no outcome
// depends on their order (see take). In periodic snapshot mode it commits one batch
// every Config.SnapshotEvery instead. Its delays run on the real clock: they are about
// the database, not about task times.
type journal struct {
	k        *Kernel
	store    Store
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

	down atomic.Pointer[error] // the last error while the store is known to be down
	// pending counts the changes not committed yet: queued, or in a commit in flight
	// (inflight of them). Stored with mu held.
	pending  atomic.Int64
	inflight int // guarded by mu

	// busy counts the changes of each task in the commits in flight; keyed: a commit
	// in flight holds an insert with a unique key; unstarted counts the inserts of the
	// commits in flight that could have started in their commit but got no slot (they
	// will queue). Journal goroutine only.
	busy      map[string]int
	keyed     bool
	unstarted int

	commits, changes, commitErrors, refused, prestarted *metrics.Counter
}

func newJournal(k *Kernel, c *Config) *journal {
	j := &journal{
		k: k, store: c.Store, every: c.SnapshotEvery, maxBatch: c.StoreBatch, timeout: c.StoreTimeout, log: k.log,
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), doneCh: make(chan struct{}),
		room: make(chan struct{}), limit: 4 * c.StoreBatch, busy: make(map[string]int),
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
	j.setPendingLocked()
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// setPendingLocked updates pending. Called with mu held.
func (j *journal) setPendingLocked() { j.pending.Store(int64(len(j.queue) + j.inflight)) }

// availableErr returns an error wrapping ErrStoreUnavailable while the store is
// known to be down, so that durable submits fail fast.
func (j *journal) availableErr() error {
	if p := j.down.Load(); p != nil {
		return fmt.Errorf("kernel: durable submit refused while the store is down: %w (last error: %w)", ErrStoreUnavailable, *p)
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
		j.setPendingLocked()
		j.mu.Unlock()
		j.abandon(left)
	}()
	inFlight := 1
	if j.every == 0 {
		inFlight = journalInFlight
	}
	// Sized for every commit in flight, so that a commit's goroutine never waits to
	// hand back its answer.
	done := make(chan *jcommit, inFlight)
	running := 0
	defer func() {
		// Let the commits in flight end, and settle them, before the rest is abandoned.
		for ; running > 0; running-- {
			j.finish(<-done)
		}
	}()
	backoff := time.Duration(0)
	var retryAt time.Time // no commit starts before it (a backoff after a failure)
	lastCommit := time.Now()
	for {
		j.mu.Lock()
		n := len(j.queue)
		flushNow := j.flushNow
		if n == 0 && running == 0 {
			j.flushNow = false
			for _, ch := range j.flushing {
				close(ch)
			}
			j.flushing = nil
		}
		j.mu.Unlock()

		if n == 0 && running == 0 {
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
		wait := time.Duration(0) // > 0: the next commit waits that long
		if n > 0 && running < inFlight {
			wait = time.Until(retryAt)
			if j.every > 0 && !flushNow && j.down.Load() == nil {
				wait = max(wait, j.every-time.Since(lastCommit))
			}
			if wait <= 0 {
				if batch := j.take(running > 0); len(batch) > 0 {
					lastCommit = time.Now()
					j.launch(batch, done)
					running++
					continue
				}
				// The head of the queue waits for a commit in flight.
			}
		}
		var (
			t     *time.Timer
			timer <-chan time.Time
		)
		if wait > 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case c := <-done:
			running--
			if j.finish(c) {
				backoff, retryAt = 0, time.Time{}
				break
			}
			backoff = nextBackoff(backoff)
			if own := j.k.dur.own; own != nil {
				backoff = min(backoff, own.heartbeatEvery()) // a retry renews the lease
			}
			retryAt = time.Now().Add(backoff)
		case <-j.wake: // changes queued, or a flush
		case <-timer:
		case <-j.stopCh:
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
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
	t := time.NewTimer(own.heartbeatEvery())
	defer t.Stop()
	select {
	case <-j.wake:
		return true
	case <-j.stopCh:
		return false
	case <-t.C:
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	_, err := own.commit(ctx, nil) // the lone heartbeat
	cancel()
	if err != nil && !errors.Is(err, ErrLeaseLost) && j.log != nil {
		j.log.warn("kernel: renew the lease on the store", "owner", own.name, "err", err)
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
	_, err := storeCall(j.k, "Get", func() (StoredTask, error) { return j.store.Get(ctx, "ax-probe") })
	cancel()
	if err == nil || errors.Is(err, ErrUnknownTask) {
		j.down.Store(nil)
		if j.log != nil {
			j.log.info("kernel: the store answers again; durable submits resume")
		}
		return 0
	}
	return nextBackoff(backoff)
}

// take removes the next batch from the queue: up to maxBatch changes, never
// splitting the inserts of one submit. While other commits are in flight (overlap),
// nothing is taken while one of them holds an insert with a unique key, and the batch
// ends before the first change that must not overtake them: a change of a task with a
// change in flight (a task's changes apply in order), and an insert with a unique key
// (an end in flight may free its key, and the outcome would depend on which commit
// lands first). The batch may then be empty.
func (j *journal) take(overlap bool) []jentry {
	if overlap && j.keyed {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	n := min(len(j.queue), j.maxBatch)
	cut := false
	if overlap {
		for i := range n {
			c := &j.queue[i].c
			if j.busy[c.Task.ID] > 0 || c.Op == OpInsert && c.Task.UniqueKey != "" {
				n, cut = i, true
				break
			}
		}
	}
	if cut {
		for n > 0 && j.queue[n].ack != nil && j.queue[n].ack == j.queue[n-1].ack {
			n--
		}
	} else {
		for n < len(j.queue) && j.queue[n].ack != nil && j.queue[n].ack == j.queue[n-1].ack {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	batch := make([]jentry, n)
	copy(batch, j.queue)
	rest := copy(j.queue, j.queue[n:])
	clear(j.queue[rest:])
	j.queue = j.queue[:rest]
	j.setPendingLocked()
	j.roomLocked()
	return batch
}

// startable reports whether e is an insert that could start in its commit: an
// acknowledged insert of a task due now that runs here (not in the pool).
func startable(e *jentry) bool {
	return e.ack != nil && e.c.Op == OpInsert && !e.c.Pool && e.c.Task.State == Queued && e.c.Task.Group == "" && e.h != nil && !e.h.due
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
			out = append(out, jentry{h: e.h, pre: true, c: Change{Op: OpStart, Fence: e.c.Task.Fence, Task: StoredTask{
				ID: e.c.Task.ID, Attempt: 1, Fence: e.c.Task.Fence + 1, UpdatedAt: now,
			}}})
		}
	}
	return out
}

// unreserve gives the loop back the slots reserved for commit c, with the tasks it
// started.
func (j *journal) unreserve(c *jcommit, started []*Handle) {
	if c.reserved == 0 {
		return
	}
	j.prestarted.Add(len(started))
	j.k.handPrestarted(&prestartMsg{hs: started, reserved: c.reserved})
	c.reserved = 0
}

// journalStart records the start of a durable attempt. Loop only.
func (k *Kernel) journalStart(h *Handle, a *attempt) {
	d := h.dur
	next := d.fence + 1
	k.ls.jbuf = append(k.ls.jbuf, jentry{c: Change{Op: OpStart, Fence: d.fence, Task: StoredTask{ID: h.id, Attempt: int(a.n), Fence: next, UpdatedAt: k.ls.now}}})
	d.fence = next
}

// journalRetry records a failed attempt that will be tried again at at. Loop only.
func (k *Kernel) journalRetry(h *Handle, at time.Time, err error) {
	k.ls.jbuf = append(k.ls.jbuf, jentry{c: Change{Op: OpRetry, Fence: h.dur.fence, Task: StoredTask{ID: h.id, RunAt: at, LastError: errText(err), UpdatedAt: k.ls.now}}})
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
	c := Change{Fence: d.fence, Task: StoredTask{ID: h.id, UpdatedAt: k.ls.now}}
	switch to {
	case Succeeded:
		c.Op = OpSucceed
	case Canceled:
		c.Op = OpCancel
		c.Task.LastError = errText(err)
	default: // Failed, TimedOut, Evicted
		c.Op = OpFail
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
