package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/store"
	"github.com/benbjohnson/clock"
)

// The journal's retry and probe delays while the store is down.
const (
	journalBackoffMin = 20 * time.Millisecond
	journalBackoffMax = time.Second
)

// gatherMax bounds the wait of an acknowledged-mode commit for the ends of the tasks
// the commit before it started, and gatherMin is the fewest starts of that commit for
// which it waits (see Journal.gather): a cycle of a few tasks gains little from one
// commit fewer.
const (
	gatherMax = time.Millisecond
	gatherMin = 16
)

// Entry is one change waiting for a group commit. H is the kernel's task record
// and A its attempt record; the journal never looks into them, it hands them back
// to the loop ([JournalLoop]).
type Entry[H, A comparable] struct {
	C   store.Change
	H   H    // an insert: the task, handed to the loop once stored (acknowledged mode)
	Ack *Ack // an acknowledged insert: the submit waiting for it
	Idx int  // the task's index in that submit
	// Start: an OpStart whose attempt waits for it to be stored (acknowledged mode);
	// the journal hands it back to the loop once committed.
	Start A
	// Due marks an insert of a task with a due time: it never starts in the commit
	// that stores it.
	Due bool
	// Adopt marks the OpStart (with Change.Adopt) of a pool task H this kernel
	// follows: the journal hands H back to the loop once committed, started or
	// refused (JournalLoop.Adopted).
	Adopt bool
	comp  bool // a cancel that undoes an insert whose submit was told it failed
	// pre: the OpStart the journal added behind the insert before it (H's), in the
	// same commit.
	pre bool
}

// Ack is one acknowledged durable submit waiting for its commit. The journal
// writes Errs and All, then closes the channel Done returns.
type Ack struct {
	Errs []error // per task of the submit
	All  error   // an error for the whole submit: the commit failed
	left int     // entries not settled yet; journal-owned
	done chan struct{}
}

// NewAck returns the Ack of a submit of n entries whose per-task errors go to errs.
func NewAck(errs []error, n int) *Ack {
	return &Ack{Errs: errs, left: n, done: make(chan struct{})}
}

// Done returns a channel closed once every entry of the submit is settled.
func (g *Ack) Done() <-chan struct{} { return g.done }

// JournalLoop is the loop as the journal sees it: [Loop] (the owner's goroutines)
// and the journal's batches. Its methods are called from the journal's goroutine,
// or from a submitter's once the journal stopped, one call per commit (Refuse per
// refused insert).
type JournalLoop[H, A comparable] interface {
	Loop
	// StartBudget asks the loop for up to want free slots for starts in the next
	// commit; the loop reserves them until Prestarted. It returns 0 when the loop
	// is gone.
	StartBudget(want int) int
	// Prestarted hands the loop the tasks whose insert and start one commit
	// stored, and frees the reservation of StartBudget.
	Prestarted(hs []H, reserved int)
	// Stored hands the loop the tasks whose inserts were stored (acknowledged mode).
	Stored(hs []H)
	// Started hands the loop the attempts whose starts were stored, and those whose
	// starts the store refused, with why.
	Started(started, refused []A, errs []error)
	// Refuse gives back what an acknowledged insert whose submit fails holds.
	Refuse(h H)
	// Orphan hands over, after Refuse, a pool task whose submit failed with its
	// outcome unknown: it may be stored, and runs on h should this kernel claim it.
	Orphan(h H)
	// Adopted hands the loop the pool tasks whose adopting starts (Entry.Adopt) a
	// commit stored, and those whose adopts the store refused: another owner took
	// them first.
	Adopted(started, refused []H)
}

// JournalConfig is what [NewJournal] needs. Every field but Owner and Log must be
// set.
type JournalConfig[H, A comparable] struct {
	Store     store.Store
	Owner     *Owner        // nil unless Store is a SharedStore: commits go through Owner.Commit
	Every     time.Duration // periodic snapshot mode: commit this often; 0: acknowledged mode
	MaxBatch  int           // the most changes one commit carries (the inserts of one submit are never split)
	Timeout   time.Duration // the bound of each store call
	Clock     clock.Clock   // the kernel's clock, for the changes' times
	Log       Logger
	GuardFunc func(f func()) (recovered any, normal bool)
	Loop      JournalLoop[H, A]
	// ErrClosed is the error of submits the journal will not commit (it stopped).
	ErrClosed error
}

