package kernel

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/timewheel"
)

// Handle follows one submitted task. Its methods are safe for concurrent use. A
// Handle stays valid after the task ended; holding it keeps the task's record alive.
type Handle struct {
	// The first cache line holds what the loop reads and writes as it moves a task
	// from the intake through its bucket to the run queue, so that it touches one
	// line of each task record it handles (the rest was written on another core).
	// The record is 384 bytes, six whole lines: neighbours share none.
	bucket   queue.Level   // immutable: the bucket of prio
	prio     Priority      // immutable; normalized: never PriorityDefault
	due      bool          // immutable: Delay or At was set
	pooled   bool          // immutable: fire-and-forget, recycled once it ended normally
	evicts   bool          // a High task holding the ticket of the Low task it evicted, until a retry; loop-owned once submitted
	placed   bool          // loop-owned: the loop took it in (first state set)
	ended    bool          // guarded by mu: finish ran
	feat     feature       // immutable: what the task carries beyond a plain task (see feature)
	state    atomic.Uint32 // State; written by the loop, and by an executor that settles a success
	attempts atomic.Int32  // attempts started; written by the loop only
	cur      *attempt      // loop-owned: the current (or next, while Retrying) attempt
	batch    *Batch        // immutable
	dur      *durTask      // immutable: a durable task: what the store needs
	timeout  time.Duration // immutable; 0: none
	queuedAt int64         // loop-owned; mono: when it entered its bucket (aging)
	dueAt    int64         // mono; meaningful when due; set when built, brought forward by RunNow (loop) before the loop places it

	// Immutable after submission.
	k        *Kernel
	run      func(context.Context) error
	submitAt int64        // mono
	retry    *RetryPolicy // Task.Retry resolved; nil: the priority's policy in force (Config.Retry)
	ext      *taskExt     // OnTimeout and the group, for the few tasks that have them; nil otherwise
	seq      uint64
	idx      int    // member index, for a Map batch (run is nil then)
	id       string // "" until ID() makes one from seq

	first attempt // the first attempt, embedded to save an allocation

	cancelErr error // loop-owned: why a running task was cancelled

	// Guarded by mu.
	mu   sync.Mutex
	done chan struct{} // made on first use
	err  error         // the task's final error

	_ [56]byte // the record is whole cache lines
}

// handlePool recycles the records of fire-and-forget tasks (TryGo, Go).
var handlePool = sync.Pool{New: func() any { return new(Handle) }}

// recycle returns a fire-and-forget task's record to the pool once it ended on
// its first attempt through the normal path, before that attempt started: no
// executor, wheel entry or list refers to it any more. A record whose attempt
// started is left to the garbage collector like the others, because the task's
// function may have kept its context (&h.first.ctx), and a context must stay
// valid after the call it was passed to returns. Loop only.
func recycle(h *Handle, a *attempt) {
	if !h.pooled || a != &h.first || a.started {
		return
	}
	*h = Handle{}
	handlePool.Put(h)
}

// ticket returns the level of the admission ticket h holds while it waits: its
// bucket's, or Low's for a High task that evicted a Low one (Config.EvictLow).
func (h *Handle) ticket() queue.Level {
	if h.evicts {
		return queue.Low
	}
	return h.bucket
}

// ID returns the task's ID: Task.ID, or one the kernel made.
func (h *Handle) ID() string {
	if h.id != "" {
		return h.id
	}
	return "ax-" + strconv.Itoa(int(h.seq))
}

// State returns the task's current state.
func (h *Handle) State() State { return State(h.state.Load()) }

// Attempts returns the number of attempts started so far.
func (h *Handle) Attempts() int { return int(h.attempts.Load()) }

// Result returns what the attempt that ended the task left with [SetResult],
// once the task ended Succeeded or Failed; nil before, for other ends, and when
// it left none. The caller must not modify it. Safe for concurrent use.
func (h *Handle) Result() []byte {
	if s := h.State(); (s != Succeeded && s != Failed) || !isDone(h.Done()) {
		return nil
	}
	return h.cur.ctx.Get()
}

