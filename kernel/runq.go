package kernel

import (
	"time"

	"github.com/axsched/ax/internal/spin"
	"github.com/axsched/ax/queue"
)

// runq is the hand-off between the loop and the executors. The loop alone decides
// what goes in, in which order and how many may run (limit, otherLimit); executors
// take the head when they free a slot, without waiting for a loop pass, and hand
// finished attempts back in done. Every field is guarded by mu.
//
// Executors count their own starts and completions under mu, the lock they take
// anyway to pop the next attempt: no channel operation per task.
type runq struct {
	mu spin.Mutex

	// rings hold the chosen attempts and light tasks by level. An executor takes
	// High first, then Normal, then Low: a pick made ahead never makes a
	// higher-priority pick wait (see Kernel.dispatch).
	rings       [queue.NumLevels]*queue.Ring[ritem]
	done        []*attempt  // finished attempts, swapped out by the loop
	lightFailed []lightDone // light tasks that failed, swapped out by the loop
	rated       []*attempt  // started attempts whose keys and groups wait for the loop to hear of it (attempt.unstarted)
	ratedPoke   bool        // the parked loop wants a poke for such a start (gateState.startWaits)

	idle    []*executor // parked executors, most recent last
	coming  int         // executors woken and not yet back under mu
	wokenAt int64       // mono: when the last of them was woken or started

	pops     uint64 // attempts and light tasks popped, ever
	popAt    int64  // mono: when an executor last popped
	lastLong bool   // the task handed back last ran overdue or longer
	wakeMark uint64 // pops when an executor was last woken or started for waiting work
	workers  int    // live executors, zombies excluded

	running      int // attempts executing, zombies excluded
	runningOther int // of which not High
	runningLow   int // of which Low (by the task's priority, not the level it was picked as)
	zombies      int
	selfSettled  int         // attempts executors settled themselves since the loop's last pass
	fastStarted  int         // tasks submitters started on the fast lane since the loop's last pass
	execs        []*executor // live executor goroutines, zombies included: Close finds running attempts here

	limit      int // MaxConcurrency
	otherLimit int // MaxConcurrency - Reserve.High

	// overtakeMax bounds, per level, how many pops in a row may pass over that
	// level's oldest pick (Config.Quotas: one cycle less that level's quota); skipped
	// counts them. A pick the loop made for a level's floor thus starts within a
	// cycle, though higher work keeps arriving.
	overtakeMax [queue.NumLevels]int
	skipped     [queue.NumLevels]int
	maxZombies  int

	loopWaiting    bool // the loop parked and wants a poke on the next completion
	unwatched      bool // ...with no stall check due (Kernel.checkStall): executors chain every wake-up (chainWake)
	loopWantsRoom  bool // ...even one an executor settles itself (tasks wait, or the kernel drains)
	loopRefillAt   int  // ...but, unless it drains, only once the run queue holds this many or fewer
	stopping       bool // executors exit once nothing is left to run
	workDoneClosed bool

	// tickets counts the admission tickets of the entries executors took, by level
	// plus one (ritem.l.tk), until they are given back (takeTickets): a task picked
	// ahead holds its ticket until an executor starts it, and the executor spares
	// the count's atomic add. Index 0 counts the entries that held none, ever;
	// noTicket counts those pushed, so that the difference is in the queue.
	tickets  [queue.NumLevels + 1]int64
	noTicket int64
	hinted   bool // Kernel.ticketsBack was set since the tickets were last taken
}

// overdue is how long an executor woken for waiting work may take to arrive
// before another is woken for it. Normally one arrives within microseconds, and
// each arrival wakes the next while work waits, so one wake-up is on the way at a
// time. But the OS sometimes holds a thread back for milliseconds: without a
// bound, every task submitted meanwhile would wait for that one executor, while
// the submitter's own core was free to run another.
const overdue = int64(20 * time.Microsecond)

// needsWake reports whether work waiting in the run queue needs an executor woken
// at mono time now: none is on the way, or the last one woken is overdue.
func (q *runq) needsWake(now int64) bool { return q.needsWakeWithin(now, overdue) }

// needsWakeWithin is needsWake with late as the bound on a woken executor's
// arrival (overdue, or fastOverdue on the fast lane).
func (q *runq) needsWakeWithin(now, late int64) bool {
	return q.queued() > 0 && (q.coming == 0 || now-q.wokenAt > late)
}

// chainWake reports whether an executor (or the loop, handing work over) should
// wake another executor for waiting work: needsWake, and either the work is
// long (the caller's last task, or the last task any executor handed back, ran
// overdue or longer: such work blocks, and needs more executors) or nobody but
// the last one woken took work since the last wake-up. When executors keep
// popping short tasks, those awake drain them, and waking more would only make
// them contend for mu. If every executor awake then takes a long task at once,
// the loop's stall check restarts the chain (Kernel.checkStall).
//
// While the loop sleeps with no stall check due (unwatched: it parked with nothing
// in the run queue, and the fast lane fills it meanwhile), nobody would restart a
// chain that stopped: each executor then wakes the next while work waits.
func (q *runq) chainWake(now int64, long bool) bool {
	return q.needsWake(now) && (long || q.lastLong || q.unwatched || q.pops-q.wakeMark <= 1)
}

