package kernel

import (
	"errors"

	"github.com/axsched/ax/internal/spin"
	"github.com/axsched/ax/queue"
)

// intake is the hand-off from submitters to the loop: submitters append under mu,
// and only the loop drains it (Kernel.pass). Every field is guarded by mu.
type intake struct {
	mu          spin.Mutex
	tasks       []qitem   // task records and light tasks, in submission order
	lazy        lazyQueue // delayed fire-and-forget tasks in their compact form
	ctrl        []ctrlMsg
	loopWaiting bool  // the loop parked and asked for a poke
	closed      bool  // Shutdown or Close began: refuse submissions
	loopGone    bool  // the loop returned: nobody takes control messages (see drainPrestarts)
	fast        bool  // the parked loop opened the fast lane (see runFast)
	wakeAt      int64 // mono: when the parked loop's timer fires; math.MaxInt64 if none
	lastFast    int64 // mono: the last task started on the fast lane
	gapMean     int64 // ns: the mean gap between fast-lane tasks (runFastItem)
	// Tickets taken ahead for lazy tasks, per level (see Kernel.takeLazyTicket),
	// and the lazy tasks accepted since the loop last took the intake, not yet
	// in the submitted counters (see Kernel.intakeCounts).
	lazyTickets   [queue.NumLevels]int64
	lazySubmitted [queue.NumLevels]uint64
}

// enqueue appends h to the intake. It reports false when the kernel is closed.
func (k *Kernel) enqueue(h *Handle) bool { return k.enqueueMany([]*Handle{h}) }

// enqueueMany appends a whole batch in one intake operation.
func (k *Kernel) enqueueMany(hs []*Handle) bool {
	k.in.mu.Lock()
	if k.in.closed {
		k.in.mu.Unlock()
		return false
	}
	for _, h := range hs {
		k.in.tasks = append(k.in.tasks, qitem{h: h})
	}
	wake := k.in.loopWaiting
	k.in.loopWaiting = false
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
	return true
}

// enqueueLazy appends t, of priority prio and level lvl, as a lazy task to the
// intake (see pathOf), reading the clock once for its submission and due times.
// The task holds its ticket already if admitted; if not, it takes one from the
// intake's reserve (takeLazyTicket), and enqueueLazy returns errNoTicket, queuing
// nothing, when the level has no room. It returns ErrClosed once the kernel
// closed. The task counts as submitted from here (in.lazySubmitted), not from when
// the loop takes it in, which may be much later. It wakes a parked loop only if
// the task is due before the loop's timer fires, or if lazyBatch tasks wait: a
// task due later is taken in when the loop wakes anyway, so a burst of delayed
// tasks costs the loop one pass per lazyBatch tasks, not one per submission.
func (k *Kernel) enqueueLazy(t *Task, prio Priority, lvl queue.Level, admitted bool, rc *resolved) error {
	meta := uint64(prio)<<lazyPrioShift | uint64(min(taskTimeout(t, prio, rc), lazyTimeoutMax))
	k.in.mu.Lock()
	if k.in.closed {
		k.in.mu.Unlock()
		return ErrClosed
	}
	if !admitted && !k.takeLazyTicket(lvl, rc) {
		k.in.mu.Unlock()
		return errNoTicket
	}
	k.in.lazySubmitted[lvl]++
	// The clock is read here, under the lock and between the two halves of the
	// entry's write, not before the lock: the first stores, often to a line or a
	// page of the chunk not touched yet, complete while the clock is read instead
	// of holding up the unlock.
	e := k.in.lazy.Slot()
	e.V.run, e.V.meta = t.Run, meta
	now := k.mono()
	due, _ := k.dueOf(t, now)
	e.V.submitAt, e.Due = now, due
	k.in.lazy.Commit(due)
	wake := k.in.loopWaiting && (due < k.in.wakeAt || k.in.lazy.Len() >= lazyBatch)
	if wake {
		k.in.loopWaiting = false
	}
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
	return nil
}

// errNoTicket is enqueueLazy's answer when a level has no room for a lazy task.
var errNoTicket = errors.New("kernel: no ticket")

// intakeFigures are what the intake holds that the loop's figures do not show
// yet, per level: the tasks submitted so far (the submitted counters plus the lazy
// tasks the loop has not counted in them, read together under the intake's lock,
// so that the sum never goes back), the lazy tasks waiting in the intake (delayed
// tasks the loop has not taken in), and the tickets held in reserve for lazy tasks.
type intakeFigures struct {
	submitted [queue.NumLevels]uint64
	lazies    [queue.NumLevels]int
	reserve   [queue.NumLevels]int64
}

// intakeCounts reads the intake's figures under its lock.
func (k *Kernel) intakeCounts() intakeFigures {
	k.in.mu.Lock()
	defer k.in.mu.Unlock()
	var f intakeFigures
	for l := range queue.NumLevels {
		f.submitted[l] = k.m.submitted[l].Get() + k.in.lazySubmitted[l]
		f.lazies[l] = int(k.in.lazySubmitted[l])
		f.reserve[l] = k.in.lazyTickets[l]
	}
	return f
}
