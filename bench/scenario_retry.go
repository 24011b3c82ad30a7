package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// errUpstreamDown is what the upstream of retry-storm answers during its outage.
var errUpstreamDown = errors.New("bench: upstream down")

// retryStormPolicy is the retry policy every executor gets in retry-storm.
var retryStormPolicy = RetryPolicy{MaxAttempts: 4, Base: 10 * time.Millisecond, Multiplier: 2, Max: 100 * time.Millisecond}

// attemptBucket is the width of the attempts-per-second series.
const attemptBucket = 20 * time.Millisecond

func retryStormScenario() Scenario {
	return Scenario{
		Name: "retry-storm",
		Key:  "drain_ms",
		Doc: "10,000/s arrivals of 1 ms calls at concurrency 20; the upstream fails everything from 25 % to 50 % of the run, " +
			"tasks retry (4 attempts, 10 ms ×2 up to 100 ms, full jitter): amplification, attempts/s, time to drain",
		Defaults: Params{N: 20_000, Conc: 20, Rate: 10_000, Work: time.Millisecond},
		Run:      runRetryStorm,
	}
}

func runRetryStorm(ctx context.Context, f Factory, p Params) (*Sample, error) {
	if p.Rate <= 0 {
		return nil, fmt.Errorf("bench: retry-storm needs a rate > 0")
	}
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)

	window := p.arrivalWindow()
	downFrom, downTo := window/4, window/2
	maxA := retryStormPolicy.MaxAttempts
	// Attempts of one task run one after another, each ordered after the
	// previous by the executor; attempt times are read after Wait.
	attempts := make([]int64, p.N*maxA)
	count := make([]int, p.N)
	ended := make([]int64, p.N)
	succeeded := make([]bool, p.N)
	refused := make([]bool, p.N)
	var done atomic.Int64
	work := p.Work
	policy := retryStormPolicy
	t0 := time.Now()
	smp := startSampler(ex, t0, true)
	err = OpenLoop(ctx, t0, p.N, p.Rate, func(i int, _ time.Duration) {
		t := Task{
			Priority: Normal,
			Retry:    &policy,
			Run: func(context.Context) error {
				now := time.Since(t0)
				if count[i] < maxA {
					attempts[i*maxA+count[i]] = int64(now)
				}
				count[i]++
				time.Sleep(work)
				if now >= downFrom && now < downTo {
					return errUpstreamDown
				}
				return nil
			},
			Done: func(err error) {
				ended[i] = int64(time.Since(t0))
				succeeded[i] = err == nil
				done.Add(1)
			},
		}
		if ex.Submit(t) != nil {
			refused[i] = true
		}
	})
	ex.Wait()
	smp.finish(out)
	if err != nil {
		return nil, err
	}

	interval := 1e9 / p.Rate
	var arrivalsDown, attemptsDown, ok, failed, rejected int64
	var lastEnd int64
	var all []int64
	for i := range p.N {
		due := int64(float64(i) * interval)
		if due >= int64(downFrom) && due < int64(downTo) {
			arrivalsDown++
		}
		if refused[i] {
			rejected++
			continue
		}
		if ended[i] != 0 {
			if succeeded[i] {
				ok++
			} else {
				failed++
			}
			if due < int64(downTo) {
				lastEnd = max(lastEnd, ended[i])
			}
		}
		for k := range min(count[i], maxA) {
			a := attempts[i*maxA+k]
			all = append(all, a)
			if a >= int64(downFrom) && a < int64(downTo) {
				attemptsDown++
			}
		}
	}
	drain := max(0, lastEnd-int64(downTo))
	var attemptsAfter int64
	for _, a := range all {
		if a >= int64(downTo) && a < int64(downTo)+drain {
			attemptsAfter++
		}
	}
	out.Metrics["attempts_per_sec_outage"] = float64(attemptsDown) / (downTo - downFrom).Seconds()
	if drain > 0 {
		out.Metrics["attempts_per_sec_after"] = float64(attemptsAfter) / time.Duration(drain).Seconds()
	}
	// Amplification is the outage's attempt rate over its arrival rate: above 1,
	// retries add load while the upstream is down; a pool that is already
	// full cannot amplify, it queues (and drains later).
	if arrivalsDown > 0 {
		out.Metrics["amplification"] = float64(attemptsDown) / float64(arrivalsDown)
	}
	out.Metrics["drain_ms"] = float64(drain) / 1e6
	out.Metrics["attempts"] = float64(len(all))
	if accepted := int64(p.N) - rejected; accepted > 0 {
		out.Metrics["attempts_per_task"] = float64(len(all)) / float64(accepted)
	}
	out.Metrics["succeeded"] = float64(ok)
	out.Metrics["failed"] = float64(failed)
	out.Metrics["rejected"] = float64(rejected)
	checkLost(out, int64(p.N)-rejected, done.Load())
	out.Series = append(out.Series, attemptSeries(all))
	return out, nil
}

// attemptSeries counts attempt starts per bucket, as attempts per second.
func attemptSeries(all []int64) Series {
	s := Series{Name: "attempts_per_sec", Unit: "1/s"}
	if len(all) == 0 {
		return s
	}
	var last int64
	for _, a := range all {
		last = max(last, a)
	}
	counts := make([]float64, last/int64(attemptBucket)+1)
	for _, a := range all {
		counts[a/int64(attemptBucket)]++
	}
	for b, c := range counts {
		s.add(float64(b)*attemptBucket.Seconds(), c/attemptBucket.Seconds())
	}
	return s.thin(maxPoints)
}
