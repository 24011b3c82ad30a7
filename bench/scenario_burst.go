package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// rejectProbes is how many refused submissions the burst scenario times to
// measure the cost of a refusal.
const rejectProbes = 100_000

func burstScenario() Scenario {
	return Scenario{
		Name: "burst",
		Key:  "submit_ns_per_task",
		Doc:  "100,000 tasks of 1 ms submitted as fast as possible: submit time, accepted / rejected / executed, lost; ns per refusal when full",
		Defaults: Params{
			N: 100_000, Conc: 500, Work: time.Millisecond,
		},
		Run: runBurst,
	}
}

func runBurst(ctx context.Context, f Factory, p Params) (*Sample, error) {
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)

	var accepted, executed atomic.Int64
	t0 := time.Now()
	smp := startSampler(ex, t0, false)

	// A non-blocking executor first: fill it with tasks held at a gate, then
	// time submissions that can only be refused.
	if f.Mode == NonBlocking {
		if err := probeRejections(ctx, ex, p, out, &accepted, &executed); err != nil {
			ex.Wait()
			smp.finish(out)
			return nil, err
		}
	}

	work := p.Work
	task := func() {
		if work > 0 {
			time.Sleep(work)
		}
		executed.Add(1)
	}
	var rejected int64
	tb := time.Now()
	for i := range p.N {
		if i&1023 == 0 && ctx.Err() != nil {
			break
		}
		if err := ex.Go(task); err != nil {
			rejected++
			continue
		}
		accepted.Add(1)
	}
	submit := time.Since(tb)
	ex.Wait()
	el := time.Since(tb)
	smp.finish(out)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out.Metrics["submit_ms"] = float64(submit.Microseconds()) / 1e3
	out.Metrics["submit_ns_per_task"] = float64(submit.Nanoseconds()) / float64(p.N)
	out.Metrics["rejected"] = float64(rejected)
	out.Metrics["tasks_per_sec"] = float64(executed.Load()) / el.Seconds()
	checkLost(out, accepted.Load(), executed.Load())
	return out, nil
}

// probeRejections fills a non-blocking ex with tasks that wait at a gate
// until it refuses one, times rejectProbes further submissions (each should be
// refused), then opens the gate and waits for the gated tasks to finish.
func probeRejections(ctx context.Context, ex Executor, p Params, out *Sample, accepted, executed *atomic.Int64) error {
	// An accepted task is counted in wg after the call: it cannot end before
	// the gate opens, after the last call. Counting before every call and
	// taking it back on a refusal timed two atomic operations of the harness's
	// with each refusal (~10-30 ns, as much as some executors' own refusal).
	gate := make(chan struct{})
	var wg sync.WaitGroup
	gated := func() {
		<-gate
		executed.Add(1)
		wg.Done()
	}
	// Full means refusing fillRefusals submissions in a row: workers still
	// picking up their first gated task free a slot or two at the start.
	const fillRefusals = 1000
	limit := p.Conc + 4*p.Queue + rejectProbes // room enough for any queue we configure
	// Full twice: an executor that moves waiting tasks ahead into a run queue
	// (ax's lookahead) may free room for a moment after the first refusals; the
	// pause lets it settle, so the timed submissions below can only be refused.
	full := false
	for round := range 2 {
		if round == 1 {
			time.Sleep(20 * time.Millisecond)
		}
		full = false
		inRow := 0
		for range limit {
			if err := ex.Go(gated); err != nil {
				if !errors.Is(err, ErrRejected) {
					close(gate)
					return fmt.Errorf("bench: %w", err)
				}
				if inRow++; inRow == fillRefusals {
					full = true
					break
				}
				continue
			}
			inRow = 0
			wg.Add(1)
			accepted.Add(1)
		}
	}
	if !full {
		out.note(fmt.Sprintf("never refused a task in %d submissions: no refusal cost", limit))
	} else {
		refused := 0
		tr := time.Now()
		for range rejectProbes {
			if ex.Go(gated) != nil {
				refused++
				continue
			}
			wg.Add(1)
			accepted.Add(1)
		}
		el := time.Since(tr)
		out.Metrics["reject_ns_per_op"] = float64(el.Nanoseconds()) / rejectProbes
		if refused != rejectProbes {
			out.note(fmt.Sprintf("refusal probe: %d of %d submissions were accepted", rejectProbes-refused, rejectProbes))
		}
	}
	close(gate)
	wg.Wait()
	return ctx.Err()
}
