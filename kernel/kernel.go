package kernel

import (
	"context"
	"errors"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/kernel/internal/callback"
	"github.com/axsched/ax/kernel/internal/klog"
	"github.com/axsched/ax/kernel/internal/metricfam"
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
	// paused are the paused selectors (Stats.Paused): replaced whole by the loop.
	paused atomic.Pointer[[]Selector]

	// lightCtx is the context of every light task (light.go): there is no record
	// to hold one of its own. Close cancels it after setting lightClosed.
	lightCtx    context.Context
	lightCancel context.CancelFunc
	lightClosed atomic.Bool

	_ cacheLinePad

	in intake // submitters append under in.mu; only the loop drains
	_  cacheLinePad

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
	ticketsBack  atomic.Bool  // runq.tickets may hold tickets: a hint for reclaimTickets, set once per pass
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

	events   *callback.Queue[Event] // nil without Config.OnEvent
	hooks    Hooks                  // Config.Hooks; immutable
	ends     endQueue               // Task.OnEnd calls (onend.go)
	log      *klog.Log              // nil without Config.Logger
	sidePool *callback.Pool         // OnTimeout callbacks and zombie stack dumps
	// guarded holds the IDs of the goroutines running user code the kernel waits
	// for (callGuarded): a BackoffFunc, a Store method. Safe for concurrent use.
	guarded sync.Map

	zmu  sync.Mutex
	zset map[*zombie]struct{} // zombies now; guarded by zmu

	gpub metricfam.GroupSet // the published figures of each group; safe for concurrent use
	m    *kernelMetrics
	dur  *durables // nil without Config.Store
	// maxResult: the limit of SetResult (Config.MaxResult, lowered to the store's);
	// immutable once New returns.
	maxResult int
	_         cacheLinePad

	ls loopState // loop-owned: only the loop goroutine reads or writes it
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
	groups   map[string]*groupDef // Config.Groups resolved
}

func newResolved(c Config, prev *resolved) *resolved {
	r := &resolved{cfg: c}
	var pg map[string]*groupDef
	if prev != nil {
		pg = prev.groups
	}
	r.groups = resolveGroups(&r.cfg, pg)
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
	cfg.Groups = cloneGroups(cfg.Groups)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := newResolved(cfg.withDefaults(), nil)
	c := &rc.cfg
	g, err := joinMetrics(c.Metrics, cfg.Metrics != nil, c.Name)
	if err != nil {
		return nil, err
	}
	k := &Kernel{
		clk:       c.Clock,
		epoch:     c.Clock.Now(),
		cfg:       cfg,
		pokeCh:    make(chan struct{}, 1),
		closedCh:  make(chan struct{}),
		closeCh:   make(chan struct{}),
		loopDone:  make(chan struct{}),
		ready:     make(chan struct{}),
		workDone:  make(chan struct{}),
		roomCh:    make(chan struct{}),
		maxResult: c.MaxResult,
	}
	k.lightCtx, k.lightCancel = context.WithCancel(context.Background())
	k.rc.Store(rc)
	if err := k.initLoop(rc); err != nil {
		g.Leave(c.Name)
		return nil, err
	}
	k.m = newKernelMetrics(g, c.Name)
	k.log = klog.New(c.Logger, c.Clock, k.m.callbackPanics, k.m.logsDropped)
	if c.Store != nil {
		if err := k.initDurable(c); err != nil {
			k.log.Stop(nil)
			g.Leave(c.Name)
			return nil, err
		}
	}
	k.sidePool = callback.NewPool(c.OnTimeoutWorkers, 1024, k.m.callbackPanics)
	k.hooks = c.Hooks
	if c.OnEvent != nil {
		k.events = callback.NewQueue(c.OnEvent, c.EventBuffer, k.m.callbackPanics)
	}
	for name := range rc.groups {
		k.gpub.Get(name)
	}
	go k.loop()
	// Returned before the loop ran, a kernel would take its first tasks the slow
	// way: the fast lane opens as the loop parks. A burst arriving at once would
	// queue behind the loop's first pass, and wait with it whenever the OS holds
	// the loop's thread back.
	<-k.ready
	if k.dur != nil && k.dur.own != nil {
		k.dur.own.Start()
	}
	g.Activate(c.Name, k)
	return k, nil
}

