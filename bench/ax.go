package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/axsched/ax/kernel"
)

// AxFactories returns the ax executors: ax (blocking Submit and Go), ax-nb
// (TrySubmit and TryGo, refusing with [ErrRejected] when a bucket is full)
// and ax-reserve (ax with 5 % of its slots reserved for High, in
// the saturation scenario only). They run a kernel with MaxConcurrency Conc,
// a Capacity of Queue per priority, one attempt per task unless the task has
// a retry policy, and every other setting at its default (quotas, retry
// budget, zombies). ax is also the keyed executor of the groups scenario
// ([Factory.Keyed]): a kernel whose groups hold the per-key limits, and the
// recurring scheduler of the schedules scenario ([Factory.Schedules]): a
// kernel at its defaults and a schedule.Scheduler whose schedules are
// schedule.Every.
func AxFactories() []Factory {
	return []Factory{
		{
			Name: "ax", Mode: Blocking, Priorities: true, Delays: true,
			Doc: "the ax kernel: Submit and Go wait for room (priorities, timeouts, delays and retries native)",
			New: func(ctx context.Context, p Params) (Executor, error) { return newAx(ctx, p, false, 0) },
			Keyed: func(ctx context.Context, _ Params, cfg KeyedConfig) (KeyedExecutor, error) {
				return newAxKeyed(ctx, cfg)
			},
			Schedules: func(context.Context, Params) (ScheduleExecutor, error) { return newAxSchedules() },
		},
		{
			Name: "ax-nb", Mode: NonBlocking, Priorities: true, Delays: true,
			Doc: "the ax kernel: TrySubmit and TryGo refuse with ErrQueueFull or ErrDegraded when full",
			New: func(ctx context.Context, p Params) (Executor, error) { return newAx(ctx, p, true, 0) },
		},
		{
			Name: "ax-reserve", Mode: Blocking, Priorities: true, Delays: true, Only: []string{"saturation"},
			Doc: "ax with Config.Reserve.High = 5 % of conc: slots only High may occupy (saturation only)",
			New: func(ctx context.Context, p Params) (Executor, error) {
				return newAx(ctx, p, false, reserveHigh(p.Conc))
			},
		},
	}
}

// reserveHigh returns the slots ax-reserve holds for High tasks out of conc:
// 5 %, at least one, and always leaving one to the other priorities (so none
// for conc 1).
func reserveHigh(conc int) int { return max(0, min(max(1, conc/20), conc-1)) }

// axExecutor adapts a *kernel.Kernel.
type axExecutor struct {
	k           *kernel.Kernel  // immutable
	ctx         context.Context // immutable: the run's; ends blocking submissions
	nonBlocking bool            // immutable

	quotas [3]float64 // immutable: the shares the kernel's quotas promise

	accepted atomic.Int64 // tasks the kernel took from Go and Submit, for Wait
	delayed  int64        // funcs the kernel took from After: one goroutine calls it (Delayer)
	watchers sync.WaitGroup
	watching atomic.Int64 // watcher goroutines alive, left out of peak_goroutines
	wrap     funcCache
}

var (
	_ Executor      = (*axExecutor)(nil)
	_ Stater        = (*axExecutor)(nil)
	_ Delayer       = (*axExecutor)(nil)
	_ Quoter        = (*axExecutor)(nil)
	_ Preparer      = (*axExecutor)(nil)
	_ DelayPreparer = (*axExecutor)(nil)
)

// newAx builds the adapter of a kernel for p that holds reserve slots
// for High tasks.
func newAx(ctx context.Context, p Params, nonBlocking bool, reserve int) (*axExecutor, error) {
	once := kernel.RetryPolicy{MaxAttempts: 1}
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: p.Conc,
		Capacity:       kernel.ByPriority[int]{High: p.Queue, Normal: p.Queue, Low: p.Queue},
		Retry:          kernel.ByPriority[kernel.RetryPolicy]{High: once, Normal: once, Low: once},
		Reserve:        kernel.Reserve{High: reserve},
	})
	if err != nil {
		return nil, err
	}
	// The default quotas (kernel.Config.Quotas): picks per cycle.
	h, n, l := 17.0, 2.0, 1.0
	sum := h + n + l
	return &axExecutor{k: k, ctx: ctx, nonBlocking: nonBlocking, quotas: [3]float64{h / sum, n / sum, l / sum}}, nil
}

// QuotaShares returns the shares the kernel's default quotas promise.
func (a *axExecutor) QuotaShares() [3]float64 { return a.quotas }

// refusal maps the kernel's refusals to ErrRejected, as the other non-blocking
// adapters return it: without wrapping, which would cost an allocation per refused
// task and be measured as the kernel's.
func refusal(err error) error {
	if err == kernel.ErrQueueFull || err == kernel.ErrDegraded { //nolint:errorlint // the kernel returns them unwrapped; errors.Is is the slow path below
		return ErrRejected
	}
	if errors.Is(err, kernel.ErrQueueFull) || errors.Is(err, kernel.ErrDegraded) {
		return ErrRejected
	}
	return err
}

func (a *axExecutor) Go(f func()) error { return a.goRun(a.wrap.get(f)) }

// Prepare makes the task that calls body(i) in the kernel's form, a
// func(context.Context) error, as an ax caller would have written it.
func (a *axExecutor) Prepare(body func(int), i int) any {
	return func(context.Context) error {
		body(i)
		return nil
	}
}

