package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// saturationClass is one priority's part of an open-loop priority mix
// (saturation, flood): its tasks last work × [Params.Work] and arrive at load
// times the rate the executor would complete them at alone (Conc / their
// duration).
type saturationClass struct {
	work, load float64
}

// saturationMixOf is a scenario's open-loop priority mix. Each task's
// duration is its class's, or with a spread s drawn uniformly (seeded by
// [Params.Seed]) from [1-s, 1+s] times it, so that slots do not free in step.
// With a timeout, each task runs under that many times its class's duration.
type saturationMixOf struct {
	classes [numPriorities]saturationClass
	spread  float64 // in [0, 1); zero: every task of a class lasts the same
	timeout float64 // zero: no timeout
}

// saturationMix is the saturation workload: Low saturates the executor three
// times over, Normal and High would fill a fifth and a twentieth of it.
var saturationMix = saturationMixOf{classes: [numPriorities]saturationClass{
	High:   {work: 1.0 / 50, load: 0.05},
	Normal: {work: 1.0 / 10, load: 0.20},
	Low:    {work: 1, load: 3},
}}

// saturationExecutors are the executors saturation measures: ax with and
// without a reservation for High, the strict-priority ideal, and pools with
// one FIFO (bounded and blocking, or unbounded).
var saturationExecutors = []string{"ax", "ax-reserve", "priopool", "chanpool", "pond", "workerpool"}

func saturationScenario() Scenario {
	return Scenario{
		Name: "saturation",
		Key:  "wait_p99_us_high",
		Doc: "Low tasks of 50 ms arriving at 3× capacity, Normal of 5 ms at 20 %, High of 1 ms at 5 %, concurrency 500, for 4 s: " +
			"submit→start per priority from the intended arrival, dispatch shares and Low's longest wait, beside the ideal (the time between completions); " +
			"on ax, ax-reserve, priopool, chanpool, pond and workerpool",
		Defaults: Params{Conc: 500, Work: 50 * time.Millisecond, Duration: 4 * time.Second},
		Fix:      fixSaturation,
		Accepts:  func(f Factory) bool { return slices.Contains(saturationExecutors, f.Name) },
		Run:      runSaturation,
	}
}

// runSaturation runs the saturation scenario's mix once on f.
func runSaturation(ctx context.Context, f Factory, p Params) (*Sample, error) {
	return runPriorityMix(ctx, f, p, saturationMix)
}

// saturationArrivals is one priority's arrivals in a saturation run.
type saturationArrivals struct {
	work time.Duration // each task's duration
	rate float64       // arrivals per second
	n    int           // arrivals in the run's duration
}

// saturationPlan returns each priority's arrivals of the saturation scenario for p.
func saturationPlan(p Params) [numPriorities]saturationArrivals {
	return mixPlan(saturationMix, p)
}

// mixPlan returns each priority's arrivals of mix for p: Low's rate is p.Rate
// (if zero, Low's load × Conc / its duration), the others follow mix.
func mixPlan(mix saturationMixOf, p Params) [numPriorities]saturationArrivals {
	var plan [numPriorities]saturationArrivals
	for pr := range numPriorities {
		c, a := mix.classes[pr], &plan[pr]
		a.work = max(time.Duration(float64(p.Work)*c.work), time.Microsecond)
		a.rate = c.load * float64(p.Conc) / a.work.Seconds()
		if pr == Low && p.Rate > 0 {
			a.rate = p.Rate
		}
		a.n = max(1, int(math.Ceil(a.rate*p.Duration.Seconds())))
	}
	return plan
}

// fixSaturation sets Rate to Low's arrival rate and N to the arrivals of
// every priority over Duration (the run's length; N given alone is not used).
func fixSaturation(p Params) Params { return fixMix(saturationMix, p) }

// fixMix is fixSaturation for any mix.
func fixMix(mix saturationMixOf, p Params) Params {
	if p.Work <= 0 || p.Conc <= 0 || p.Duration <= 0 {
		return p
	}
	plan := mixPlan(mix, p)
	p.Rate = plan[Low].rate
	p.N = 0
	for _, a := range plan {
		p.N += a.n
	}
	return p
}

// saturationTasks are one priority's tasks in a run, indexed by arrival. The
// generator writes refused and unsent, the task started and ended (ns since
// the run's start, atomically); all are read after Wait.
type saturationTasks struct {
	started, ended []int64
	refused        []bool // Submit refused the task
	unsent         []bool // still due when the arrivals ended: never submitted
}

