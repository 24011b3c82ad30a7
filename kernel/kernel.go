package kernel

import (
	"context"
	"errors"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/queue"
)

// Kernel schedules tasks over a bounded pool of executors. Create it with [New];
// its methods are safe for concurrent use. Stop it with [Kernel.Shutdown] or
// [Kernel.Close].
type Kernel struct {
	clk   clock.Clock // immutable
	epoch time.Time   // immutable: the origin of mono times

	// cfgMu serialises Update, Shutdown and Close.
	cfgMu sync.Mutex
	cfg   Config // the user's config as last accepted (unresolved); guarded by cfgMu

	rc atomic.Pointer[resolved] // the resolved config; swapped by Update

	// lightCtx is the context of every light task (light.go): there is no record
	// to hold one of its own. Close cancels it after setting lightClosed.
	lightCtx    context.Context
	lightCancel context.CancelFunc
	lightClosed atomic.Bool

	_ cacheLinePad

	// Intake: submitters append under in.mu; only the loop drains.
	in struct {
		mu          spinMutex
		tasks       []qitem   // task records and light tasks, in submission order
		lazy        lazyQueue // delayed fire-and-forget tasks in their compact form
		ctrl        []ctrlMsg
		loopWaiting bool  // the loop parked and asked for a poke
		closed      bool  // Shutdown or Close began: refuse submissions
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
	_ cacheLinePad

	fastOpen atomic.Bool   // mirrors in.fast, read without the lock as a hint
	fastEnd  atomic.Int64  // mono: when the last fast submission that yielded returned
	pokeCh   chan struct{} // size 1: wakes the parked loop; a poke is never lost
	_        cacheLinePad

	// Admission tickets per bucket level: tasks waiting (queued, delayed, retrying).
	// Submitters take one with a CAS (lazy tasks from a reserve, see
	// takeLazyTicket); the loop gives it back when the task leaves its bucket for an
	// executor or ends.
	waiting   [queue.NumLevels]atomic.Int64
	evictable atomic.Int64 // queued Low tasks at the loop's last pass: a hint for evictForRoom
	// lazyReserve is set while in.lazyTickets may hold tickets: a submitter that
	// finds no room gives them back first (flushLazyTickets).
	lazyReserve atomic.Bool
	_           cacheLinePad

	// Room notification for blocking submitters.
	roomMu       sync.Mutex
	roomCh       chan struct{} // closed and replaced by the loop when room frees up
	roomWaiters  atomic.Int32
	roomSpinners atomic.Int32 // waiters yielding before they sleep (spinRoom)
	_            cacheLinePad

	rq runq
	_  cacheLinePad

	seq atomic.Uint64 // written by every submission: a line of its own
	_   cacheLinePad

	execWG   sync.WaitGroup // every executor goroutine, zombies included
	closedCh chan struct{}  // closed when Shutdown or Close begins
	closeCh  chan struct{}  // closed when Close begins; guarded by cfgMu until closed
	loopDone chan struct{}  // closed when the loop returns
	ready    chan struct{}  // closed when the loop first parks (see New)
	workDone chan struct{}  // closed when the last executor goroutine (zombies too) exits

	events   *eventQueue // nil without Config.OnEvent
	sidePool *sidePool   // OnTimeout callbacks and zombie stack dumps

	zmu  sync.Mutex
	zset map[*zombie]struct{} // zombies now; guarded by zmu
	m    *kernelMetrics
	dur  *durables // nil without Config.Store
	_    cacheLinePad

	loopState // loop-owned
}

// cacheLinePad separates fields that different goroutines write on every task,
// so that one writer does not steal the cache line another is using (false
// sharing): the submitters' intake and tickets, the executors' run queue, the
// loop's own state. 128 bytes, because neighbouring lines are often fetched in
// pairs.
type cacheLinePad [128]byte

// resolved is an immutable snapshot of the config with defaults applied, plus what
// submitters read on the hot path.
type resolved struct {
	cfg      Config
	capacity [queue.NumLevels]int64
	degrade  int64 // total waiting above which only High is admitted; 0 = never
	retry    [queue.NumLevels]*RetryPolicy
}

func newResolved(c Config) *resolved {
	r := &resolved{cfg: c}
	r.capacity[queue.High] = int64(c.Capacity.High)
	r.capacity[queue.Normal] = int64(c.Capacity.Normal)
	r.capacity[queue.Low] = int64(c.Capacity.Low)
	if c.DegradeAt < 1 {
		r.degrade = int64(c.DegradeAt * float64(c.totalCapacity()))
	}
	r.retry[queue.High] = &r.cfg.Retry.High
	r.retry[queue.Normal] = &r.cfg.Retry.Normal
	r.retry[queue.Low] = &r.cfg.Retry.Low
	return r
}

// levelOf maps a (normalized) priority to its bucket.
func levelOf(p Priority) queue.Level {
	switch p {
	case High:
		return queue.High
	case Low:
		return queue.Low
	default:
		return queue.Normal
	}
}

// New validates cfg, starts the kernel's loop and returns the kernel, ready for
// submissions. Executors start on demand, up to Config.MaxConcurrency.
func New(cfg Config) (*Kernel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := newResolved(cfg.withDefaults())
	c := &rc.cfg
	g, err := joinMetrics(c.Metrics, cfg.Metrics != nil, c.Name)
	if err != nil {
		return nil, err
	}
	k := &Kernel{
		clk:      c.Clock,
		epoch:    c.Clock.Now(),
		cfg:      cfg,
		pokeCh:   make(chan struct{}, 1),
		closedCh: make(chan struct{}),
		closeCh:  make(chan struct{}),
		loopDone: make(chan struct{}),
		ready:    make(chan struct{}),
		workDone: make(chan struct{}),
		roomCh:   make(chan struct{}),
	}
	k.lightCtx, k.lightCancel = context.WithCancel(context.Background())
	k.rc.Store(rc)
	if err := k.initLoop(rc); err != nil {
		g.leave(c.Name)
		return nil, err
	}
	k.m = newKernelMetrics(g, c.Name)
	if c.Store != nil {
		if err := k.initDurable(c); err != nil {
			g.leave(c.Name)
			return nil, err
		}
	}
	k.sidePool = newSidePool(c.OnTimeoutWorkers, 1024, k.m.callbackPanics)
	if c.OnEvent != nil {
		k.events = newEventQueue(c.OnEvent, c.EventBuffer, k.m.callbackPanics)
	}
	go k.loop()
	// Returned before the loop ran, a kernel would take its first tasks the slow
	// way: the fast lane opens as the loop parks. A burst arriving at once queued
	// behind the loop's first pass, and when the OS held the loop's thread back,
	// for a tick of 4 ms, hundreds of tasks waited with it: 2 runs in 10 of the
	// latency scenario lost their p99.9 to it (60-2,800 µs against 10-60 µs).
	<-k.ready
	g.activate(c.Name, k)
	return k, nil
}

// Metrics returns the kernel's metric set (Config.Metrics or the kernel's own). Its
// WritePrometheus writes the families of [Kernel.WritePrometheus], with the series
// of every kernel on the set.
func (k *Kernel) Metrics() *metrics.Set { return k.rc.Load().cfg.Metrics }

// mono returns the time on the kernel's clock as nanoseconds since the kernel
// started. On the real clock it reads only the monotonic clock, which is much
// cheaper than time.Now on many machines.
func (k *Kernel) mono() int64 { return int64(k.clk.Since(k.epoch)) }

// addMono returns the mono time m plus d >= 0, saturated at math.MaxInt64: a
// Delay of any size lies in the future, never wrapped into the past.
func addMono(m int64, d time.Duration) int64 {
	if s := m + int64(d); s >= m {
		return s
	}
	return math.MaxInt64
}

// at converts a mono time back to a time.Time.
func (k *Kernel) at(m int64) time.Time { return k.epoch.Add(time.Duration(m)) }

// poke wakes the loop if it is parked. It never blocks.
func (k *Kernel) poke() {
	select {
	case k.pokeCh <- struct{}{}:
	default:
	}
}

// control hands a control message to the loop.
func (k *Kernel) control(m ctrlMsg) {
	k.in.mu.Lock()
	k.in.ctrl = append(k.in.ctrl, m)
	wake := k.in.loopWaiting
	k.in.loopWaiting = false
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
}

// TrySubmit validates t and queues it without blocking. It returns [ErrQueueFull]
// or [ErrDegraded] when the kernel has no room for t's priority, [ErrClosed] after
// Shutdown or Close began, and a *ConfigError (joined) naming each bad field of t.
// Nothing is queued when it returns an error.
func (k *Kernel) TrySubmit(t Task) (*Handle, error) {
	return k.submit(noWait, &t, false)
}

// Submit is [Kernel.TrySubmit] that waits for room while the kernel is full. It
// returns ctx.Err() if ctx ends first, and ErrClosed if the kernel stops. The
// task's context carries ctx's values, unless t.Values is set, but not its
// cancellation or deadline (see [Task.Values]).
func (k *Kernel) Submit(ctx context.Context, t Task) (*Handle, error) {
	return k.submit(ctx, &t, false)
}

// TryGo is [Kernel.TrySubmit] for fire-and-forget work: no Handle is returned. The
// task's outcome still shows in Stats, metrics and events. TryGo does not
// allocate: the function must not use its context after it returned.
//
// A task due now, without a timeout (its own or its priority's DefaultTimeout)
// or a Retry of its own, while no OnEvent listens, travels as a 24-byte value
// with no record at all (a light task): the cheapest way through the kernel. Its
// context is shared with the kernel's other light tasks: it has no deadline and
// ends when Close begins. It gets a record only if its function fails and its
// priority's retry policy allows another attempt. Any other task's record is
// recycled once it ended. A task with a Delay or an At waits in a compact form (32
// to 56 bytes) and gets its full record only when it comes due.
func (k *Kernel) TryGo(t Task) error {
	_, err := k.submit(noWait, &t, true)
	return err
}

// Go is [Kernel.Submit] for fire-and-forget work. Its ctx only bounds the wait for
// room: the task's context does not carry ctx's values, so that a task without
// them may travel light ([Kernel.TryGo]); set t.Values to pass them on.
func (k *Kernel) Go(ctx context.Context, t Task) error {
	_, err := k.submit(ctx, &t, true)
	return err
}

// noWait, passed as the context of submit, admit and acquireSome, means: do not
// wait for room, refuse at once.
var noWait context.Context

// submit validates, admits and hands one task to the loop. ctx noWait means do
// not wait for room. A delayed fire-and-forget task that fits a lazyTask travels
// and waits as one (see lazy.go); every other task gets its full record now.
func (k *Kernel) submit(ctx context.Context, t *Task, pooled bool) (*Handle, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	if t.Values == nil && !pooled && carriesValues(ctx) {
		t.Values = ctx
	}
	prio := t.Priority.normalize()
	lvl := levelOf(prio)
	rc := k.rc.Load()
	if pooled && t.ID == "" && t.Delay == 0 && t.At.IsZero() && t.Retry == nil && t.Values == nil && k.events == nil &&
		taskTimeout(t, prio, rc) == 0 {
		return nil, k.submitLight(ctx, t, prio, lvl, rc)
	}
	fast := k.fastOpen.Load() && t.ID == "" && t.Delay == 0 && t.At.IsZero() && k.events == nil &&
		(t.Timeout == NoTimeout || (t.Timeout == 0 && rc.cfg.DefaultTimeout.Get(prio) == 0))
	lazy := pooled && k.lazyFits(t)
	if lazy {
		// The usual way of a lazy task: its ticket comes from the intake's reserve.
		// Without room, it is admitted below like any task (it may wait, evict or be
		// refused), then queued with the ticket it got.
		if err := k.enqueueLazy(t, prio, lvl, false, rc); err != errNoTicket { //nolint:errorlint // sentinel of enqueueLazy's own
			return nil, err
		}
	}
	var evicts bool
	var err error
	if !fast {
		if evicts, err = k.admit(ctx, lvl, 1, rc, true); err != nil {
			return nil, err
		}
	}
	if lazy && !evicts {
		if err := k.enqueueLazy(t, prio, lvl, true, rc); err != nil {
			k.release(lvl, 1)
			return nil, err
		}
		return nil, nil
	}
	var h *Handle
	if pooled {
		h = handlePool.Get().(*Handle)
		h.pooled = true
	} else {
		h = &Handle{}
	}
	k.initHandle(h, t, prio, rc, nil)
	if fast {
		if k.runFast(h) {
			if pooled {
				return nil, nil
			}
			return h, nil
		}
		// The lane closed meanwhile: the usual way.
		if evicts, err = k.admit(ctx, lvl, 1, rc, true); err != nil {
			if pooled {
				*h = Handle{}
				handlePool.Put(h)
			}
			return nil, err
		}
	}
	h.evicts = evicts
	if !k.enqueue(h) {
		k.release(h.ticket(), 1)
		return nil, ErrClosed
	}
	if pooled {
		return nil, nil
	}
	return h, nil
}

// initHandle fills a task record from t. It reads the clock once.
func (k *Kernel) initHandle(h *Handle, t *Task, prio Priority, rc *resolved, b *Batch) {
	h.k = k
	h.id = t.ID
	h.named = t.ID != ""
	h.seq = k.seq.Add(1)
	h.prio = prio
	h.bucket = levelOf(prio)
	h.run = t.Run
	h.onTimeout = t.OnTimeout
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
	parent := context.Background()
	switch {
	case b != nil:
		parent = b.ctx
	case t.Values != nil:
		parent = context.WithoutCancel(t.Values)
	}
	h.initFirst(parent)
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

// runFast starts a new task without the loop, if the loop opened the fast lane and
// a slot is free: it hands the attempt straight to the run queue and wakes an
// executor, as the loop would. It reports false, changing nothing, otherwise.
//
// The lane exists for latency. A task that goes through the loop waits for the
// loop's goroutine to be scheduled, and on a busy machine the OS sometimes holds
// that thread back for milliseconds (an execution trace showed the loop's P making
// no progress for ~4 ms while submitters spun on the other): every task submitted
// meanwhile waited too. The loop still decides: it opens the lane only as it
// parks with nothing queued — empty buckets, no backlog, no drain — so the one
// candidate to run next is the arriving task, and it closes the lane as soon as it
// wakes. Only tasks the loop needs to see start this way are excluded: delayed
// ones, ones with a timeout (a wheel entry), and all while OnEvent listens. The
// loop counts the tasks started here at its next pass (runq.fastStarted).
func (k *Kernel) runFast(h *Handle) bool {
	return k.runFastItem(h, light{lvl: h.bucket}, h.submitAt)
}

// runFastItem is runFast for a task record h or, h nil, the light task l. now is
// the task's submission time.
func (k *Kernel) runFastItem(h *Handle, l light, now int64) bool {
	k.in.mu.Lock()
	if !k.in.fast || len(k.in.tasks) > 0 || k.in.closed {
		k.in.mu.Unlock()
		return false
	}
	q := &k.rq
	q.mu.Lock()
	high := l.lvl == queue.High
	if q.stopping || q.running+q.queued() >= q.limit ||
		(!high && q.runningOther+q.otherLen() >= q.otherLimit) {
		q.mu.Unlock()
		k.in.fast = false
		k.fastOpen.Store(false)
		k.in.mu.Unlock()
		return false
	}
	// Counted before it can run and end (and h be recycled).
	k.m.submitted[l.lvl].Inc()
	k.m.started[l.lvl].Inc()
	it := ritem{l: l}
	if h != nil {
		it = ritem{a: h.cur}
		h.placed = true
		h.state.Store(uint32(Running))
		h.attempts.Store(1)
	}
	r := q.rings[l.lvl]
	grow(r, 1)
	_ = r.Push(it)
	q.fastStarted++
	// As in the loop's hand-over, wake one executor only if none is on its way:
	// each woken executor wakes the next while tasks wait. (Waking one per queued
	// task shortened the latency tail a little but cost a goroutine wake-up per
	// task in bursts: no-op throughput fell by a third.)
	var wake *executor
	spawn := false
	if q.needsWakeWithin(now, fastOverdue) {
		wake, spawn = q.takeForWake(now)
	}
	// Yield to the executor woken for this task, or on its way (see below), unless
	// the submissions come in a burst: a mean gap (over about 16 of them) under
	// yieldGap. A burst is better spread over the other P than handed over task by
	// task.
	// The gap is counted from when the last fast submission returned: a yield
	// must not make the next gap look long, or a burst would keep yielding.
	gap := now - max(k.in.lastFast, k.fastEnd.Load())
	k.in.gapMean += (min(max(gap, 0), int64(time.Millisecond)) - k.in.gapMean) / 16
	k.in.lastFast = now
	yield := q.coming > 0 && k.in.gapMean > yieldGap
	q.mu.Unlock()
	k.in.mu.Unlock()
	if wake != nil {
		wake.wake <- struct{}{}
	}
	if spawn {
		k.execWG.Add(1)
		go k.runExecutor(newExecutor(), nil)
	}
	if yield {
		// As a send on an unbuffered channel does: the woken executor waits on this
		// P, and a submitter that kept submitting would keep it waiting until the
		// other P takes it (the runtime steals a just-woken goroutine only after a
		// pause that lasts ~50 µs on a VM). At 100,000 tasks/s this halved the p99
		// and cut the p99.9 by three. In a burst it cost half the throughput.
		runtime.Gosched()
		k.fastEnd.Store(k.mono())
	}
	return true
}

// fastOverdue is how long an executor woken for waiting work may take to arrive
// before a fast-lane submitter wakes another (the loop and the executors wait
// overdue). The lane is open only while the loop is parked with nothing queued,
// so a task that finds one on its way finds it late: at 100,000 tasks/s, 1 in
// 100 waited the full overdue (20 µs) for an executor that the OS held back,
// which set the p99. An extra wake-up here is cheap, as the load is light.
const fastOverdue = int64(3 * time.Microsecond)

// spinRoom is how many times a submitter waiting for room yields its P, checking
// for room after each, before it sleeps until the loop frees some. A submitter
// that slept was woken by the loop onto the loop's own P, behind the executors
// the loop had just woken there: on a 2-core machine a full kernel ran its
// submitter, its loop and its executors in turn on one P while the other idled
// (an execution trace of a no-op burst showed it). A yielding submitter lets the
// others run where it was, and is picked up by the idle P: the burst used both
// cores. It costs a few microseconds of a core per wait, and only one waiter
// spins at a time.
const spinRoom = 256

// yieldGap is the mean gap between fast-lane submissions above which a
// submitter yields its P to the executor woken for its task (runFastItem).
const yieldGap = int64(time.Microsecond)

// submitLight submits t as a light task (see light.go): a fire-and-forget task,
// due now, without a timeout, a Retry of its own or an event listener.
func (k *Kernel) submitLight(ctx context.Context, t *Task, prio Priority, lvl queue.Level, rc *resolved) error {
	l := light{run: t.Run, lvl: lvl}
	if k.fastOpen.Load() {
		l.at = k.mono()
		if k.runFastItem(nil, l, l.at) {
			return nil
		}
	}
	evicts, err := k.admit(ctx, lvl, 1, rc, true)
	if err != nil {
		return err // a refusal does not read the clock
	}
	if l.at == 0 {
		l.at = k.mono()
	}
	if evicts {
		// A task holding an evicted Low task's ticket travels on a record, which
		// knows which ticket to give back (Handle.ticket).
		h := handlePool.Get().(*Handle)
		h.pooled = true
		k.initHandle(h, t, prio, rc, nil)
		h.evicts = true
		if !k.enqueue(h) {
			k.release(queue.Low, 1)
			*h = Handle{}
			handlePool.Put(h)
			return ErrClosed
		}
		return nil
	}
	k.in.mu.Lock()
	if k.in.closed {
		k.in.mu.Unlock()
		k.release(lvl, 1)
		return ErrClosed
	}
	k.in.tasks = append(k.in.tasks, qitem{l: l})
	wake := k.in.loopWaiting
	k.in.loopWaiting = false
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
	return nil
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
// intake (see lazyFits), reading the clock once for its submission and due times.
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
	// page of the chunk not touched yet, complete while the clock is read, where
	// they used to hold up the unlock. 1,000,000 far-future tasks in a fresh
	// process: 130 → 108 ns a task (12 runs each, alternated); 4 submitters at
	// once: 145-170 → 115-125 ns, so the longer hold costs less than it saves.
	e := k.in.lazy.slot()
	e.t.run, e.t.meta = t.Run, meta
	now := k.mono()
	due, _ := k.dueOf(t, now)
	e.t.submitAt, e.due = now, due
	k.in.lazy.commit(due)
	wake := k.in.loopWaiting && (due < k.in.wakeAt || k.in.lazy.n >= lazyBatch)
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

// lazyTicketBatch is how many tickets the intake takes at once for lazy tasks
// while their level has plenty of room.
const lazyTicketBatch = 64

// takeLazyTicket gives a lazy task of level lvl its ticket, from the intake's
// reserve if it holds one, and reports false if the level has no room. A ticket
// costs a compare-and-swap on the level's count, shared by every submitter and by
// the loop; under the intake's lock, which a lazy task takes anyway, a reserve
// spares that for all but one in lazyTicketBatch: on the far-future timers
// benchmark, a lazy task's two atomic operations less (this and the submitted
// counter, see in.lazySubmitted) took a quarter off its cost.
//
// The reserve holds tickets no task uses, so it must never cost a task its room.
// Any submission that finds no room gives it back first (flushLazyTickets), before
// it waits, evicts or is refused; and it is taken only while the level has room
// for twice the batch, so that a submitter already waiting for room, woken when
// some frees up, finds it. Called with in.mu held.
func (k *Kernel) takeLazyTicket(lvl queue.Level, rc *resolved) bool {
	if k.in.lazyTickets[lvl] > 0 {
		k.in.lazyTickets[lvl]--
		return true
	}
	if k.waiting[lvl].Load()+2*lazyTicketBatch <= rc.capacity[lvl] {
		// Set before the tickets are taken: a submitter refused for them meanwhile
		// sees it, and takes them back once this lock is free.
		if !k.lazyReserve.Load() {
			k.lazyReserve.Store(true)
		}
		if k.acquireIfRoom(lvl, lazyTicketBatch, 2*lazyTicketBatch, rc) == nil {
			k.in.lazyTickets[lvl] = lazyTicketBatch - 1
			return true
		}
	}
	return k.tryAcquire(lvl, 1, rc) == nil
}

// flushLazyTickets gives back the tickets the intake holds in reserve for lazy
// tasks (takeLazyTicket) and reports whether there were any.
func (k *Kernel) flushLazyTickets() bool {
	if !k.lazyReserve.Load() {
		return false
	}
	k.in.mu.Lock()
	freed := k.releaseLazyTickets()
	k.in.mu.Unlock()
	return freed
}

// releaseLazyTickets is flushLazyTickets with in.mu held.
func (k *Kernel) releaseLazyTickets() bool {
	k.lazyReserve.Store(false)
	freed := false
	for l := range queue.NumLevels {
		if n := k.in.lazyTickets[l]; n > 0 {
			k.release(queue.Level(l), n)
			k.in.lazyTickets[l] = 0
			freed = true
		}
	}
	return freed
}

// intakeCounts returns what the intake holds that the loop's figures do not show
// yet: the tasks submitted so far per level (the submitted counters plus the lazy
// tasks the loop has not counted in them, read together under the intake's lock,
// so that the sum never goes back), and the lazy tasks waiting in the intake,
// delayed tasks the loop has not taken in.
func (k *Kernel) intakeCounts() (submitted [queue.NumLevels]uint64, lazies int) {
	k.in.mu.Lock()
	defer k.in.mu.Unlock()
	for l := range queue.NumLevels {
		submitted[l] = k.m.submitted[l].Get() + k.in.lazySubmitted[l]
	}
	return submitted, k.in.lazy.n
}

// Update changes the configuration while the kernel runs. fn edits a copy of the
// config last accepted; the result is validated and, if valid, applied by the loop
// before Update returns. A bad update returns the errors and changes nothing.
// MaxConcurrency, Quotas, Reserve, AgeAfter, Capacity, DegradeAt, EvictLow,
// DefaultTimeout, Retry, RetryBudget, MaxZombies and ZombieGrace may change; Tick,
// OnTimeoutWorkers, EventBuffer, Clock, Name, Metrics, Logger, OnEvent and the
// store's fields may not (an update that changes them is refused). Lowering
// MaxConcurrency lets running tasks finish; no new one starts until the running
// count is below the new limit.
func (k *Kernel) Update(fn func(*Config)) error {
	if fn == nil {
		return errors.New("kernel: Update: fn must not be nil")
	}
	k.cfgMu.Lock()
	defer k.cfgMu.Unlock()
	if k.isClosed() {
		return ErrClosed
	}
	next := k.cfg
	fn(&next)
	if err := next.Validate(); err != nil {
		return err
	}
	var errs []error
	fixed := func(field string, changed bool) {
		if changed {
			errs = append(errs, &ConfigError{Field: "Config." + field, Reason: "cannot change while the kernel runs"})
		}
	}
	old := k.cfg
	fixed("Tick", next.Tick != old.Tick)
	fixed("OnTimeoutWorkers", next.OnTimeoutWorkers != old.OnTimeoutWorkers)
	fixed("EventBuffer", next.EventBuffer != old.EventBuffer)
	fixed("Clock", next.Clock != old.Clock)
	fixed("Name", next.Name != old.Name)
	fixed("Metrics", next.Metrics != old.Metrics)
	fixed("Logger", next.Logger != old.Logger)
	fixed("OnEvent", funcPtr(next.OnEvent) != funcPtr(old.OnEvent))
	fixed("Store", next.Store != old.Store)
	fixed("SnapshotEvery", next.SnapshotEvery != old.SnapshotEvery)
	fixed("StoreTimeout", next.StoreTimeout != old.StoreTimeout)
	fixed("StoreBatch", next.StoreBatch != old.StoreBatch)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cur := k.rc.Load()
	n := next.withDefaults()
	n.Clock, n.Metrics = cur.cfg.Clock, cur.cfg.Metrics
	rc := newResolved(n)
	ack := make(chan error, 1)
	k.control(ctrlMsg{kind: ctrlUpdate, rc: rc, ack: ack})
	select {
	case err := <-ack:
		if err != nil {
			return err
		}
	case <-k.loopDone:
		return ErrClosed
	}
	k.cfg = next
	return nil
}

func funcPtr(f func(Event)) uintptr {
	if f == nil {
		return 0
	}
	return reflect.ValueOf(f).Pointer()
}
