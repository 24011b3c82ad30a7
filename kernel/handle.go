package kernel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/queue"
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
	named    bool          // immutable: has a user's or a stored ID, and the loop indexes it for Kernel.Cancel
	state    atomic.Uint32 // State; written by the loop, and by an executor that settles a success
	attempts atomic.Int32  // attempts started; written by the loop only
	cur      *attempt      // loop-owned: the current (or next, while Retrying) attempt
	batch    *Batch        // immutable
	dur      *durTask      // immutable: a durable task: what the store needs
	timeout  time.Duration // immutable; 0: none
	queuedAt int64         // loop-owned; mono: when it entered its bucket (aging)
	dueAt    int64         // immutable; mono; meaningful when due

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
	return "ax-" + itoa(int(h.seq))
}

// State returns the task's current state.
func (h *Handle) State() State { return State(h.state.Load()) }

// Attempts returns the number of attempts started so far.
func (h *Handle) Attempts() int { return int(h.attempts.Load()) }

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
	brAdmitted bool    // its key's breaker admitted it (brGen)
	brReported bool    // its outcome went to the breaker
	zombie     *zombie // set while it is a zombie
}
