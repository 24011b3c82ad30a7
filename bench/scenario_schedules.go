package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The schedules scenario's shape.
const (
	schedIdleUnit    = time.Minute // idle schedules run every 1–60 of these
	schedIdleSpan    = time.Second // how long idle CPU is measured
	schedFireShare   = 20          // firing schedules are N / schedFireShare
	schedSpanMin     = time.Second // firing schedules' intervals before Shrink
	schedSpanMax     = 60 * time.Second
	schedShrink      = 40                     // default Shrink: intervals 25 ms–1.5 s
	schedSettle      = 300 * time.Millisecond // the window outlasts the last first target by this
	schedWakeSamples = 100                    // time.AfterFunc wake-ups measured
	schedWakeDelay   = 2 * time.Millisecond
)

func schedulesScenario() Scenario {
	return Scenario{
		Name: "schedules",
		Key:  "bytes_per_schedule",
		Doc: "N = 100,000 interval schedules at random 1–60 min (none due while measured): bytes per schedule " +
			"(heap and stacks) and idle CPU over 1 s; the process's timer wake-up after 2 ms and after 2–3 ms; then N/20 more at random 1–60 s ÷ shrink (default 40: 25 ms–1.5 s) firing " +
			"until each has fired: lateness p50/p99 against each schedule's own grid of targets, CPU per fire",
		Defaults:  Params{N: 100_000, Shrink: schedShrink},
		Schedules: true,
		Run:       runSchedules,
	}
}

// schedFire is what a firing schedule records: when it fired, and how late
// against its target.
type schedFire struct {
	at   int64 // since the run's start
	late int64
}

