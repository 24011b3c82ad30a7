package kernel

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/timewheel"
)

// ctrlKind is the kind of a control message.
type ctrlKind uint8

const (
	ctrlCancel      ctrlKind = iota + 1 // cancel one task (h)
	ctrlCancelBatch                     // cancel a batch's members (b)
	ctrlCancelID                        // cancel the live tasks of an ID (id); acks the count
	ctrlUpdate                          // apply a new resolved config (rc), answer on ack
	ctrlShutdown                        // drain and stop
	ctrlClose                           // stop now
	ctrlRecover                         // schedule durable tasks read back from the store (hs)
	ctrlStarted                         // the journal stored the starts of gated attempts (as)
	ctrlEvict                           // evict the newest queued Low task for a High submitter, answer on ack
)

// ctrlMsg is a message from the API to the loop.
type ctrlMsg struct {
	kind  ctrlKind
	h     *Handle
	b     *Batch
	rc    *resolved
	hs    []*Handle
	as    []*attempt
	id    string
	ack   chan error // size 1
	count chan int   // size 1
}

// loopState is everything only the loop goroutine touches: the buckets, the wheel,
// the running list, the per-task loop fields. Nothing here is read elsewhere; what
// others need (depths, counts) is published through atomics in kernelMetrics.
type loopState struct {
	byID        map[string]*Handle   // live named tasks (Handle.named) by ID; Kernel.Cancel
	dupID       map[string][]*Handle // further live named tasks sharing an ID of byID
	readyMarked bool                 // Kernel.ready is closed

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

	live     int  // accepted tasks not yet terminal
	delayed  int  // tasks waiting in the wheel to be due (delayed or retrying)
	draining bool // Shutdown began
	closing  bool // Close began
	freed    bool // tickets were given back this pass
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
	budget          retryBudget
	evBuf           []Event

	jbuf       []jentry                   // durable-task changes of this pass, for the journal
	backlog    [queue.NumLevels][]*Handle // recovered durable tasks waiting for a ticket
	gated      map[*attempt]struct{}      // durable attempts waiting for their start to be stored
	gateWindow int                        // the most gated attempts: Config.StoreBatch / 2 (no limit without a store)

	spareTasks []qitem
	spareLight []lightDone
	lazyDone   *lazyChunk // chunks emptied since the last swap, for the intake to reuse
	parked     chunkHeap  // full chunks of lazy tasks waiting for their first due
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
	k.buckets = b
	k.wheel = w
	k.fireFn = k.onTimer
	k.gateWindow = math.MaxInt // durable kernels set theirs
	// The run queue's rings grow as picks are handed over (grow), so a kernel's
	// memory follows the work it holds, not the MaxConcurrency it may run.
	for l := range k.rq.rings {
		k.rq.rings[l], _ = queue.NewRing[ritem](min(c.MaxConcurrency+16, ringStart))
	}
	k.budget.init(c.RetryBudget)
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
	k.rcl = rc
	k.lookahead = lookaheadOf(c.MaxConcurrency)
	k.ringMax = ringCaps(c)
	for l := range queue.NumLevels {
		if r := k.buckets.Bucket(queue.Level(l)); r.Cap() > k.ringMax[l] {
			_ = r.Resize(max(k.ringMax[l], r.Len())) // never below Len: no error
		}
	}
	if c.AgeAfter > 0 {
		age := c.AgeAfter
		k.buckets.SetAged(func(_ queue.Level, it qitem) bool { return time.Duration(k.nowMono-it.queuedAt()) >= age })
	} else {
		k.buckets.SetAged(nil)
	}
	k.budget.setConfig(c.RetryBudget)
	q := &k.rq
	q.mu.Lock()
	q.limit = c.MaxConcurrency
	q.otherLimit = c.MaxConcurrency - c.Reserve.High
	q.maxZombies = c.MaxZombies
	q.mu.Unlock()
	_ = k.buckets.Picker().SetQuotas(queue.Quotas{High: c.Quotas.High, Normal: c.Quotas.Normal, LowGuaranteed: c.Quotas.LowGuaranteed}) // validated: no error
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

// loop is the scheduler: the only goroutine that decides what runs next and how
// many run. It parks when it has nothing to do, on its poke channel and on one
// timer armed for the wheel's next expiry.
func (k *Kernel) loop() {
	defer close(k.loopDone)
	defer k.m.group.leave(k.m.name) // a stopped kernel gives its name on a shared set up
	defer k.lightCancel()
	for {
		k.pass()
		if (k.draining || k.closing) && k.live == 0 {
			k.markReady()
			k.stopExecutors()
			return
		}
		k.park()
		k.markReady() // if park returned at once
	}
}

// markReady tells New, once, that the loop has run its first pass and parked.
// Loop only.
func (k *Kernel) markReady() {
	if !k.readyMarked {
		k.readyMarked = true
		close(k.ready)
	}
}

// pass handles everything that arrived since the last pass, then dispatches.
func (k *Kernel) pass() {
	k.nowMono = k.mono()
	k.now = k.at(k.nowMono)
	if k.fastOpen.Load() {
		// The loop decides again: it closes the fast lane before anything (a timer
		// that came due) can fill a bucket, and reopens it as it parks.
		k.in.mu.Lock()
		k.in.fast = false
		k.fastOpen.Store(false)
		k.in.mu.Unlock()
	}

	// Timers first: what came due is dispatched before the loop takes in the
	// intake, which may hold a batch of delayed tasks (see Kernel.enqueueLazy).
	k.unparkDue()
	k.wheel.Advance(k.now, k.fireFn)
	k.dispatch()

	k.in.mu.Lock()
	tasks, lazy, ctrl := k.in.tasks, k.in.lazy.take(), k.in.ctrl
	k.in.tasks, k.in.ctrl = k.spareTasks, k.spareCtrl
	k.in.lazy.recycle(k.lazyDone)
	for l, n := range k.in.lazySubmitted {
		if n > 0 {
			// Under the lock, as readers add the two (Kernel.intakeCounts).
			k.m.submitted[l].AddInt64(int64(n))
			k.in.lazySubmitted[l] = 0
		}
	}
	k.in.mu.Unlock()
	k.lazyDone = nil
	for i := range tasks {
		if it := &tasks[i]; it.h != nil {
			if it.h.named {
				k.index(it.h)
			}
			k.accept(it.h)
		} else {
			k.acceptLight(it.l)
		}
	}
	clear(tasks)
	k.spareTasks = tasks[:0]
	k.lazyDone = k.acceptLazies(lazy)
	k.flushCounts()

	k.rq.mu.Lock()
	done := k.rq.done
	k.rq.done = k.spareDone
	lightFailed := k.rq.lightFailed
	k.rq.lightFailed = k.spareLight
	k.live -= k.rq.fastDone
	k.rq.fastDone = 0
	fastStarted := k.rq.fastStarted
	k.rq.fastStarted = 0
	k.rq.mu.Unlock()
	if fastStarted > 0 {
		k.live += fastStarted
		k.budget.firstN(k.now, fastStarted)
	}
	for _, a := range done {
		k.settleAttempt(a)
	}
	clear(done)
	k.spareDone = done[:0]
	for _, d := range lightFailed {
		k.lightFailed(d)
	}
	clear(lightFailed)
	k.spareLight = lightFailed[:0]

	for _, m := range ctrl {
		k.handleCtrl(m)
	}
	clear(ctrl)
	k.spareCtrl = ctrl[:0]

	k.admitBacklog()
	k.wheel.Advance(k.now, k.fireFn)
	k.dispatch()
	k.publish()
}

// admitBacklog takes in recovered durable tasks, in their order, as long as their
// buckets have room: recovery never overfills the kernel nor refuses a stored task.
func (k *Kernel) admitBacklog() {
	for l := range queue.NumLevels {
		b := k.backlog[l]
		if len(b) == 0 {
			continue
		}
		n := 0
		for n < len(b) && k.tryAcquire(queue.Level(l), 1, k.rcl) == nil {
			k.accept(b[n])
			n++
		}
		if n == len(b) {
			k.backlog[l] = nil
		} else {
			clear(b[:n])
			k.backlog[l] = b[n:]
		}
	}
}

// backlogEmpty reports whether no recovered task waits for a ticket.
func (k *Kernel) backlogEmpty() bool {
	return len(k.backlog[0]) == 0 && len(k.backlog[1]) == 0 && len(k.backlog[2]) == 0
}

// dropBacklog forgets the recovered tasks not taken in yet: the process stops and
// their rows stay live for the next kernel.
func (k *Kernel) dropBacklog() {
	for l := range queue.NumLevels {
		for _, h := range k.backlog[l] {
			k.abortDurable(h)
		}
		k.backlog[l] = nil
	}
}

// park arms the timer for the wheel's next expiry (or a parked chunk's first
// due, if sooner) and blocks until a submitter, an executor or the timer wakes
// the loop. It returns at once if work is pending.
func (k *Kernel) park() {
	next, ok := k.wheel.Next()
	if len(k.parked) > 0 {
		if p := k.at(k.parked[0].minDue); !ok || p.Before(next) {
			next, ok = p, true
		}
	}
	if k.stallAt != 0 {
		if p := k.at(k.stallAt); !ok || p.Before(next) {
			next, ok = p, true
		}
	}
	if ok {
		if !next.Equal(k.timerAt) {
			d := next.Sub(k.clk.Now())
			if d <= 0 {
				return
			}
			if k.timer == nil {
				k.timer = k.clk.Timer(d)
			} else {
				k.timer.Stop()
				k.timer.Reset(d)
			}
			k.timerAt = next
		}
	} else if !k.timerAt.IsZero() {
		k.timer.Stop()
		k.timerAt = time.Time{}
	}
	wakeAt := int64(math.MaxInt64)
	if !k.timerAt.IsZero() {
		wakeAt = int64(k.timerAt.Sub(k.epoch))
	}

	k.in.mu.Lock()
	if len(k.in.tasks) > 0 || k.in.lazy.n > 0 || len(k.in.ctrl) > 0 {
		k.in.mu.Unlock()
		return
	}
	k.in.loopWaiting = true
	if k.buckets.Len() == 0 && !k.draining && !k.closing && k.backlogEmpty() {
		k.in.fast = true
		k.fastOpen.Store(true)
	}
	k.in.wakeAt = wakeAt
	k.in.tasks = trimmed(k.in.tasks)
	k.in.lazy.recycle(k.lazyDone)
	k.in.mu.Unlock()
	k.spareTasks, k.lazyDone = trimmed(k.spareTasks), nil
	k.rq.mu.Lock()
	if len(k.rq.done) > 0 || len(k.rq.lightFailed) > 0 || k.rq.fastDone > 0 {
		k.rq.mu.Unlock()
		return
	}
	k.rq.loopWaiting = true
	k.rq.loopWantsRoom = k.buckets.Len() > 0 || k.draining || k.closing
	// An executor that finishes takes its next task from the run queue itself: the
	// loop needs to refill it only once it runs low (a poke per completion cost the
	// loop a pass, and the submitters waiting for room a wake-up, per task).
	k.rq.loopRefillAt = k.lookahead / 2
	if k.draining || k.closing {
		k.rq.loopRefillAt = math.MaxInt
	}
	k.rq.mu.Unlock()

	var timerC <-chan time.Time
	if k.timer != nil && !k.timerAt.IsZero() {
		timerC = k.timer.C
	}
	k.markReady()
	select {
	case <-k.pokeCh:
	case <-timerC:
		k.timerAt = time.Time{}
	}
}

// accept takes in a newly submitted task.
func (k *Kernel) accept(h *Handle) {
	k.live++
	k.pendSubmitted[h.bucket]++
	if h.batch != nil && h.batch.canceled() {
		k.flushCounts() // counted submitted before it is counted ended
		k.release(h.ticket(), 1)
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, h.batch.cause())
		return
	}
	if h.due && h.dueAt > k.nowMono {
		k.toWheel(h, h.cur, Delayed, k.at(h.dueAt), nil)
		return
	}
	k.toBucket(h, 0)
}