// Journal is the goroutine that writes the durable tasks' lifecycle to the store in
// group commits, one commit at a time and in order: whatever queued up while a commit
// was in flight goes in the next one. In periodic snapshot mode it commits every
// Every instead. Its delays run on the real clock: they are about the database, not
// about task times. Its methods are safe for concurrent use.
type Journal[H, A comparable] struct {
	loop      JournalLoop[H, A] // immutable
	store     store.Store       // immutable
	own       *Owner            // immutable
	every     time.Duration
	maxBatch  int
	timeout   time.Duration
	clk       clock.Clock
	log       Logger // nil without a logger
	guard     func(func()) (any, bool)
	errClosed error

	mu       sync.Mutex
	queue    []Entry[H, A]   // guarded by mu
	flushing []chan struct{} // guarded by mu: closed once the queue is empty and committed
	flushNow bool            // guarded by mu: commit without waiting for the snapshot tick
	stopped  bool            // guarded by mu: the journal goroutine returned
	room     chan struct{}   // guarded by mu: closed (and replaced) when the queue shrinks below limit
	calls    []func()        // guarded by mu: store calls to make between two commits (InStream)
	limit    int             // periodic snapshot mode: submits wait while this many changes wait
	wake     chan struct{}   // size 1
	stopCh   chan struct{}
	doneCh   chan struct{}
	stopOnce sync.Once

	// The insert stream (journal_inserts.go): nil ins without one.
	ins       store.InsertStore // immutable
	insWake   chan struct{}     // size 1
	insDone   chan struct{}     // closed when its goroutine returned
	insBusy   bool              // guarded by mu: it has a batch in flight
	insPaused uint64            // guarded by mu: the epoch whose lease InsertAs found ended

	down    atomic.Pointer[error] // the last error while the store is known to be down
	pending atomic.Int64
	// reserved: the slots the loop reserved for the prestarts of the commit being
	// made; journal goroutine only.
	reserved int
	// lastStarted: the tasks the last commit started (prestarts, starts, adopts);
	// journal goroutine only.
	lastStarted int
	// beatAt: when the lone heartbeat is due: HeartbeatEvery after the last commit
	// that renewed the lease, or after the last heartbeat tried; journal goroutine
	// only.
	beatAt time.Time

	commits, changes, commitErrors, refused, prestarted *metrics.Counter
	adopted, adoptRefused                               atomic.Uint64
}

// JournalCounts are a Journal's counters, read by the kernel's Stats and metrics.
type JournalCounts struct {
	Commits, Changes, CommitErrors, Refused, Prestarted uint64
	Adopted, AdoptRefused                               uint64 // adopting starts stored, refused (Entry.Adopt)
	Pending                                             int64  // changes waiting
	Down                                                bool   // the store is known to be down
}

// NewJournal starts a journal. Stop it with [Journal.Stop].
func NewJournal[H, A comparable](c JournalConfig[H, A]) *Journal[H, A] {
	j := &Journal[H, A]{
		loop: c.Loop, store: c.Store, own: c.Owner, every: c.Every, maxBatch: c.MaxBatch, timeout: c.Timeout,
		clk: c.Clock, log: c.Log, guard: c.GuardFunc, errClosed: c.ErrClosed,
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), doneCh: make(chan struct{}),
		room: make(chan struct{}), limit: 4 * c.MaxBatch,
	}
	j.commits = new(metrics.Counter)
	j.changes = new(metrics.Counter)
	j.commitErrors = new(metrics.Counter)
	j.refused = new(metrics.Counter)
	j.prestarted = new(metrics.Counter)
	if c.Owner != nil {
		j.beatAt = j.clk.Now().Add(c.Owner.HeartbeatEvery()) // Join renewed the lease
		c.Owner.setStream(j.InStream)
		if is, ok := c.Owner.Store().(store.InsertStore); ok && c.Every == 0 {
			j.ins, j.insWake, j.insDone = is, make(chan struct{}, 1), make(chan struct{})
			go j.runInserts()
		}
	}
	go j.run()
	return j
}

