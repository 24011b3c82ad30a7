package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// The shape of the slow upstream, before Params.Shrink divides its times.
const (
	upstreamMin     = 50 * time.Millisecond // the fastest answer, and the Pareto scale
	upstreamMax     = 30 * time.Second      // the slowest answer that comes at all
	upstreamTimeout = 2 * time.Second       // each call's timeout
	upstreamAlpha   = 1.0                   // Pareto shape: P(delay > x) = (min/x)^alpha
	upstreamHang    = 0.02                  // share of calls never answered
	upstreamIgnore  = 0.005                 // share of tasks that ignore their ctx…
	upstreamIgnoreX = 5                     // …and give up only after this many timeouts
	upstreamHighPct = 10                    // every 10th task is High, the rest Low
)

func slowUpstreamScenario() Scenario {
	return Scenario{
		Name: "slow-upstream",
		Key:  "goodput_per_sec",
		Doc: "HTTP calls to 127.0.0.1 answering after 50 ms … 30 s (Pareto, shrunk 100×), 2 % never; " +
			"10 % High among a Low flood at concurrency 8: goodput, High p99, timeouts honoured, zombies",
		Defaults: Params{N: 8000, Conc: 8, Rate: 4000},
		Run:      runSlowUpstream,
	}
}

// upstreamCall is one task's draw: how long the upstream takes, and whether
// it never answers or the task ignores its context.
type upstreamCall struct {
	delay        time.Duration
	hang, ignore bool
}

func drawUpstream(p Params) []upstreamCall {
	rng := rand.New(rand.NewPCG(p.Seed, 0x5105))
	shrink := func(d time.Duration) time.Duration { return time.Duration(float64(d) / p.Shrink) }
	lo, hi := shrink(upstreamMin), shrink(upstreamMax)
	calls := make([]upstreamCall, p.N)
	for i := range calls {
		u := 1 - rng.Float64() // (0, 1]
		d := time.Duration(float64(lo) / math.Pow(u, 1/upstreamAlpha))
		calls[i] = upstreamCall{
			delay:  min(d, hi),
			hang:   rng.Float64() < upstreamHang,
			ignore: rng.Float64() < upstreamIgnore,
		}
	}
	return calls
}

func runSlowUpstream(ctx context.Context, f Factory, p Params) (*Sample, error) {
	if p.Rate <= 0 || p.Shrink <= 0 {
		return nil, fmt.Errorf("bench: slow-upstream needs rate > 0 and shrink > 0")
	}
	up, err := startUpstream(p.Conc * 2)
	if err != nil {
		return nil, err
	}
	defer up.close()
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)

	calls := drawUpstream(p)
	timeout := time.Duration(float64(upstreamTimeout) / p.Shrink)
	// Times in ns since t0. started[i] is written by task i's attempt, ended[i]
	// and errs[i] by its Done; all are read after Wait.
	started := make([]int64, p.N)
	ended := make([]int64, p.N)
	errs := make([]error, p.N)
	refused := make([]bool, p.N)
	var done atomic.Int64
	t0 := time.Now()
	smp := startSampler(ex, t0, true)
	err = OpenLoop(ctx, t0, p.N, p.Rate, func(i int, _ time.Duration) {
		c := calls[i]
		pr := Low
		if i%upstreamHighPct == 0 {
			pr = High
		}
		t := Task{
			Priority: pr,
			Timeout:  timeout,
			Run: func(ctx context.Context) error {
				started[i] = int64(time.Since(t0))
				if c.ignore { // a task that does not listen: it hangs past its timeout
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(context.Background(), upstreamIgnoreX*timeout)
					defer cancel()
				}
				return up.call(ctx, c.delay, c.hang)
			},
			Done: func(err error) {
				ended[i] = int64(time.Since(t0))
				errs[i] = err
				done.Add(1)
			},
		}
		if ex.Submit(t) != nil {
			refused[i] = true
		}
	})
	ex.Wait()
	el := time.Since(t0)
	smp.finish(out)
	if err != nil {
		return nil, err
	}

	interval := 1e9 / p.Rate
	var waits [numPriorities][]int64
	var overrun []int64
	var ok, timedOut, failed, rejected int64
	for i := range p.N {
		if refused[i] {
			rejected++
			continue
		}
		if ended[i] == 0 {
			continue // never ended: lost
		}
		pr := Low
		if i%upstreamHighPct == 0 {
			pr = High
		}
		if started[i] > 0 {
			waits[pr] = append(waits[pr], started[i]-int64(float64(i)*interval))
		}
		switch {
		case errs[i] == nil:
			ok++
		case errors.Is(errs[i], context.DeadlineExceeded):
			timedOut++
			if started[i] > 0 {
				overrun = append(overrun, max(0, ended[i]-started[i]-int64(timeout)))
			}
		default:
			failed++
		}
	}
	for _, pr := range []Priority{High, Low} {
		QuantilesOf(waits[pr]).put(out.Metrics, "wait", "_"+pr.String())
	}
	ov := QuantilesOf(overrun)
	out.Metrics["timeout_overrun_p99_ms"] = ov.P99 / 1e3
	out.Metrics["timeout_overrun_max_ms"] = ov.Max / 1e3
	out.Metrics["goodput_per_sec"] = float64(ok) / el.Seconds()
	out.Metrics["succeeded"] = float64(ok)
	out.Metrics["timed_out"] = float64(timedOut)
	out.Metrics["failed"] = float64(failed)
	out.Metrics["rejected"] = float64(rejected)
	out.Metrics["elapsed_ms"] = float64(el.Microseconds()) / 1e3
	checkLost(out, int64(p.N)-rejected, done.Load())
	return out, nil
}