// toWheel parks a task's attempt in the wheel until at (delay or retry backoff).
// err is the error of the attempt that failed, for a retry.
func (k *Kernel) toWheel(h *Handle, a *attempt, to State, at time.Time, err error) {
	from := k.setState(h, to)
	k.emit(h, from, to, a, err)
	k.schedule(a, timerDue, at)
	k.delayed++
}

// schedule puts an attempt's one wheel entry at at.
func (k *Kernel) schedule(a *attempt, kind timerKind, at time.Time) {
	a.tkind = kind
	a.timerAt = at
	a.timer = k.wheel.Schedule(at, timerEntry{a: a})
}

// toBucket queues a task in its bucket. from is its previous state (0 when new).
func (k *Kernel) toBucket(h *Handle, from State) {
	h.queuedAt = k.nowMono
	k.growBucket(h.bucket)
	_ = k.buckets.Push(h.bucket, qitem{h: h}) // growBucket made room: no error
	k.setState(h, Queued)
	if from != 0 || k.events != nil {
		k.emit(h, from, Queued, h.cur, nil)
	}
}

// growBucket makes room for one more task in bucket l's ring, doubling it when it
// is full: up to ringMax as tasks queue, and past it if need be. Every task that
// reaches a bucket holds a ticket, and an accepted task always finds room: retries
// re-enter their bucket without a ticket check (they may not be refused), and a
// High task that evicted a Low one holds the Low task's ticket, so a bucket may
// briefly hold more than its Capacity (see Config.Capacity).
func (k *Kernel) growBucket(l queue.Level) {
	if r := k.buckets.Bucket(l); r.Len() == r.Cap() {
		n := 2 * r.Cap()
		if r.Cap() < k.ringMax[l] {
			n = min(n, k.ringMax[l])
		}
		_ = r.Resize(n) // growing: no error
	}
}

