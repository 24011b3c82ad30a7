package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// noopTask is the noop scenario's task. It counts nothing: an atomic add per
// task would be measured with the fastest executors (benchtest.Exercise is
// what shows that every executor runs each task it accepts).
func noopTask() {}

func noopScenario() Scenario {
	return Scenario{
		Name:     "noop",
		Key:      "tasks_per_sec",
		Doc:      "1,000,000 empty tasks at concurrency 500: tasks/s, ns, allocs and bytes per task, peaks",
		Defaults: Params{N: 1_000_000, Conc: 500},
		Accepts:  closedLoop,
		Run: func(ctx context.Context, f Factory, p Params) (*Sample, error) {
			return closedRun(ctx, f, p, noopTask)
		},
	}
}

func sleepScenario() Scenario {
	return Scenario{
		Name:     "sleep",
		Key:      "efficiency",
		Doc:      "200,000 tasks of 1 ms at concurrency 500: efficiency = tasks/s ÷ (conc / 1 ms)",
		Defaults: Params{N: 200_000, Conc: 500, Work: time.Millisecond},
		Accepts:  closedLoop,
		Run: func(ctx context.Context, f Factory, p Params) (*Sample, error) {
			work := p.Work
			var executed atomic.Int64
			s, err := closedRun(ctx, f, p, func() {
				time.Sleep(work)
				executed.Add(1)
			})
			if err != nil {
				return nil, err
			}
			checkLost(s, int64(p.N)-int64(s.Metrics["rejected"]), executed.Load())
			ideal := float64(p.Conc) / work.Seconds()
			s.Metrics["efficiency"] = s.Metrics["tasks_per_sec"] / ideal
			return s, nil
		},
	}
}

// closedRun submits p.N copies of task as fast as the executor takes them and
// waits for all: the closed-loop throughput of noop and sleep.
func closedRun(ctx context.Context, f Factory, p Params, task func()) (*Sample, error) {
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)

	ms0 := memStats(true)
	t0 := time.Now()
	smp := startSampler(ex, t0, false)
	var rejected int64
	for i := range p.N {
		if i&4095 == 0 && ctx.Err() != nil {
			break
		}
		if err := ex.Go(task); err != nil {
			rejected++
		}
	}
	ex.Wait()
	el := time.Since(t0)
	smp.finish(out)
	ms1 := memStats(false)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	n := float64(p.N)
	out.Metrics["tasks_per_sec"] = n / el.Seconds()
	out.Metrics["ns_per_task"] = float64(el.Nanoseconds()) / n
	out.Metrics["allocs_per_task"] = float64(ms1.Mallocs-ms0.Mallocs) / n
	out.Metrics["bytes_per_task"] = float64(ms1.TotalAlloc-ms0.TotalAlloc) / n
	out.Metrics["elapsed_ms"] = float64(el.Microseconds()) / 1e3
	out.Metrics["rejected"] = float64(rejected)
	return out, nil
}