// InStream runs f on the journal's goroutine between two commits, and waits for
// it: a store call made there never waits for the lock of the owner row that a
// commit of this journal holds (each commit renews the lease), nor makes a commit
// wait for its own. It reports false, f not run (nor ever to be), once the journal
// stopped or stop is closed before f began.
func (j *Journal[H, A]) InStream(f func(), stop <-chan struct{}) bool {
	done := make(chan struct{})
	var state atomic.Int32 // 0 queued, 1 running, 2 given up
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		return false
	}
	j.calls = append(j.calls, func() {
		if state.CompareAndSwap(0, 1) {
			f()
			close(done)
		}
	})
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	select {
	case <-done:
		return true
	case <-j.doneCh:
	case <-stop:
	}
	if state.CompareAndSwap(0, 2) {
		return false
	}
	<-done // it began: wait for it
	return true
}

// runCalls makes the store calls queued by InStream.
func (j *Journal[H, A]) runCalls() {
	j.mu.Lock()
	calls := j.calls
	j.calls = nil
	j.mu.Unlock()
	for _, f := range calls {
		f()
	}
}

// Every returns the snapshot period: 0 in acknowledged mode.
func (j *Journal[H, A]) Every() time.Duration { return j.every }

// Store returns the journal's store.
func (j *Journal[H, A]) Store() store.Store { return j.store }

// Pending returns the number of changes waiting for a commit.
func (j *Journal[H, A]) Pending() int64 { return j.pending.Load() }

// Counts returns the journal's counters.
func (j *Journal[H, A]) Counts() JournalCounts {
	return JournalCounts{
		Commits: j.commits.Get(), Changes: j.changes.Get(), CommitErrors: j.commitErrors.Get(),
		Refused: j.refused.Get(), Prestarted: j.prestarted.Get(), Adopted: j.adopted.Load(), AdoptRefused: j.adoptRefused.Load(), Pending: j.pending.Load(), Down: j.down.Load() != nil,
	}
}

// Add queues changes, in order, after everything queued before. Once the journal
// stopped, it refuses the acknowledged inserts among them and drops the rest.
func (j *Journal[H, A]) Add(es []Entry[H, A]) {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		j.abandon(es)
		return
	}
	j.queue = append(j.queue, es...)
	j.pending.Store(int64(len(j.queue)))
	j.mu.Unlock()
	j.wakeInserts()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// AvailableErr returns an error wrapping ErrStoreUnavailable while the store is
// known to be down, so that durable submits fail fast. It names the last error but
// does not wrap it, which may be an outcome the store could not learn: nothing of
// the refused submit is stored.
func (j *Journal[H, A]) AvailableErr() error {
	if p := j.down.Load(); p != nil {
		return fmt.Errorf("kernel: durable submit refused while the store is down: %w (last error: %s)", store.ErrStoreUnavailable, (*p).Error())
	}
	return nil
}

// WaitRoom blocks a periodic-snapshot submit while the journal's queue holds limit
// changes or more, so that a store slower than the submitters bounds their pace
// instead of the kernel's memory. It returns ctx.Err() or ErrClosed if those come
// first.
func (j *Journal[H, A]) WaitRoom(ctx context.Context) error {
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
			return j.errClosed
		}
	}
}

// roomLocked wakes the submits waiting for room once the queue is below limit.
// Called with mu held.
func (j *Journal[H, A]) roomLocked() {
	if len(j.queue) < j.limit {
		close(j.room)
		j.room = make(chan struct{})
	}
}