// evictNewestLow ends the newest queued Low task with ErrEvicted for a High
// submitter that found no room (Config.EvictLow), and reports whether there was
// one. Its ticket passes to the submitter's task (Handle.evicts), so the total of
// waiting tasks stays within the total capacity, and Low submitters find no room
// the evicting task took.
func (k *Kernel) evictNewestLow() bool {
	if k.draining || k.closing {
		return false
	}
	v, ok := k.buckets.Bucket(queue.Low).PopBack()
	if !ok {
		return false
	}
	k.m.evicted[queue.Low].Inc()
	if v.h == nil {
		k.live-- // a light task ends here
		return true
	}
	k.end(v.h, Evicted, ErrEvicted)
	return true
}

// onTimer handles a wheel entry that came due.
func (k *Kernel) onTimer(e timerEntry) {
	a := e.a
	if a == nil {
		k.delayed--
		k.toBucket(k.lazyHandle(&e.t), 0)
		return
	}
	kind := a.tkind
	a.tkind = timerNone
	a.timer = timewheel.Handle[timerEntry]{}
	switch kind {
	case timerDue:
		k.delayed--
		k.toBucket(a.h, State(a.h.state.Load()))
	case timerTimeout:
		k.onTimeout(a)
	case timerGrace:
		k.onGrace(a)
	}
}

