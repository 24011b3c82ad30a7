package bench

import (
	"context"
	"fmt"
	"time"
)

// latencyGen is how the latency scenario's generator waits for arrivals and
// makes its tasks.
type latencyGen uint8

const (
	// genPrepared paces with [OpenLoop] and makes each task before the clock
	// read in the executor's own form ([Preparer]): the hand-over alone is timed.
	genPrepared latencyGen = iota + 1
	// genYield paces with [OpenLoopYield], as a busy service thread waits, and
	// hands Go a fresh func() closure per arrival, as users hold their work:
	// an executor that runs another form of task (ax) wraps it in the timed call.
	genYield
)

func latencyScenario() Scenario {
	return Scenario{
		Name: "latency",
		Key:  "wait_p99_us",
		Doc:  "open-loop arrivals at 100,000/s, concurrency 500: submit→start percentiles, from the call and from the intended arrival",
		Defaults: Params{
			N: 200_000, Conc: 500, Rate: 100_000,
		},
		Run: func(ctx context.Context, f Factory, p Params) (*Sample, error) {
			return runLatency(ctx, f, p, genPrepared)
		},
	}
}

func latencyYieldScenario() Scenario {
	return Scenario{
		Name: "latency-yield",
		Key:  "wait_p99_us",
		Doc: "latency with the generator of a busy service thread: it sleeps until 300 µs before each arrival, then yields until due, " +
			"and hands every executor a fresh func() closure (ax wraps it into its task)",
		Defaults: Params{
			N: 200_000, Conc: 500, Rate: 100_000,
		},
		Run: func(ctx context.Context, f Factory, p Params) (*Sample, error) {
			return runLatency(ctx, f, p, genYield)
		},
	}
}

func runLatency(ctx context.Context, f Factory, p Params, gen latencyGen) (*Sample, error) {
	if p.Rate <= 0 {
		return nil, fmt.Errorf("bench: latency needs a rate > 0")
	}
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)

	// Every time is in ns since t0. submitted[i] is written by the generator
	// before the task is handed over, started[i] by the task: the hand-over
	// orders them, and both are read after Wait.
	submitted := make([]int64, p.N)
	started := make([]int64, p.N)
	t0 := time.Now()
	smp := startSampler(ex, t0, false)
	var rejected int64
	pr := preparerOf(ex)
	body := func(i int) { started[i] = int64(time.Since(t0)) }
	switch gen {
	case genYield:
		err = OpenLoopYield(ctx, t0, p.N, p.Rate, func(i int, _ time.Duration) {
			// The caller's own closure, made before the call; an executor that
			// wraps it does so in the timed call.
			task := func() { body(i) }
			submitted[i] = int64(time.Since(t0))
			if err := ex.Go(task); err != nil {
				started[i] = -1
				rejected++
			}
		})
	default:
		err = OpenLoop(ctx, t0, p.N, p.Rate, func(i int, _ time.Duration) {
			// The task is the caller's, made before the call in the executor's
			// own form (Preparer), one allocation for every executor: what is
			// timed from the call is the executor's hand-over alone. (An
			// allocation timed with it cost every executor its p99: the few that
			// refill a span or assist the GC take 10-60 µs here.)
			task := pr.Prepare(body, i)
			submitted[i] = int64(time.Since(t0))
			if err := pr.GoPrepared(task); err != nil {
				started[i] = -1
				rejected++
			}
		})
	}
	genEnd := time.Since(t0)
	ex.Wait()
	smp.finish(out)
	if err != nil {
		return nil, err
	}

	interval := 1e9 / p.Rate
	fromCall := make([]int64, 0, p.N)
	fromDue := make([]int64, 0, p.N)
	var executed int64
	for i, st := range started {
		if st <= 0 { // refused, or never run (counted as lost)
			continue
		}
		executed++
		fromCall = append(fromCall, st-submitted[i])
		fromDue = append(fromDue, st-int64(float64(i)*interval))
	}
	QuantilesOf(fromCall).put(out.Metrics, "wait", "")
	QuantilesOf(fromDue).put(out.Metrics, "wait_intended", "")
	out.Metrics["rate_achieved_per_sec"] = float64(p.N-1) / genEnd.Seconds()
	out.Metrics["rejected"] = float64(rejected)
	checkLost(out, int64(p.N)-rejected, executed)
	return out, nil
}
