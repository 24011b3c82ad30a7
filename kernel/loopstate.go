package kernel

import (
	"math"
	"time"

	"github.com/axsched/ax/internal/retries"
	"github.com/axsched/ax/kernel/internal/chunk"
	"github.com/axsched/ax/kernel/internal/poolbook"
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/timewheel"
	"github.com/benbjohnson/clock"
)

// loopState is everything only the loop goroutine touches: the buckets, the wheel,
// the running list, the per-task loop fields. Nothing here is read elsewhere; what
// others need (depths, counts) is published through atomics in kernelMetrics.
type loopState struct {
	byID map[string]*Handle // live named tasks (featNamed) by ID; Kernel.Cancel
	// pool is the tasks this kernel put in a SharedStore's pool, until claimed or
	// adopted here or ended, with their adoption queues (adopt.go), the claims that
	// came before their handles (each with its slot reserved in durRunning) and the
	// orphans (pool.go).
	pool poolbook.Book[*Handle]
	// claimReserved counts the slots reserved for a claim in flight (in durRunning too).
	claimReserved int
	// startReserved counts the slots reserved for starts in a commit in flight (in
	// durRunning too; see prestart.go).
	startReserved int
	// adoptReserved counts the slots reserved for adopting starts in the journal (in
	// durRunning too; see adopt.go).
	adoptReserved int
	claimHungry   bool                 // the claimer waits for a free slot to claim due pool work
	dupID         map[string][]*Handle // further live named tasks sharing an ID of byID
	readyMarked   bool                 // Kernel.ready is closed

	rcl     *resolved // the config the loop applies
	now     time.Time // the clock, read once per pass
	nowMono int64     // now as a mono time
	buckets *queue.Buckets[qitem]
	ringMax [queue.NumLevels]int // the buckets' most capacity (ringCaps)
	wheel   *timewheel.Wheel[timerEntry]
	timer   *clock.Timer
	timerAt time.Time // when the armed timer fires; zero when not armed
	fireFn  func(timerEntry)
	// lookahead is how many picked attempts the run queue may hold beyond the free
	// slots, so an executor that finishes takes its next task without waiting for a
	// loop pass (see lookaheadOf).
	lookahead int

	live     int                  // accepted tasks not yet terminal
	delayed  [queue.NumLevels]int // tasks waiting in the wheel to be due (delayed or retrying), by ticket level
	draining bool                 // Shutdown began
	closing  bool                 // Close began
	freed    bool                 // tickets were given back this pass
	// Per-task counts the loop gathers and applies in one atomic operation per level
	// (flushCounts) before it hands tasks to executors and at the end of each pass:
	// the tickets and counters are written by submitters and read by everyone, and
	// one write per task made their cache lines move between cores on every task.
	pendSubmitted, pendStarted [queue.NumLevels]int
	pendRelease                [queue.NumLevels]int64
	lightStarts                int // light tasks handed over since the last flush (retry budget)

	// The stall check (checkStall): runq.pops when the loop last saw it change, and
	// when; stallAt is when the parked loop must look again (mono; 0: no need).
	seenPops        uint64
	seenAt, stallAt int64
	budget          retries.Budget
	evBuf           []Event

	jbuf    []jentry                   // durable-task changes of this pass, for the journal
	backlog [queue.NumLevels][]*Handle // recovered durable tasks waiting for a ticket
	gated   map[*attempt]struct{}      // durable attempts waiting for their start to be stored
	// durRunning counts the durable attempts in flight: their start is journaled
	// and their end or retry is not (gated, in the run queue, running). At most
	// MaxConcurrency while none ends (see durableFull).
	durRunning int

	gate gateState // groups and pauses (gate.go)

	spareTasks []qitem
	spareLight []lightDone
	spareRated []*attempt
	lazyDone   *lazyChunk           // chunks emptied since the last swap, for the intake to reuse
	parked     chunk.Heap[lazyTask] // full chunks of lazy tasks waiting for their first due
	spareCtrl  []ctrlMsg
	spareDone  []*attempt
	picked     []pick
}