// dispatch moves picked tasks into the run queue while executors have or will
// soon have a free slot, then wakes or starts executors for them.
//
// Each level has room for the free slots plus the lookahead, less the picks of
// its own and higher levels already waiting: lower picks never count against a
// higher level's room, and executors take the highest level first, so a task
// never waits behind lower-priority work picked ahead of it. The picker still
// decides the order: when the level it names has no room, a higher level with
// room may take a pick ahead, overtaking, while the level passed over keeps its
// turn and its floor (queue.Buckets.PopAhead) — so the shares hold under
// saturation, and the run queue stays within three lookaheads.
func (k *Kernel) dispatch() {
	if k.buckets.Len() == 0 {
		return
	}
	q := &k.rq
	// Read the room under the lock, pick and account without it (executors keep
	// running meanwhile: room only grows), then hand the picks over in one short
	// critical section.
	q.mu.Lock()
	var r room
	free := q.limit - q.running + k.lookahead
	freeOther := q.otherLimit - q.runningOther + k.lookahead // Config.Reserve
	above, aboveOther := 0, 0
	for l, ring := range q.rings {
		above += ring.Len()
		r.all[l] = free - above
		if l != int(queue.High) {
			aboveOther += ring.Len()
			r.other[l] = freeOther - aboveOther
		}
	}
	q.mu.Unlock()
	r.other[queue.High] = math.MaxInt
	picked := k.picked[:0]
	for r.all[queue.High] > 0 && len(k.gated) < k.gateWindow {
		// A level whose slots (Config.Reserve) are all taken, picks ahead included,
		// is left out, as if it had no work: its share passes on. A level whose
		// room overtaking picks took keeps its turn instead (PopAhead).
		mask := r.mask()
		var it qitem
		var lvl queue.Level
		var ok bool
		if r.all[queue.Low] > 0 {
			it, lvl, ok = k.buckets.Pop(mask) // every level has room
		} else if lvl, ok = k.buckets.Peek(mask); ok {
			if r.all[lvl] > 0 {
				it, lvl, ok = k.buckets.Pop(mask)
			} else {
				it, lvl, ok = k.buckets.PopAhead(mask, r.above(lvl))
			}
		}
		if !ok {
			break
		}
		if it.h == nil {
			// A light task: counted in bulk, its record never touched.
			k.pendRelease[lvl]++
			k.pendStarted[lvl]++
			k.lightStarts++
			k.freed = true
		} else if !k.start(it.h, it.h.cur) {
			// A durable pick waits for its stored start (gate) without a slot: the
			// starts of up to gateWindow picks are written in the same group commits
			// while the slots keep running. It takes a slot once handed over.
			continue
		}
		// An aged task waits with the level it was picked as, unless that is High
		// for a Normal one: High's ring is for the slots only High may take.
		as := max(k.buckets.PickedAs(), min(lvl, queue.Normal))
		r.take(as)
		if it.h == nil {
			picked = append(picked, pick{l: it.l, lvl: as})
		} else {
			picked = append(picked, pick{a: it.h.cur, lvl: as})
		}
	}
	k.flushCounts()
	k.handOver(picked)
	clear(picked)
	k.picked = picked[:0]
}

