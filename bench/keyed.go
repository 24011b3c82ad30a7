package bench

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel"
)

// KeyLimits are the limits each key of the groups scenario gets: at most
// Concurrency attempts running at once and Rate starts per second, with a
// bucket of Burst.
type KeyLimits struct {
	Concurrency int
	Rate        float64
	Burst       int
}

// BreakerSpec is the circuit breaker the groups scenario asks for on the keys
// of its guarded tasks ([KeyedTask.Guarded]), in the kernel's terms
// ([kernel.BreakerConfig]). An executor without breakers ignores it.
type BreakerSpec struct {
	Window       time.Duration
	MinCalls     int
	FailureRatio float64
	OpenFor      time.Duration
	MaxOpenFor   time.Duration
	Probes       int
}

// KeyedConfig is what a keyed executor is built for.
type KeyedConfig struct {
	// Conc is the executor's concurrency: workers or MaxConcurrency.
	Conc int
	// Queue bounds the tasks waiting, where the executor has such a bound.
	Queue int
	// PerKey limits each key.
	PerKey KeyLimits
	// Breaker guards the keys of guarded tasks; nil for none.
	Breaker *BreakerSpec
	// OnBreaker, if not nil, is called with each change of state of a key's
	// breaker that the executor reports, in order, from one goroutine.
	OnBreaker func(BreakerChange)
}

// BreakerChange is a change of state of one key's breaker.
type BreakerChange struct {
	Time  time.Time
	Key   string
	State kernel.BreakerState
}

// KeyedTask is one unit of work for [KeyedExecutor.Submit].
type KeyedTask struct {
	// Key is the task's key (an upstream host).
	Key string
	// Guarded puts the task under the breaker of KeyedConfig.Breaker.
	Guarded bool
	// Timeout bounds the attempt: Run's ctx is done after it. If zero, none.
	Timeout time.Duration
	// Run is the work; it runs once at most.
	Run func(ctx context.Context) error
}

// KeyedExecutor runs tasks under per-key limits. Implementations are safe for
// concurrent use by several submitters.
type KeyedExecutor interface {
	// Submit queues t behind the other tasks of its key; it may wait for room.
	Submit(t KeyedTask) error
	// Wait blocks until every accepted task has ended (ran, or was refused
	// after acceptance, as by an open breaker). Call it once, after the last
	// submission.
	Wait()
	// Close releases the executor. It is called once, after Wait.
	Close()
}

// Groups of the ax keyed executor: the plain keys and the guarded ones.
const (
	groupHosts   = "hosts"
	groupGuarded = "guarded"
)

// Dropper is implemented by keyed executors that keep tasks waiting while a
// key's breaker is open: the groups scenario drops them once its arrivals are
// over, so that a run ends although its failing key never recovers.
type Dropper interface {
	// DropGuarded cancels the guarded tasks that have not ended; a task
	// running then may end canceled or run to its end.
	DropGuarded()
}

// axKeyed adapts a kernel whose groups enforce the per-key limits.
type axKeyed struct {
	k        *kernel.Kernel  // immutable
	ctx      context.Context // immutable: ends blocking submissions
	accepted atomic.Int64
	mu       sync.Mutex
	guarded  []*kernel.Handle // guarded by mu: the guarded tasks, for DropGuarded
}

var (
	_ KeyedExecutor   = (*axKeyed)(nil)
	_ breakerReporter = (*axKeyed)(nil)
	_ Dropper         = (*axKeyed)(nil)
)

// breakerReporter is implemented by keyed executors that hold breakers and
// report their changes (KeyedConfig.OnBreaker).
type breakerReporter interface{ reportsBreakers() }

func (a *axKeyed) reportsBreakers() {}

// newAxKeyed builds a kernel with the groups hosts (cfg.PerKey) and guarded
// (cfg.PerKey and cfg.Breaker, whose tasks wait while it is open: the
// default), one attempt per task.
func newAxKeyed(ctx context.Context, cfg KeyedConfig) (KeyedExecutor, error) {
	lim := kernel.Limits{Concurrency: cfg.PerKey.Concurrency}
	if cfg.PerKey.Rate > 0 {
		lim.Rate = kernel.Rate{N: 1, Per: time.Duration(float64(time.Second) / cfg.PerKey.Rate), Burst: cfg.PerKey.Burst}
	}
	guarded := kernel.GroupConfig{PerKey: lim}
	if b := cfg.Breaker; b != nil {
		guarded.Breaker = &kernel.BreakerConfig{
			Window: b.Window, MinCalls: b.MinCalls, FailureRatio: b.FailureRatio,
			OpenFor: b.OpenFor, MaxOpenFor: b.MaxOpenFor, Probes: b.Probes,
		}
	}
	once := kernel.RetryPolicy{MaxAttempts: 1}
	kc := kernel.Config{
		MaxConcurrency: cfg.Conc,
		Capacity:       kernel.ByPriority[int]{High: cfg.Queue, Normal: cfg.Queue, Low: cfg.Queue},
		Retry:          kernel.ByPriority[kernel.RetryPolicy]{High: once, Normal: once, Low: once},
		Groups:         map[string]kernel.GroupConfig{groupHosts: {PerKey: lim}, groupGuarded: guarded},
	}
	if on := cfg.OnBreaker; on != nil {
		kc.OnEvent = func(ev kernel.Event) {
			if ev.Note == kernel.NoteBreaker {
				on(BreakerChange{Time: ev.Time, Key: ev.Key, State: ev.Breaker})
			}
		}
	}
	k, err := kernel.New(kc)
	if err != nil {
		return nil, err
	}
	return &axKeyed{k: k, ctx: ctx}, nil
}

func (a *axKeyed) Submit(t KeyedTask) error {
	kt := kernel.Task{Group: groupHosts, Key: t.Key, Timeout: t.Timeout, Run: t.Run}
	if !t.Guarded && t.Timeout == 0 {
		if err := a.k.Go(a.ctx, kt); err != nil {
			return refusal(err)
		}
		a.accepted.Add(1)
		return nil
	}
	// A task with a timeout (an HTTP call) goes through Submit: its Handle is
	// never recycled, whereas the kernel recycles a Go task's record, context
	// included, once Run returns, and net/http's dialing goroutine may read the
	// request's context after that.
	if t.Guarded {
		kt.Group = groupGuarded
	}
	h, err := a.k.Submit(a.ctx, kt)
	if err != nil {
		return refusal(err)
	}
	a.accepted.Add(1)
	if t.Guarded {
		a.mu.Lock()
		a.guarded = append(a.guarded, h)
		a.mu.Unlock()
	}
	return nil
}

// DropGuarded cancels the guarded tasks that have not ended.
func (a *axKeyed) DropGuarded() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.guarded {
		h.Cancel()
	}
	a.guarded = nil
}

// Wait polls the kernel's count of ended tasks until it reaches the accepted count.
func (a *axKeyed) Wait() {
	want := uint64(a.accepted.Load())
	for {
		st := a.k.Stats()
		if st.Terminal() >= want {
			return
		}
		runtime.Gosched()
		time.Sleep(200 * time.Microsecond)
	}
}

func (a *axKeyed) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = a.k.Shutdown(ctx)
	_ = a.k.Close()
}

// breakerLog records the changes of the breakers' states.
type breakerLog struct {
	mu      sync.Mutex
	changes []BreakerChange
}

func (l *breakerLog) add(c BreakerChange) {
	l.mu.Lock()
	l.changes = append(l.changes, c)
	l.mu.Unlock()
}

func (l *breakerLog) all() []BreakerChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]BreakerChange(nil), l.changes...)
}