// initLoop builds the loop's structures for the first config.
func (k *Kernel) initLoop(rc *resolved) error {
	c := &rc.cfg
	caps := ringCaps(c)
	for l := range caps {
		caps[l] = min(caps[l], ringStart)
	}
	b, err := queue.NewBuckets[qitem](caps, queue.Quotas{High: c.Quotas.High, Normal: c.Quotas.Normal, LowGuaranteed: c.Quotas.LowGuaranteed})
	if err != nil {
		return err
	}
	w, err := timewheel.New[timerEntry](c.Tick, c.Clock.Now())
	if err != nil {
		return err
	}
	k.ls.buckets = b
	k.ls.wheel = w
	k.ls.fireFn = k.onTimer
	// The run queue's rings grow as picks are handed over (grow), so a kernel's
	// memory follows the work it holds, not the MaxConcurrency it may run.
	for l := range k.rq.rings {
		k.rq.rings[l], _ = queue.NewRing[ritem](min(c.MaxConcurrency+16, ringStart))
	}
	k.ls.budget.SetConfig(retries.Config(c.RetryBudget))
	k.apply(rc)
	return nil
}

// ringStart is the capacity a bucket starts with. It grows, doubling, as tasks
// queue, up to ringCaps: a kernel whose capacity is sized for many delayed tasks
// does not hold (nor make the garbage collector scan) rings for all of them.
const ringStart = 1024

// ringCaps bounds the buckets: the capacity plus room for retries, which re-enter
// their bucket without a ticket check (at most MaxConcurrency of them at a time).
func ringCaps(c *Config) [queue.NumLevels]int {
	return [queue.NumLevels]int{
		queue.High:   c.Capacity.High + c.MaxConcurrency + c.MaxZombies + 1,
		queue.Normal: c.Capacity.Normal + c.MaxConcurrency + c.MaxZombies + 1,
		queue.Low:    c.Capacity.Low + c.MaxConcurrency + c.MaxZombies + 1,
	}
}

// lookaheadOf returns the lookahead of a kernel with the given slots: a quarter
// of them up to 21 slots, all but 16 from there, at most maxLookahead.
//
// A lookahead costs no ordering: a pick is final once made, but a later pick of
// a higher level overtakes it (each level has its own ring and room, see
// dispatch), and Stats counts it as Dispatched until it starts; a timeout counts
// from the executor's start, not from the pick. A large kernel needs one about as
// deep as its slots: completions come in bunches (the timers of tasks that sleep
// or wait on I/O fire together), and the loop, poked to refill, waits on its P
// behind every executor the bunch readied there, while the executors must find
// work without it.
func lookaheadOf(slots int) int {
	return min(max(slots/4, slots-16), maxLookahead)
}

// maxLookahead bounds lookaheadOf: past it, a refill covers a bunch of
// completions far longer than a loop pass takes.
const maxLookahead = 1024

// apply installs a resolved config in the loop (and the run queue's limits).
func (k *Kernel) apply(rc *resolved) {
	c := &rc.cfg
	k.ls.rcl = rc
	k.ls.lookahead = lookaheadOf(c.MaxConcurrency)
	k.ls.ringMax = ringCaps(c)
	for l := range queue.NumLevels {
		if r := k.ls.buckets.Bucket(queue.Level(l)); r.Cap() > k.ls.ringMax[l] {
			_ = r.Resize(max(k.ls.ringMax[l], r.Len())) // never below Len: no error
		}
	}
	if c.AgeAfter > 0 {
		age := c.AgeAfter
		k.ls.buckets.SetAged(func(_ queue.Level, it qitem) bool { return time.Duration(k.ls.nowMono-it.queuedAt()) >= age })
	} else {
		k.ls.buckets.SetAged(nil)
	}
	k.ls.budget.SetConfig(retries.Config(c.RetryBudget))
	q := &k.rq
	q.mu.Lock()
	q.limit = c.MaxConcurrency
	q.otherLimit = c.MaxConcurrency - c.Reserve.High
	q.maxZombies = c.MaxZombies
	cycle := c.Quotas.High + c.Quotas.Normal + c.Quotas.LowGuaranteed
	for l, quota := range [...]int{queue.Normal: c.Quotas.Normal, queue.Low: c.Quotas.LowGuaranteed} {
		if l == int(queue.High) {
			continue
		}
		q.overtakeMax[l] = math.MaxInt
		if quota > 0 {
			q.overtakeMax[l] = cycle/quota - 1
		}
	}
	q.mu.Unlock()
	_ = k.ls.buckets.Picker().SetQuotas(queue.Quotas{High: c.Quotas.High, Normal: c.Quotas.Normal, LowGuaranteed: c.Quotas.LowGuaranteed}) // validated: no error
}

// spareKeep bounds the intake buffers (in entries) the loop keeps while it parks:
// a burst of submissions grows them, and they are reused while the burst lasts,
// but an idle kernel does not pin a burst's memory.
const spareKeep = 4096

// trimmed returns s, or nil if it grew past spareKeep.
func trimmed[T any](s []T) []T {
	if cap(s) > spareKeep {
		return nil
	}
	return s
}