// room is what dispatch may still pick per level: all is the free slots plus the
// lookahead, less the picks waiting at the level and above; other is the same
// within the slots Normal and Low may use (Config.Reserve), for Normal and Low.
type room struct {
	all, other [queue.NumLevels]int
}

// mask returns the levels whose slots are not all taken (room.other).
func (r *room) mask() queue.Mask {
	m := queue.AllLevels
	for l := queue.Normal; l < queue.NumLevels; l++ {
		if r.other[l] <= 0 {
			m &^= 1 << l
		}
	}
	return m
}

// above returns the levels of higher priority than l that have room.
func (r *room) above(l queue.Level) queue.Mask {
	var m queue.Mask
	for h := queue.High; h < l; h++ {
		if r.all[h] > 0 {
			m |= 1 << h
		}
	}
	return m
}

// take accounts for a pick of level l: it waits ahead of every level at or
// below it.
func (r *room) take(l queue.Level) {
	for x := l; x < queue.NumLevels; x++ {
		r.all[x]--
		if l != queue.High {
			r.other[x]--
		}
	}
}

// flushCounts applies the counts the loop gathered: submitted and started
// tasks, and the tickets of tasks that left their bucket. It runs before any
// task reaches an executor, so a reader never sees a task end that was not
// counted as submitted and started.
func (k *Kernel) flushCounts() {
	for l := range queue.NumLevels {
		if n := k.pendSubmitted[l]; n > 0 {
			k.m.submitted[l].Add(n)
			k.pendSubmitted[l] = 0
		}
		if n := k.pendStarted[l]; n > 0 {
			k.m.started[l].Add(n)
			k.pendStarted[l] = 0
		}
		if n := k.pendRelease[l]; n > 0 {
			k.release(queue.Level(l), n)
			k.pendRelease[l] = 0
		}
	}
	if k.lightStarts > 0 {
		k.budget.firstN(k.now, k.lightStarts)
		k.lightStarts = 0
	}
}

// pick is an attempt (or a light task, a nil) the loop chose to run, and its
// level: handOver reads it here rather than in the task's record, a cache line it
// does not touch otherwise.
type pick struct {
	a   *attempt
	l   light
	lvl queue.Level
}