// Flush waits until everything queued so far is committed, or ctx ends. It returns
// ErrClosed once the journal stopped.
func (j *Journal[H, A]) Flush(ctx context.Context) error {
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
		return j.errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop ends the journal goroutine and waits for it; what was not committed stays
// uncommitted. Idempotent.
func (j *Journal[H, A]) Stop() {
	j.stopOnce.Do(func() { close(j.stopCh) })
	<-j.doneCh
}

// abandon settles the acknowledged inserts of entries that will never be committed:
// their submits fail with ErrClosed. The other changes are lost to the store, which
// keeps those tasks' earlier states.
func (j *Journal[H, A]) abandon(es []Entry[H, A]) {
	for _, e := range es {
		if e.Ack != nil {
			e.Ack.All = fmt.Errorf("kernel: durable submit: the kernel closed before the task was stored: %w", j.errClosed)
			j.loop.Refuse(e.H)
		}
	}
	settleGroups(es)
}

func (j *Journal[H, A]) run() {
	defer close(j.doneCh)
	defer func() {
		if j.ins != nil {
			<-j.insDone // it stops with stopCh, after its commit in flight
		}
		j.mu.Lock()
		j.stopped = true
		left := j.queue
		j.queue, j.calls = nil, nil
		j.pending.Store(0)
		j.mu.Unlock()
		j.abandon(left)
	}()
	backoff := time.Duration(0)
	var buf []store.Change
	lastCommit := j.clk.Now()
	for {
		j.runCalls()
		j.mu.Lock()
		n := j.forMainLocked()
		flushNow := j.flushNow
		if len(j.queue) == 0 && !j.insBusy {
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
			if wait := j.every - j.clk.Since(lastCommit); wait > 0 {
				t := j.clk.Timer(wait)
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
			if j.lastStarted >= gatherMin && !flushNow && j.down.Load() == nil && !j.gather(j.lastStarted) {
				return
			}
			if n := j.startable(); n > 0 {
				j.reserved = j.loop.StartBudget(n)
			}
		}
		batch := j.take()
		if len(batch) == 0 { // the insert stream took or takes them all
			j.unreserve(nil)
			continue
		}
		if j.reserved > 0 {
			batch = j.prestart(batch, j.reserved)
		}
		lastCommit = j.clk.Now()
		buf = buf[:0]
		for i := range batch {
			buf = append(buf, batch[i].C)
		}
		if j.commit(batch, buf) {
			backoff = 0
			continue
		}
		backoff = nextBackoff(backoff)
		if j.own != nil {
			backoff = min(backoff, j.own.HeartbeatEvery()) // a retry renews the lease
		}
		if !j.sleep(backoff) {
			return
		}
	}
}

// idle waits for changes to commit, renewing an owner's lease meanwhile. It returns
// false when the journal stops.
func (j *Journal[H, A]) idle() bool {
	own := j.own
	if own == nil {
		select {
		case <-j.wake:
			return true
		case <-j.stopCh:
			return false
		}
	}
	// The heartbeat is due HeartbeatEvery after the last renewal (or try), however
	// often the journal wakes meanwhile (a claim in its stream wakes it).
	if wait := j.clk.Until(j.beatAt); wait > 0 {
		t := j.clk.Timer(wait)
		defer t.Stop()
		select {
		case <-j.wake:
			return true
		case <-j.stopCh:
			return false
		case <-t.C:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	j.beatAt = j.clk.Now().Add(own.HeartbeatEvery())
	_, err := own.Commit(ctx, nil, j.stopCh) // the lone heartbeat
	cancel()
	if err != nil && !errors.Is(err, store.ErrLeaseLost) && j.log != nil {
		j.log.Log(slog.LevelWarn, "kernel: renew the lease on the store", "owner", own.Current().Name, "err", err)
	}
	return true
}

func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return journalBackoffMin
	}
	return min(2*d, journalBackoffMax)
}

// probe checks whether a down store answers again and returns the next backoff.
func (j *Journal[H, A]) probe(backoff time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
	_, err := call(j.guard, "Get", func() (store.StoredTask, error) { return j.store.Get(ctx, "ax-probe") })
	cancel()
	if err == nil || errors.Is(err, store.ErrUnknownTask) {
		j.down.Store(nil)
		if j.log != nil {
			j.log.Log(slog.LevelInfo, "kernel: the store answers again; durable submits resume")
		}
		return 0
	}
	return nextBackoff(backoff)
}

// EndChange returns the change that ends task id at fence in state to (Succeeded,
// Canceled, or a dead letter's), with its error text msg, at now, the result of its
// last attempt (kept for Succeeded and Failed) and that attempt's record.
func EndChange(id string, fence uint64, to store.State, msg string, now time.Time, result []byte, rec store.Attempt) store.Change {
	c := store.Change{Fence: fence, Attempt: rec, Task: store.StoredTask{ID: id, UpdatedAt: now}}
	switch to {
	case store.Succeeded:
		c.Op, c.Task.Result = store.OpSucceed, result
	case store.Canceled:
		c.Op, c.Task.LastError = store.OpCancel, msg
	default: // Failed, TimedOut, Evicted
		c.Op, c.Task.State, c.Task.LastError = store.OpFail, to, msg
		if to == store.Failed {
			c.Task.Result = result
		}
	}
	return c
}

// ErrText returns err's message, "" for nil.
func ErrText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