// Priority returns the task's priority (never PriorityDefault).
func (h *Handle) Priority() Priority { return h.prio }

// Done returns a channel closed when the task reaches its terminal state.
func (h *Handle) Done() <-chan struct{} {
	h.mu.Lock()
	if h.done == nil {
		h.done = make(chan struct{})
		if h.ended {
			close(h.done)
		}
	}
	d := h.done
	h.mu.Unlock()
	return d
}

// Err returns the task's final error: nil while it is not terminal and when it
// succeeded; otherwise the error of its last attempt, [ErrTimeout], [ErrCanceled],
// [ErrEvicted], [ErrAbandoned] or [ErrClosed] (wrapped; test with errors.Is).
func (h *Handle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Wait blocks until the task reaches its terminal state and returns [Handle.Err],
// or returns ctx.Err() if ctx ends first (the task goes on). A task that has
// ended gives its outcome even when ctx has ended too. A nil ctx never ends.
func (h *Handle) Wait(ctx context.Context) error {
	done := h.Done()
	if isDone(done) || ctx == nil {
		<-done
		return h.Err()
	}
	select {
	case <-done:
		return h.Err()
	case <-ctx.Done():
		if isDone(done) {
			return h.Err()
		}
		return ctx.Err()
	}
}

// Cancel asks the kernel to cancel the task and returns at once. A queued, delayed
// or retrying task is removed and ends Canceled with [ErrCanceled]; a running one has
// its context cancelled and ends Canceled unless its function still returns nil
// (then Succeeded). Cancel of a terminal task does nothing. Watch [Handle.Done].
func (h *Handle) Cancel() {
	if State(h.state.Load()).Terminal() {
		return
	}
	h.k.control(ctrlMsg{kind: ctrlCancel, h: h})
}

// finish records the terminal error and wakes waiters. Called by the loop once the
// state is stored.
func (h *Handle) finish(err error) {
	h.mu.Lock()
	h.err = err
	h.ended = true
	if h.done != nil {
		close(h.done)
	}
	h.mu.Unlock()
}

// timerKind says what a wheel entry of an attempt is for.
type timerKind uint8

const (
	timerNone    timerKind = iota
	timerDue               // a delayed task or a retry is due
	timerTimeout           // the running attempt's timeout
	timerGrace             // a zombie outlived ZombieGrace
)

// attempt is one run of a task's function.
type attempt struct {
	h   *Handle
	n   int32 // 1 for the first attempt
	ctx attemptCtx

	// Written by the executor under runq.mu (startAt) or before it hands the attempt
	// back under runq.mu (endAt, err); read by the loop after that.
	startAt int64 // mono
	endAt   int64 // mono
	err     error

	// Guarded by runq.mu.
	started  bool
	finished bool // the executor returned from Run
	detached bool // timed out and its slot given away: a zombie

	failClass uint8  // BreakerConfig.IsFailure's verdict on err; written by the executor before it hands the attempt back
	brGen     uint32 // loop-owned: the breaker generation that admitted it

	exec *executor // the executor running it (zombie stack dumps)

	// Loop-owned.
	timer      timewheel.Handle[timerEntry]
	timerAt    time.Time // when its wheel entry is due
	tkind      timerKind
	settled    bool    // the loop ended it (timeout, Close) before it returned
	durRunning bool    // counted in loopState.durRunning (durableEnded)
	permit     bool    // holds its group's permit (gate.go) until its function returns
	unstarted  bool    // its permit is under a rate and its function has not started (runq.rated); read by its executor under runq.mu
	brAdmitted bool    // its key's breaker admitted it (brGen)
	brReported bool    // its outcome went to the breaker
	budgetWait bool    // a durable retry the budget refused: it waits in the wheel for it (retryDue)
	zombie     *zombie // set while it is a zombie
}

// feature is something a task carries beyond a plain in-memory task. The record
// says once, when it is built (initHandle, joinGroup, newDurableHandle), which it
// carries; later stages ask it (Handle.has) rather than re-reading the fields the
// features use, which they read only once has said they are there.
type feature uint8

const (
	featNamed     feature = 1 << iota // a user's or a stored ID: indexed for Kernel.Cancel
	featGroup                         // of a group: the gate holds it before its bucket (ext.gd, ext.key, ext.ks)
	featDurable                       // journaled to the store (dur)
	featOnEnd                         // Task.OnEnd (ext.onEnd)
	featOnTimeout                     // Task.OnTimeout (ext.onTimeout)
	featBatch                         // a member of a Batch or a Map (batch)

	// featLoopEnd holds the features whose task must end on the loop: the index,
	// the gate's permit, the journal and the OnEnd queue are loop-owned. A task
	// with none of them may settle a success on its executor (settlesItself).
	featLoopEnd = featNamed | featGroup | featDurable | featOnEnd
)

// has reports whether h carries any of the features f.
func (h *Handle) has(f feature) bool { return h.feat&f != 0 }

// joinGroup makes h a task of group gd, key key: the gate holds it before its
// bucket. counted says its submitter counted it in the key's waiting tasks
// (MaxWaiting).
func (h *Handle) joinGroup(gd *groupDef, key string, counted bool) {
	if h.ext == nil {
		h.ext = &taskExt{}
	}
	h.ext.gd, h.ext.key, h.ext.counted = gd, key, counted
	h.feat |= featGroup
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// taskExt holds what few tasks need, off the task record: the OnTimeout and OnEnd
// callbacks and the task's group.
type taskExt struct {
	onTimeout func(int)          // immutable
	onEnd     func(State, error) // immutable
	gd        *groupDef          // immutable: the task's group as submitted; nil: none
	key       string             // immutable

	// Loop-owned once submitted.
	ks      *keyState // the key while the task is in the gate or holds a permit
	inGate  bool      // waiting in its key's queue
	counted bool      // counted in its key's waiting tasks (MaxWaiting); set by the submitter
	order   uint64    // when it came to its key's queue (gateState.seq)
}

// groupExt returns h's group ext, or nil for a task without a group.
func groupExt(h *Handle) *taskExt {
	if h.has(featGroup) {
		return h.ext
	}
	return nil
}

// durTask is what the record of a durable task carries besides the in-memory task.
type durTask struct {
	kind        string
	payload     []byte
	unique      string
	maxAttempts int
	timeout     time.Duration // as submitted (0: kernel default), for the store
	fence       uint64        // loop-owned: the fence the store holds for the task
	keepLive    bool          // loop-owned: the process stops; leave the row live
	inPool      bool          // waits in the store's pool (see pool.go); loop-owned once handed over
	// adopting: its adopting start is journaled and not answered yet; noAdopt: the
	// store refused it (another kernel took the task); cancel: a Cancel that came
	// meanwhile (see adopt.go). Loop-owned.
	adopting, noAdopt bool
	cancel            error
	// poolDue: counted in durables.poolDue, from its submit until it reaches the
	// loop (acceptPooled) or fails.
	poolDue bool
	headers map[string]string // Hooks.Headers at its submit; immutable
	lost    *store.Attempt    // loop-owned: the record of a recovered attempt a stop interrupted, for its next start
}

// lazyTask is the compact record of a delayed fire-and-forget task. Immutable.
type lazyTask struct {
	run      func(context.Context) error
	meta     uint64 // priority << lazyPrioShift | timeout in ns (0: none)
	submitAt int64  // mono
}

// timerEntry is the value of a wheel entry: the timer of an attempt (a delayed
// task with a full record, a retry backoff, a timeout, a zombie's grace), or a
// lazy task waiting to come due.
type timerEntry struct {
	a *attempt // nil for a lazy task
	t lazyTask
}

// qitem is what a bucket holds: a task record, or a light task (h nil).
type qitem struct {
	h *Handle
	l light
}

// queuedAt returns when the task entered its bucket (a light task: when it was
// submitted, which the loop takes in at once).
func (it *qitem) queuedAt() int64 {
	if it.h != nil {
		return it.h.queuedAt
	}
	return it.l.at
}

// setState moves h to state to and returns the state it left, 0 for a new task
// (Event.From). A change missing from the transition table is a kernel bug: it
// panics rather than let a task end twice or skip a state. A new task (accepted
// as Queued, not yet in a bucket) may enter any first state.
func (k *Kernel) setState(h *Handle, to State) State {
	from := State(h.state.Load())
	if !h.placed {
		h.placed = true
		from = 0
	} else if !canTransition(from, to) {
		panic("kernel: task " + h.ID() + ": illegal state change " + from.String() + " -> " + to.String())
	}
	h.state.Store(uint32(to))
	return from
}

// end moves a task to a terminal state, once.
func (k *Kernel) end(h *Handle, to State, err error) {
	from := k.setState(h, to)
	k.ls.live--
	if h.has(featNamed) {
		k.unindex(h)
	}
	gateUncount(h)
	if h.cur != nil {
		h.cur.ctx.Freeze() // Handle.Result and the store read what it holds now
	}
	if h.has(featDurable) {
		k.journalEnd(h, to, err)
	}
	if k.events != nil {
		k.emit(h, from, to, h.cur, err)
	}
	if h.has(featOnEnd) {
		k.endCalls().Push(endCall{fn: h.ext.onEnd, state: to, err: err})
	}
	if !h.pooled {
		h.finish(err)
	}
	if h.has(featBatch) {
		k.batchMemberDone(h, err)
	}
	if h.has(featGroup) {
		k.gateFreeKey(h)
	}
}

// initHandle fills a task record from t. It reads the clock once.
func (k *Kernel) initHandle(h *Handle, t *Task, prio Priority, rc *resolved, b *Batch) {
	h.k = k
	h.id = t.ID
	h.feat = 0
	if t.ID != "" {
		h.feat |= featNamed
	}
	h.seq = k.seq.Add(1)
	h.prio = prio
	h.bucket = levelOf(prio)
	h.run = t.Run
	h.ext = nil
	if t.OnTimeout != nil || t.OnEnd != nil {
		h.ext = &taskExt{onTimeout: t.OnTimeout, onEnd: t.OnEnd}
		if t.OnTimeout != nil {
			h.feat |= featOnTimeout
		}
		if t.OnEnd != nil {
			h.feat |= featOnEnd
		}
	}
	h.timeout = taskTimeout(t, prio, rc)
	h.retry = nil
	if t.Retry != nil {
		p := t.Retry.withDefaults()
		h.retry = &p
	}
	now := k.mono()
	h.submitAt = now
	h.dueAt, h.due = k.dueOf(t, now)
	h.batch = b
	if b != nil {
		h.feat |= featBatch
	}
	parent := context.Background()
	switch {
	case b != nil:
		parent = b.ctx
	case t.Values != nil:
		parent = context.WithoutCancel(t.Values)
	}
	h.initFirst(parent)
}

// initFirst makes h a new task, about to be taken in by the loop, whose first
// attempt runs under a context derived from parent.
func (h *Handle) initFirst(parent context.Context) {
	h.state.Store(uint32(Queued))
	a := &h.first
	a.h = h
	a.n = 1
	a.ctx.a = a
	a.ctx.parent = parent
	h.cur = a
}

// taskTimeout resolves the timeout of t's attempts: Task.Timeout, else the
// priority's Config.DefaultTimeout of rc; 0 means none.
func taskTimeout(t *Task, prio Priority, rc *resolved) time.Duration {
	d := t.Timeout
	if d == 0 {
		d = rc.cfg.DefaultTimeout.Get(prio)
	}
	if d == NoTimeout {
		return 0
	}
	return d
}

// dueOf returns when t is due, as a mono time, and whether it set Delay or At.
// now is the mono time of its submission.
func (k *Kernel) dueOf(t *Task, now int64) (int64, bool) {
	switch {
	case t.Delay > 0:
		return addMono(now, t.Delay), true
	case !t.At.IsZero():
		return int64(t.At.Sub(k.epoch)), true
	}
	return 0, false
}

// schedule puts an attempt's one wheel entry at at.
func (k *Kernel) schedule(a *attempt, kind timerKind, at time.Time) {
	a.tkind = kind
	a.timerAt = at
	a.timer = k.ls.wheel.Schedule(at, timerEntry{a: a})
}