// handOver moves picked attempts into the run queue and wakes or starts an
// executor for them.
func (k *Kernel) handOver(picked []pick) {
	if len(picked) == 0 {
		return
	}
	q := &k.rq
	var wake [8]*executor
	nwake, spawn := 0, 0
	q.mu.Lock()
	// Durable picks handed over after their start was stored may exceed the slots
	// and the lookahead (see gate): grow the rings rather than lose one.
	// Executors that found the run queue empty may have parked: new work for an
	// empty queue wakes one even while others keep popping (see runq.chainWake),
	// unless one of them popped a moment ago and is coming back for more.
	wasEmpty := q.queued() == 0 && !q.cycling(k.nowMono)
	for _, r := range q.rings {
		grow(r, len(picked))
	}
	for _, p := range picked {
		_ = q.rings[p.lvl].Push(ritem{a: p.a, l: p.l})
	}
	// One wake-up at a time (unless the one on the way is overdue), and none while
	// executors keep popping what was already queued: each woken executor wakes the
	// next while work waits (runq.chainWake).
	if q.chainWake(k.nowMono, wasEmpty) {
		w, sp := q.takeForWake(k.nowMono)
		if w != nil {
			wake[0], nwake = w, 1
		}
		if sp {
			spawn = 1
		}
	}
	q.mu.Unlock()
	for i := range nwake {
		wake[i].wake <- struct{}{}
	}
	for range spawn {
		k.execWG.Add(1)
		go k.runExecutor(newExecutor(), nil)
	}
}

// start accounts for an attempt about to be handed to the run queue. It reports
// false when the attempt must wait for its start to be stored first (a durable task
// in acknowledged mode, see gate).
func (k *Kernel) start(h *Handle, a *attempt) bool {
	k.pendRelease[h.ticket()]++
	k.freed = true
	from := k.setState(h, Running)
	// A new task's first attempt is number 1: known without reading a.n, whose
	// cache line the loop does not touch otherwise (a recovered durable task's first
	// attempt may be a later one).
	n := int32(1)
	if a != &h.first || h.dur != nil {
		n = a.n
	}
	h.attempts.Store(n)
	if n == 1 {
		k.budget.first(k.now)
	}
	k.pendStarted[h.bucket]++
	if h.dur != nil {
		k.journalStart(h, a)
	}
	if h.timeout > 0 {
		k.schedule(a, timerTimeout, k.now.Add(h.timeout))
	}
	if k.events != nil {
		k.emit(h, from, Running, a, nil)
	}
	if h.dur != nil && k.dur.j.every == 0 {
		k.gate(a)
		return false
	}
	return true
}

// grow makes room for n more values in r.
func grow(r *queue.Ring[ritem], n int) {
	if r.Len()+n > r.Cap() {
		_ = r.Resize(max(2*r.Cap(), r.Len()+n))
	}
}

// gate holds a durable attempt back until the journal stored its start: a task runs
// only once the store knows it runs, so a crash re-runs only tasks the store shows
// Running (at least once, and no more than the attempts in flight). Up to gateWindow
// attempts wait so at once, without holding slots: their starts share group commits
// while the slots keep running. (A crash counts such an attempt whether or not its
// function had begun.) In periodic snapshot mode nothing waits for a commit.
func (k *Kernel) gate(a *attempt) {
	if k.gated == nil {
		k.gated = make(map[*attempt]struct{})
	}
	k.gated[a] = struct{}{}
	k.jbuf[len(k.jbuf)-1].start = a // the OpStart journalStart just added
}

// ungate hands attempts whose start the journal stored to the run queue.
func (k *Kernel) ungate(as []*attempt) {
	picked := k.picked[:0]
	for _, a := range as {
		if _, ok := k.gated[a]; !ok {
			continue // Close ended it meanwhile
		}
		delete(k.gated, a)
		picked = append(picked, pick{a: a, lvl: a.h.bucket})
	}
	k.handOver(picked)
	clear(picked)
	k.picked = picked[:0]
}