// runPriorityMix runs one open-loop priority mix on f for p.Duration. Each
// task sleeps its duration; with a timeout in mix, it runs under it and
// counts as timed out when its context ends before its sleep does.
func runPriorityMix(ctx context.Context, f Factory, p Params, mix saturationMixOf) (*Sample, error) {
	if p.Work <= 0 || p.Duration <= 0 {
		return nil, fmt.Errorf("bench: a priority mix needs work > 0 and a duration > 0")
	}
	plan := mixPlan(mix, p)
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)
	if !f.Priorities {
		out.note("no priorities: every class waits in one FIFO")
	}

	var tasks [numPriorities]saturationTasks
	for pr, a := range plan {
		tasks[pr] = saturationTasks{
			started: make([]int64, a.n), ended: make([]int64, a.n),
			refused: make([]bool, a.n), unsent: make([]bool, a.n),
		}
	}
	end := p.Duration
	t0 := time.Now()
	smp := startSampler(ex, t0, true)
	// One generator per priority, so that a submitter the executor makes wait
	// (Low's, at 3× capacity) delays only its own priority's arrivals.
	var gens sync.WaitGroup
	var genErrs [numPriorities]error
	var timedOut atomic.Int64
	for pr := range numPriorities {
		a, ts := plan[pr], &tasks[pr]
		timeout := time.Duration(mix.timeout * float64(a.work))
		rng := rand.New(rand.NewPCG(p.Seed, uint64(pr)))
		gens.Go(func() {
			genErrs[pr] = OpenLoop(ctx, t0, a.n, a.rate, func(i int, _ time.Duration) {
				if time.Since(t0) >= end {
					ts.unsent[i] = true
					return
				}
				work := a.work
				if mix.spread > 0 {
					work = time.Duration(float64(work) * (1 - mix.spread + 2*mix.spread*rng.Float64()))
				}
				t := Task{Priority: pr, Timeout: timeout, Run: func(ctx context.Context) error {
					now := time.Since(t0)
					atomic.StoreInt64(&ts.started[i], max(1, int64(now)))
					// Past the end, queued tasks only drain: no figure needs them to work.
					var err error
					if now < end {
						if timeout > 0 {
							err = sleepCtx(ctx, work)
						} else {
							time.Sleep(work)
						}
					}
					// A timed-out task's function may still run here after its handle ended
					// (the kernel's zombies), past ex.Wait: atomic, as read below.
					atomic.StoreInt64(&ts.ended[i], int64(time.Since(t0)))
					if err != nil {
						timedOut.Add(1)
					}
					return err
				}}
				if ex.Submit(t) != nil {
					ts.refused[i] = true
				}
			})
		})
	}
	gens.Wait()
	ex.Wait()
	smp.finish(out)
	if err := errors.Join(genErrs[:]...); err != nil {
		return nil, err
	}

	// The saturated window: after the first tenth (when the slots and queues
	// fill), up to the end of the arrivals. Waits are those of the tasks due in
	// it; a task not started by its end counts with the time it had waited
	// then, a lower bound.
	lo, hi := int64(end)/10, int64(end)
	var starts [numPriorities]int64
	var totalStarts, completions, accepted, executed, rejected, censored int64
	lagged := false
	var recs []waitRec
	for pr := range numPriorities {
		a, ts := plan[pr], &tasks[pr]
		name := "_" + pr.String()
		interval := 1e9 / a.rate
		var waits []int64
		var rej, unstarted, uns int64
		for i := range a.n {
			due := int64(float64(i) * interval)
			st := atomic.LoadInt64(&ts.started[i])
			switch {
			case ts.refused[i]:
				rej++
				continue
			case ts.unsent[i]:
				uns++
			default:
				accepted++
				if st > 0 {
					executed++
				}
			}
			recs = append(recs, waitRec{pr: pr, due: due, start: st})
			if st >= lo && st <= hi {
				starts[pr]++
			}
			if en := atomic.LoadInt64(&ts.ended[i]); en >= lo && en <= hi {
				completions++
			}
			if due < lo {
				continue
			}
			if st > 0 && st <= hi {
				waits = append(waits, st-due)
			} else {
				waits = append(waits, hi-due)
				unstarted++
			}
		}
		QuantilesOf(waits).put(out.Metrics, "wait", name)
		out.Metrics["rejected"+name] = float64(rej)
		out.Metrics["unstarted"+name] = float64(unstarted)
		out.Metrics["unsubmitted"+name] = float64(uns)
		out.Metrics["arrivals_per_sec"+name] = a.rate
		totalStarts += starts[pr]
		rejected += rej
		censored += unstarted
		// A few arrivals due in the last instant are missed by any generator;
		// more than 1 % means the executor held the submitter back.
		lagged = lagged || 100*uns > int64(a.n)
	}
	if totalStarts > 0 {
		for pr := range numPriorities {
			out.Metrics["share_"+pr.String()] = float64(starts[pr]) / float64(totalStarts)
		}
	}
	span := float64(hi - lo)
	if completions > 0 {
		out.Metrics["ideal_wait_us"] = span / float64(completions) / 1e3
		out.Metrics["completions_per_sec"] = float64(completions) / (span / 1e9)
	}
	out.Metrics["rejected"] = float64(rejected)
	if mix.timeout > 0 {
		out.Metrics["timed_out"] = float64(timedOut.Load())
	}
	if censored > 0 {
		out.note("waits include the tasks not started when the arrivals ended, counted as the time they had waited then (a lower bound)")
	}
	if lagged {
		out.note("the executor made submitters wait: arrivals still due when the time was up were never submitted (unsubmitted), and count as waiting")
	}
	checkLost(out, accepted, executed)
	out.Series = append(out.Series, prioritySeries(recs, hi)...)
	return out, nil
}

// sleepCtx sleeps for d, or until ctx is done; it returns ctx.Err() then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