// Metrics returns the kernel's metric set (Config.Metrics or the kernel's own). Its
// WritePrometheus writes the families of [Kernel.WritePrometheus], with the series
// of every kernel on the set.
func (k *Kernel) Metrics() *metrics.Set { return k.rc.Load().cfg.Metrics }

// Clock returns the kernel's time source: Config.Clock, or the real clock. A client
// that keeps its own timers beside the kernel (a scheduler, a rate limiter) reads it
// so that it follows the kernel's clock, a mock one in tests included.
func (k *Kernel) Clock() clock.Clock { return k.clk }

// Stopping returns a channel that is closed when Shutdown or Close begins: from then
// on the kernel refuses submissions with [ErrClosed]. A client that submits on its
// own goroutine (a scheduler) selects on it to stop with the kernel. It never
// blocks and returns the same channel at every call.
func (k *Kernel) Stopping() <-chan struct{} { return k.closedCh }

// Poll tells the kernel that tasks were added to its store's pool by a path other than
// its own submits (a durable schedule's fire, a transaction of the caller's that
// inserted pool tasks through the store): its claimer claims at once instead of at its
// next poll, which comes up to two seconds later when the pool was found empty. Poll
// never blocks and never waits for the claim; calls made while one is pending merge
// into it. Without a Config.Store that is a store.SharedStore it does nothing, and a
// Poll after Close is never acted on.
func (k *Kernel) Poll() {
	if d := k.dur; d != nil && d.own != nil {
		d.own.ClaimNow()
	}
}

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

// Update changes the configuration while the kernel runs. fn edits a copy of the
// config last accepted; the result is validated and, if valid, applied by the loop
// before Update returns. A bad update returns the errors and changes nothing.
// MaxConcurrency, Quotas, Reserve, AgeAfter, Capacity, DegradeAt, EvictLow,
// DefaultTimeout, Retry, RetryBudget, MaxZombies, ZombieGrace and Groups may change; Tick,
// OnTimeoutWorkers, EventBuffer, Clock, Name, Metrics, Logger, OnEvent, Hooks and the
// store's fields (Owner and Lease too) may not (an update that changes them is refused).
// Lowering MaxConcurrency lets running tasks finish; no new one starts until the
// running count is below the new limit. A group it adds releases the recovered
// durable tasks held for it (see [DurableTask.Group]).
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
	next.Groups = cloneGroups(k.cfg.Groups)
	fn(&next)
	next.Groups = cloneGroups(next.Groups) // the caller may keep the map it set
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
	fixed("MaxResult", next.MaxResult != old.MaxResult)
	fixed("Metrics", next.Metrics != old.Metrics)
	fixed("Logger", next.Logger != old.Logger)
	fixed("OnEvent", funcPtr(next.OnEvent) != funcPtr(old.OnEvent))
	fixed("Hooks", !callback.Same(next.Hooks, old.Hooks))
	fixed("Store", next.Store != old.Store)
	fixed("SnapshotEvery", next.SnapshotEvery != old.SnapshotEvery)
	fixed("StoreTimeout", next.StoreTimeout != old.StoreTimeout)
	fixed("StoreBatch", next.StoreBatch != old.StoreBatch)
	fixed("Owner", next.Owner != old.Owner)
	fixed("SharedPool", next.SharedPool != old.SharedPool)
	fixed("Lease", next.Lease != old.Lease)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cur := k.rc.Load()
	n := next.withDefaults()
	n.Clock, n.Metrics = cur.cfg.Clock, cur.cfg.Metrics
	rc := newResolved(n, cur)
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
	for name := range rc.groups {
		k.gpub.Get(name)
	}
	k.releaseGroups(rc)
	return nil
}

func funcPtr(f func(Event)) uintptr {
	if f == nil {
		return 0
	}
	return reflect.ValueOf(f).Pointer()
}