// settleAttempt handles an attempt an executor handed back.
func (k *Kernel) settleAttempt(a *attempt) {
	h := a.h
	if a.zombie != nil {
		k.zombieReturned(a)
	}
	if a.settled {
		return // timed out or closed earlier; the caller already knows
	}
	if a.tkind == timerTimeout {
		k.wheel.Cancel(a.timer)
		a.tkind = timerNone
	}
	k.m.observe(0, h.bucket, time.Duration(a.startAt-h.submitAt), time.Duration(a.endAt-a.startAt))
	err := a.err
	var pe *PanicError
	switch {
	case err == nil:
		k.m.succeeded[h.bucket].Inc()
		k.end(h, Succeeded, nil)
		recycle(h, a)
	case h.cancelErr != nil:
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, h.cancelErr)
	case errors.As(err, &pe):
		// A panic is a bug; retrying it rarely helps. It ends the task Failed.
		k.m.panics[h.bucket].Inc()
		k.m.failed[h.bucket].Inc()
		k.end(h, Failed, err)
		recycle(h, a)
	default:
		k.retryOrEnd(h, a, err, Failed)
	}
}

// retryOrEnd schedules the next attempt if the policy and the budget allow, and
// otherwise ends the task in state final with err.
func (k *Kernel) retryOrEnd(h *Handle, a *attempt, err error, final State) {
	p := h.retry
	if p == nil {
		p = k.rcl.retry[h.bucket]
	}
	more := !IsPermanent(err) && int(a.n) < p.MaxAttempts
	if more && !k.draining && !k.closing &&
		(h.batch == nil || !h.batch.canceled()) && k.budget.allow(k.now) {
		na := &attempt{h: h, n: a.n + 1}
		na.ctx.a = na
		na.ctx.parent = a.ctx.parent
		h.cur = na
		k.waiting[h.bucket].Add(1) // a retry re-enters without a ticket check (growBucket)
		h.evicts = false           // ...and holds a ticket of its own level
		k.m.retried[h.bucket].Inc()
		at := k.now.Add(k.backoff(p, int(a.n), err))
		if h.dur != nil {
			k.journalRetry(h, at, err)
		}
		k.toWheel(h, na, Retrying, at, err)
		return
	}
	if more && h.dur != nil && (k.draining || k.closing) {
		// The process stops, not the task: the store keeps it for a retry by the next
		// kernel, after its backoff.
		k.journalRetry(h, k.now.Add(k.backoff(p, int(a.n), err)), err)
		h.dur.keepLive = true
	}
	if final == TimedOut {
		k.m.timedOut[h.bucket].Inc()
	} else {
		k.m.failed[h.bucket].Inc()
	}
	k.end(h, final, err)
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
	k.live--
	if h.named {
		k.unindex(h)
	}
	if h.dur != nil {
		k.journalEnd(h, to, err)
	}
	if k.events != nil {
		k.emit(h, from, to, h.cur, err)
	}
	if !h.pooled {
		h.finish(err)
	}
	if h.batch != nil {
		k.batchMemberDone(h, err)
	}
}

// onTimeout handles the timeout entry of a running attempt.
func (k *Kernel) onTimeout(a *attempt) {
	h := a.h
	q := &k.rq
	q.mu.Lock()
	if a.finished {
		q.mu.Unlock() // its completion is on its way
		return
	}
	if !a.started {
		q.mu.Unlock() // still in the run queue: the timeout counts from the start
		k.schedule(a, timerTimeout, k.now.Add(h.timeout))
		return
	}
	if dl := k.at(a.startAt).Add(h.timeout); dl.After(k.now) {
		q.mu.Unlock()
		k.schedule(a, timerTimeout, dl)
		return
	}
	detach := q.zombies < q.maxZombies
	if detach {
		a.detached = true
		q.zombies++
		q.running--
		if h.prio != High {
			q.runningOther--
		}
		q.workers--
	}
	startAt := a.startAt
	a.settled = true
	q.mu.Unlock()
	a.ctx.cancel(context.DeadlineExceeded)
	k.m.observe(0, h.bucket, time.Duration(startAt-h.submitAt), time.Duration(k.nowMono-startAt))
	if h.onTimeout != nil {
		f, n := h.onTimeout, int(a.n)
		if !k.sidePool.submit(func() { f(n) }) {
			k.m.onTimeoutDropped.Inc()
		}
	}
	if detach {
		k.zombieStarted(a)
	}
	k.retryOrEnd(h, a, ErrTimeout, TimedOut)
}