// GoPrepared runs a task made by Prepare.
func (a *axExecutor) GoPrepared(task any) error {
	return a.goRun(task.(func(context.Context) error))
}

func (a *axExecutor) goRun(run func(context.Context) error) error {
	t := kernel.Task{Run: run}
	var err error
	if a.nonBlocking {
		err = a.k.TryGo(t)
	} else {
		err = a.k.Go(a.ctx, t)
	}
	if err != nil {
		return refusal(err)
	}
	a.accepted.Add(1)
	return nil
}

func (a *axExecutor) Submit(t Task) error {
	kt := kernel.Task{
		Priority: kernelPriority(t.Priority),
		Timeout:  t.Timeout,
		Delay:    t.Delay,
		Run:      t.Run,
	}
	if r := t.Retry; r != nil {
		kt.Retry = &kernel.RetryPolicy{
			MaxAttempts: r.MaxAttempts, Base: r.Base, Multiplier: r.Multiplier, Max: r.Max,
			Jitter: kernel.JitterFull,
		}
	}
	if t.Done == nil {
		var err error
		if a.nonBlocking {
			err = a.k.TryGo(kt)
		} else {
			err = a.k.Go(a.ctx, kt)
		}
		if err != nil {
			return refusal(err)
		}
		a.accepted.Add(1)
		return nil
	}
	var h *kernel.Handle
	var err error
	if a.nonBlocking {
		h, err = a.k.TrySubmit(kt)
	} else {
		h, err = a.k.Submit(a.ctx, kt)
	}
	if err != nil {
		return refusal(err)
	}
	a.accepted.Add(1)
	// One goroutine per task waits for its end: the kernel tells a task's end
	// through its Handle only. It is this adapter's cost, not the kernel's, so
	// the sampler leaves it out of peak_goroutines (adapterGoroutines).
	done := t.Done
	a.watching.Add(1)
	a.watchers.Go(func() {
		defer a.watching.Add(-1)
		<-h.Done()
		done(outcome(h.Err()))
	})
	return nil
}

// adapterGoroutines returns the goroutines the adapter runs beside the kernel's.
func (a *axExecutor) adapterGoroutines() int { return int(a.watching.Load()) }

// outcome makes a kernel timeout match context.DeadlineExceeded, as [Task.Done] says.
func outcome(err error) error {
	if errors.Is(err, kernel.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
	}
	return err
}

func kernelPriority(p Priority) kernel.Priority {
	switch p {
	case High:
		return kernel.High
	case Low:
		return kernel.Low
	default:
		return kernel.Normal
	}
}

// Wait polls the kernel's count of ended tasks until it reaches the accepted
// count (the kernel's Shutdown would drain too, but abandons pending retries),
// then waits for the goroutines that deliver Done.
func (a *axExecutor) Wait() {
	want := uint64(a.accepted.Load() + a.delayed)
	pause := 20 * time.Microsecond
	for {
		st := a.k.Stats()
		if st.Terminal() >= want {
			break
		}
		if pause < 50*time.Microsecond {
			runtime.Gosched()
		} else {
			time.Sleep(pause)
		}
		pause = min(2*pause, time.Millisecond)
	}
	a.watchers.Wait()
}

func (a *axExecutor) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = a.k.Shutdown(ctx)
	_ = a.k.Close()
}

func (a *axExecutor) QueueDepth() int {
	st := a.k.Stats()
	return st.Queued.High + st.Queued.Normal + st.Queued.Low + st.Dispatched
}

func (a *axExecutor) Zombies() int { return a.k.Stats().Zombies }

// After schedules f on the kernel's timing wheel: a delayed fire-and-forget task.
func (a *axExecutor) After(d time.Duration, f func()) error {
	return a.afterRun(d, a.wrap.get(f))
}

// AfterPrepared schedules a task made by Prepare.
func (a *axExecutor) AfterPrepared(d time.Duration, task any) error {
	return a.afterRun(d, task.(func(context.Context) error))
}

func (a *axExecutor) afterRun(d time.Duration, run func(context.Context) error) error {
	if err := a.k.TryGo(kernel.Task{Delay: d, Run: run}); err != nil {
		return refusal(err)
	}
	a.delayed++
	return nil
}

// funcCache turns a func() into the func(context.Context) error the kernel runs,
// reusing the last wrapper while the same func value comes again (the noop,
// sleep, burst and timers scenarios submit one func many times). Without it each
// submission would allocate a closure that no pool taking a func() pays, and
// the allocation figures would measure this adapter instead of the kernel. A
// func seen once (a closure of its own per task) costs one closure, the least a
// wrapper can: it is cached only when it comes twice in a row.
type funcCache struct {
	last   atomic.Pointer[wrapped]
	missed atomic.Pointer[byte] // the key of the last func that missed the cache
}

type wrapped struct {
	key unsafe.Pointer // the func value's closure pointer: its identity
	run func(context.Context) error
}

func (c *funcCache) get(f func()) func(context.Context) error {
	key := *(*unsafe.Pointer)(unsafe.Pointer(&f))
	if w := c.last.Load(); w != nil && w.key == key {
		return w.run
	}
	// A copy of f made here, on the miss path only: capturing the parameter
	// itself would move it to the heap on every call, hits included.
	fn := f
	run := func(context.Context) error {
		fn()
		return nil
	}
	if c.missed.Swap((*byte)(key)) == (*byte)(key) {
		c.last.Store(&wrapped{key: key, run: run})
	}
	return run
}