func runSchedules(ctx context.Context, f Factory, p Params) (*Sample, error) {
	ex, err := f.Schedules(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("bench: new %s: %w", f.Name, err)
	}
	defer ex.Close()
	out := newSample()
	rng := rand.New(rand.NewPCG(p.Seed, 0x5c4e))

	// Idle: memory and CPU of schedules that stay pending.
	idle := make([]time.Duration, p.N)
	for i := range idle {
		idle[i] = schedIdleUnit + time.Duration(rng.Int64N(int64(59*schedIdleUnit)))
	}
	g0 := runtime.NumGoroutine()
	ms0 := memStats(true)
	ts := time.Now()
	for _, d := range idle {
		if _, err := ex.Every(d, noopTimer); err != nil {
			return nil, fmt.Errorf("bench: schedule: %w", err)
		}
	}
	addCost := time.Since(ts)
	ms1 := memStats(true)
	g1 := runtime.NumGoroutine()
	n := float64(p.N)
	heap := float64(ms1.HeapAlloc) - float64(ms0.HeapAlloc)
	stacks := float64(ms1.StackInuse) - float64(ms0.StackInuse)
	out.Metrics["schedules"] = n
	out.Metrics["add_ns_per_op"] = float64(addCost.Nanoseconds()) / n
	out.Metrics["heap_bytes_per_schedule"] = heap / n
	out.Metrics["stack_bytes_per_schedule"] = stacks / n
	out.Metrics["bytes_per_schedule"] = (heap + stacks) / n
	out.Metrics["goroutines_per_schedule"] = float64(g1-g0) / n

	cpu0, wall0 := processCPU(), time.Now()
	if err := sleepCtx(ctx, schedIdleSpan); err != nil {
		return nil, err
	}
	if cpu1 := processCPU(); cpu0 >= 0 && cpu1 >= cpu0 {
		out.Metrics["idle_cpu_pct"] = 100 * (cpu1 - cpu0).Seconds() / time.Since(wall0).Seconds()
	}

	// The process's own timer wake-up, the floor of any lateness: for a delay of
	// whole milliseconds, and for delays at any phase of the millisecond (the
	// runtime's idle wait for a timer counts whole milliseconds on Linux).
	wake, err := wakeUps(ctx, nil)
	if err != nil {
		return nil, err
	}
	wq := QuantilesOf(wake)
	out.Metrics["wakeup_p50_us"] = wq.P50
	out.Metrics["wakeup_p99_us"] = wq.P99
	if wake, err = wakeUps(ctx, rng); err != nil {
		return nil, err
	}
	wq = QuantilesOf(wake)
	out.Metrics["wakeup_any_p50_us"] = wq.P50
	out.Metrics["wakeup_any_p99_us"] = wq.P99

	// Firing: lateness of each fire against its schedule's grid.
	m := max(1, p.N/schedFireShare)
	lo, hi := float64(schedSpanMin)/p.Shrink, float64(schedSpanMax)/p.Shrink
	ds := make([]time.Duration, m)
	for i := range ds {
		ds[i] = max(time.Millisecond, time.Duration(lo+rng.Float64()*(hi-lo)))
	}
	t0 := time.Now()
	var (
		mu    sync.Mutex
		fires = make([]schedFire, 0, 1024) // guarded by mu
	)
	firsts := make([]time.Time, m) // guarded by mu
	counts := make([]atomic.Int64, m)
	last := t0
	cpu0, wall0 = processCPU(), time.Now()
	for i, d := range ds {
		first, err := ex.Every(d, func() {
			now := time.Now()
			k := counts[i].Add(1) - 1
			mu.Lock()
			late := now.Sub(firsts[i].Add(time.Duration(k) * d))
			fires = append(fires, schedFire{at: int64(now.Sub(t0)), late: int64(late)})
			mu.Unlock()
		})
		if err != nil {
			return nil, fmt.Errorf("bench: schedule: %w", err)
		}
		// The first fire comes d (>= 1 ms) after Every returns; mu orders
		// this write before its read.
		mu.Lock()
		firsts[i] = first
		mu.Unlock()
		last = maxTime(last, first)
	}
	end := last.Add(schedSettle)
	if err := sleepCtx(ctx, time.Until(end)); err != nil {
		return nil, err
	}
	cpu1 := processCPU()
	wall := time.Since(wall0)
	mu.Lock()
	got := append([]schedFire(nil), fires...)
	mu.Unlock()
	stop := int64(end.Sub(t0))
	late := make([]int64, 0, len(got))
	for _, fr := range got {
		if fr.at <= stop {
			late = append(late, fr.late)
		}
	}
	unfired, overdue := 0, time.Duration(0)
	for i := range counts {
		k := counts[i].Load()
		if k == 0 {
			unfired++
		}
		overdue = max(overdue, end.Sub(firsts[i].Add(time.Duration(k)*ds[i])))
	}
	q := QuantilesOf(late)
	out.Metrics["firing_schedules"] = float64(m)
	out.Metrics["fires"] = float64(len(late))
	out.Metrics["unfired"] = float64(unfired)
	out.Metrics["lateness_p50_us"] = q.P50
	out.Metrics["lateness_p99_us"] = q.P99
	out.Metrics["lateness_max_us"] = q.Max
	out.Metrics["overdue_max_us"] = float64(overdue.Nanoseconds()) / 1e3
	if cpu0 >= 0 && cpu1 >= cpu0 {
		out.Metrics["fire_cpu_pct"] = 100 * (cpu1 - cpu0).Seconds() / wall.Seconds()
		if len(late) > 0 {
			out.Metrics["cpu_ns_per_fire"] = float64((cpu1 - cpu0).Nanoseconds()) / float64(len(late))
		}
	}
	if unfired > 0 {
		out.note(fmt.Sprintf("%d of %d firing schedules never fired in the window", unfired, m))
	}
	return out, nil
}

// wakeUps returns how late time.AfterFunc calls fired, one at a time: after
// schedWakeDelay, or, with rng, after schedWakeDelay plus a random part of a
// millisecond.
func wakeUps(ctx context.Context, rng *rand.Rand) ([]int64, error) {
	out := make([]int64, schedWakeSamples)
	ch := make(chan int64, 1)
	for i := range out {
		d := schedWakeDelay
		if rng != nil {
			d += time.Duration(rng.Int64N(int64(time.Millisecond)))
		}
		due := time.Now().Add(d)
		time.AfterFunc(d, func() { ch <- int64(time.Since(due)) })
		select {
		case out[i] = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