// handleCtrl applies one control message.
func (k *Kernel) handleCtrl(m ctrlMsg) {
	switch m.kind {
	case ctrlCancel:
		k.cancel(m.h, ErrCanceled)
	case ctrlCancelBatch:
		m.b.mu.Lock()
		members := m.b.members // submitters append; the ones taken in so far suffice
		m.b.mu.Unlock()
		for _, h := range members {
			k.cancel(h, m.b.cause())
		}
	case ctrlUpdate:
		k.apply(m.rc)
		k.rc.Store(m.rc)
		m.ack <- nil
	case ctrlShutdown:
		k.beginDrain()
	case ctrlClose:
		k.closeAll()
	case ctrlStarted:
		k.ungate(m.as)
	case ctrlEvict:
		if k.evictNewestLow() {
			m.ack <- nil
		} else {
			m.ack <- ErrQueueFull
		}
	case ctrlRecover:
		if k.draining || k.closing {
			for _, h := range m.hs {
				k.abortDurable(h)
			}
			return
		}
		for _, h := range m.hs {
			k.index(h)
			k.backlog[h.bucket] = append(k.backlog[h.bucket], h)
		}
	case ctrlCancelID:
		m.count <- k.cancelID(m.id)
	}
}

// cancel ends or cancels one task, whatever its state.
func (k *Kernel) cancel(h *Handle, err error) {
	switch State(h.state.Load()) {
	case Delayed, Retrying:
		a := h.cur
		k.wheel.Cancel(a.timer)
		a.tkind = timerNone
		k.delayed--
		k.release(h.ticket(), 1)
		k.freed = true
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, err)
	case Queued:
		if _, ok := k.buckets.Bucket(h.bucket).Remove(func(x qitem) bool { return x.h == h }); !ok {
			return // still in the intake: impossible, the intake is drained first
		}
		k.release(h.ticket(), 1)
		k.freed = true
		k.m.canceled[h.bucket].Inc()
		k.end(h, Canceled, err)
	case Running:
		if h.cancelErr == nil {
			h.cancelErr = err
		}
		h.cur.ctx.cancel(context.Canceled)
	}
}

// publish makes loop state visible to Stats, gauges and blocked submitters.
func (k *Kernel) publish() {
	k.flushCounts()
	m := k.m
	for l := range queue.NumLevels {
		m.depth[l].Store(int64(k.buckets.Bucket(queue.Level(l)).Len()))
	}
	k.evictable.Store(int64(k.buckets.Bucket(queue.Low).Len()))
	m.delayed.Store(int64(k.delayed))
	k.rq.mu.Lock()
	wake, spawn := k.checkStall()
	k.rq.mu.Unlock()
	if wake != nil {
		wake.wake <- struct{}{}
	}
	if spawn {
		k.execWG.Add(1)
		go k.runExecutor(newExecutor(), nil)
	}
	if k.freed {
		k.freed = false
		if k.roomWaiters.Load() > 0 {
			k.roomMu.Lock()
			close(k.roomCh)
			k.roomCh = make(chan struct{})
			k.roomMu.Unlock()
		}
	}
	k.flushEvents()
	if len(k.jbuf) > 0 {
		k.dur.j.add(k.jbuf)
		clear(k.jbuf)
		k.jbuf = k.jbuf[:0]
	}
}

// checkStall restarts the executors' wake-up chain when it stopped too early:
// work an executor could take waits in the run queue, a slot and an executor are
// free, nobody is on the way (or is overdue), and nobody took any work for
// overdue. That happens when the
// executors awake, which damped the chain while they kept popping short tasks
// (runq.chainWake), all took long ones. It sets stallAt for park while the
// condition may come. Called with runq.mu held, at the end of each pass.
func (k *Kernel) checkStall() (wake *executor, spawn bool) {
	q := &k.rq
	if !q.poppable() || q.running >= q.limit || q.stopping || (len(q.idle) == 0 && q.workers >= q.limit) {
		k.seenPops, k.seenAt, k.stallAt = q.pops, k.nowMono, 0
		return nil, false
	}
	if q.pops != k.seenPops {
		k.seenPops, k.seenAt = q.pops, k.nowMono
	} else if k.nowMono-k.seenAt >= overdue && q.needsWake(k.nowMono) {
		wake, spawn = q.takeForWake(k.nowMono)
		k.seenAt = k.nowMono
	}
	k.stallAt = k.seenAt + overdue
	return wake, spawn
}