// takeForWake takes an idle executor to wake, or counts one to start (spawn),
// for work waiting at mono time now. Called with mu held.
func (q *runq) takeForWake(now int64) (wake *executor, spawn bool) {
	switch {
	case len(q.idle) > 0:
		wake = q.idle[len(q.idle)-1]
		q.idle = q.idle[:len(q.idle)-1]
	case q.workers < q.limit && !q.stopping:
		q.workers++
		spawn = true
	default:
		return nil, false
	}
	q.coming++
	q.wokenAt = now
	q.wakeMark = q.pops
	return wake, spawn
}

// cycling reports whether some executor is awake and popped work in the last
// overdue/4 before now: it will be back for more at once.
func (q *runq) cycling(now int64) bool {
	return q.workers > len(q.idle) && now-q.popAt < overdue/4
}

// takeRefillPoke reports whether a success an executor settled itself should
// poke the parked loop: the loop waits for room (or drains) and the run queue
// ran low (loopRefillAt). It clears loopWaiting when it does. Called with mu held.
func (q *runq) takeRefillPoke() bool {
	if q.loopWaiting && q.loopWantsRoom && q.poppableLen() <= q.loopRefillAt {
		q.loopWaiting = false
		return true
	}
	return false
}

// poppableLen returns how many waiting attempts and light tasks executors could
// pop now (Normal and Low ones only while the reserve leaves them a slot).
func (q *runq) poppableLen() int {
	n := q.rings[queue.High].Len()
	if q.runningOther < q.otherLimit {
		n += q.otherLen()
	}
	return n
}

// otherLen returns how many Normal and Low picks wait in the run queue.
func (q *runq) otherLen() int { return q.rings[queue.Normal].Len() + q.rings[queue.Low].Len() }

// poppable reports whether an executor could pop something now.
func (q *runq) poppable() bool {
	return q.rings[queue.High].Len() > 0 || (q.otherLen() > 0 && q.runningOther < q.otherLimit)
}

// register adds e to execs, once.
func (q *runq) register(e *executor) {
	if e.slot < 0 {
		e.slot = len(q.execs)
		q.execs = append(q.execs, e)
	}
}

// unregister removes e from execs: its goroutine exits.
func (q *runq) unregister(e *executor) {
	if i := e.slot; i >= 0 {
		last := len(q.execs) - 1
		q.execs[i] = q.execs[last]
		q.execs[i].slot = i
		q.execs[last] = nil
		q.execs = q.execs[:last]
		e.slot = -1
	}
}

// ran counts off an attempt or light task of priority level l that stopped running.
// Called with mu held.
func (q *runq) ran(l queue.Level) {
	q.running--
	if l != queue.High {
		q.runningOther--
		if l == queue.Low {
			q.runningLow--
		}
	}
}

// queued returns the number of attempts waiting in the run queue.
func (q *runq) queued() int { return q.rings[queue.High].Len() + q.otherLen() }

// pop takes the next attempt or light task an executor may start: the oldest
// High pick, else the oldest Normal one, else the oldest Low one, honouring the
// reserve — unless the oldest Normal or Low pick was passed over overtakeMax times
// in a row: then that one (Low first, the rarer).
func (q *runq) pop() (ritem, bool) {
	other := q.runningOther < q.otherLimit || q.stopping
	if other {
		for _, l := range [...]queue.Level{queue.Low, queue.Normal} {
			if q.skipped[l] >= q.overtakeMax[l] && q.rings[l].Len() > 0 {
				it, _ := q.rings[l].Pop()
				q.popped(l, other)
				q.runningOther++
				return it, true
			}
		}
	}
	if it, ok := q.rings[queue.High].Pop(); ok {
		q.popped(queue.High, other)
		return it, true
	}
	if other {
		for l := queue.Normal; l < queue.NumLevels; l++ {
			if it, ok := q.rings[l].Pop(); ok {
				q.popped(l, other)
				q.runningOther++
				return it, true
			}
		}
	}
	return ritem{}, false
}

// popped counts a pop of level l: the levels below it that held picks were passed
// over (when they could have run: other), and l's count starts again.
func (q *runq) popped(l queue.Level, other bool) {
	q.pops++
	q.skipped[l] = 0
	if !other {
		return
	}
	for x := l + 1; x < queue.NumLevels; x++ {
		if q.rings[x].Len() > 0 {
			q.skipped[x]++
		} else {
			q.skipped[x] = 0
		}
	}
}

// checkWorkDone closes workDone once the kernel stops and no executor goroutine,
// zombie or not, is left. Called with rq.mu held.
func (k *Kernel) checkWorkDone() {
	q := &k.rq
	if q.stopping && q.workers == 0 && q.zombies == 0 && !q.workDoneClosed {
		q.workDoneClosed = true
		close(k.workDone)
	}
}

// grow makes room for n more values in r.
func grow(r *queue.Ring[ritem], n int) {
	if r.Len()+n > r.Cap() {
		_ = r.Resize(max(2*r.Cap(), r.Len()+n))
	}
}
