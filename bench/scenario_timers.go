package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// The timers scenario's shape.
const (
	timersNearSpan  = time.Second // near timers are due uniformly within this
	timersFarDelay  = time.Hour   // far-future timers
	timersIdleSpan  = time.Second // how long idle CPU is measured
	timersNearShare = 10          // near timers are N / timersNearShare
)

func timersScenario() Scenario {
	return Scenario{
		Name: "timers",
		Key:  "schedule_ns_per_op",
		Doc: "100,000 delayed tasks due within 1 s, then 1,000,000 far-future ones: schedule ns/op, bytes per pending task, " +
			"lateness p50/p99, idle CPU with the far ones pending; ax against time.AfterFunc",
		Defaults: Params{N: 1_000_000},
		// Executors that bound what waits (ax counts delayed tasks against its
		// capacity) must hold every timer of the run.
		Fix: func(p Params) Params {
			p.Queue = max(p.Queue, p.N+p.N/timersNearShare+1)
			return p
		},
		Accepts: func(f Factory) bool { return f.Delays },
		Run:     runTimers,
	}
}

func noopTimer() {}

func runTimers(ctx context.Context, f Factory, p Params) (*Sample, error) {
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	d, ok := ex.(Delayer)
	if !ok {
		return nil, fmt.Errorf("bench: %s does not schedule delays itself", f.Name)
	}
	out := newSample()

	// Near: lateness and schedule cost of timers that fire.
	m := max(1, p.N/timersNearShare)
	rng := rand.New(rand.NewPCG(p.Seed, 0x7133))
	delays := make([]time.Duration, m)
	for i := range delays {
		delays[i] = time.Duration(rng.Int64N(int64(timersNearSpan)))
	}
	// due[i] is written before timer i is scheduled and fired[i] by its func;
	// both are read after wg.Wait.
	due := make([]int64, m)
	fired := make([]int64, m)
	var wg sync.WaitGroup
	wg.Add(m)
	t0 := time.Now()
	// Each near timer has a func of its own (it records when it fired), made
	// before the timed loop in the executor's own form (DelayPreparer), one
	// allocation for every executor: the closures are the caller's, and what is
	// timed is the scheduling call alone, as with the far timers' shared func.
	// Made inside the loop, a fresh process's first 100,000 allocations (new
	// spans, GC assists while the heap grows from nothing) were timed with it:
	// ~400 ns per timer here, more than ax's scheduling. Wrapped by ax's
	// adapter inside the loop, a second allocation per timer was timed as ax's.
	body := func(i int) {
		fired[i] = int64(time.Since(t0))
		wg.Done()
	}
	dp := delayPreparerOf(ex, d)
	tasks := make([]any, m)
	for i := range tasks {
		tasks[i] = dp.Prepare(body, i)
	}
	ts := time.Now()
	for i, task := range tasks {
		due[i] = int64(time.Since(t0) + delays[i])
		if err := dp.AfterPrepared(delays[i], task); err != nil {
			return nil, fmt.Errorf("bench: schedule: %w", err)
		}
	}
	nearCost := time.Since(ts)
	if err := waitCtx(ctx, &wg); err != nil {
		return nil, err
	}
	late := make([]int64, m)
	for i := range late {
		late[i] = fired[i] - due[i]
	}
	q := QuantilesOf(late)
	out.Metrics["lateness_p50_us"] = q.P50
	out.Metrics["lateness_p99_us"] = q.P99
	out.Metrics["lateness_max_us"] = q.Max
	out.Metrics["schedule_ns_per_op_near"] = float64(nearCost.Nanoseconds()) / float64(m)

	// Far: memory and schedule cost of timers that stay pending, and the CPU
	// the process burns while they do.
	ms0 := memStats(true)
	ts = time.Now()
	for range p.N {
		if err := d.After(timersFarDelay, noopTimer); err != nil {
			return nil, fmt.Errorf("bench: schedule: %w", err)
		}
	}
	farCost := time.Since(ts)
	ms1 := memStats(true)
	out.Metrics["schedule_ns_per_op"] = float64(farCost.Nanoseconds()) / float64(p.N)
	out.Metrics["bytes_per_timer"] = (float64(ms1.HeapAlloc) - float64(ms0.HeapAlloc)) / float64(p.N)
	out.Metrics["pending"] = float64(p.N)

	cpu0, wall0 := processCPU(), time.Now()
	idle := time.NewTimer(timersIdleSpan)
	select {
	case <-idle.C:
	case <-ctx.Done():
		idle.Stop()
		return nil, ctx.Err()
	}
	if cpu1 := processCPU(); cpu0 >= 0 && cpu1 >= cpu0 {
		out.Metrics["idle_cpu_pct"] = 100 * (cpu1 - cpu0).Seconds() / time.Since(wall0).Seconds()
	}
	return out, nil
}

// waitCtx waits for wg or ctx.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
