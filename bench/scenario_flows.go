package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// The flows scenario's pipeline: fetch → flowShards shards of clean → store.
const (
	flowShards = 64
	flowTasks  = flowShards + 2 // tasks per pipeline: fetch, the shards, store
	flowStages = 3
	// flowSpin is the CPU work of each task when Params.Work is zero: this
	// many rounds of an xorshift step (tens of microseconds).
	flowSpin = 20_000
)

func flowsScenario() Scenario {
	return Scenario{
		Name: "flows",
		Key:  "overhead_us_per_stage",
		Doc: "N = 200 runs of a 3-stage pipeline, fetch → 64 shards of clean → store, each task " +
			"20,000 xorshift steps of CPU (or a wait of -work), as a flow on ax (MaxConcurrency conc) and " +
			"by hand with errgroup (SetLimit(conc)) and channels, alternating in one process: wall time per " +
			"pipeline (p50), CPU per task, overhead per stage over the hand-written one",
		Defaults: Params{N: 200, Conc: 4},
		Accepts:  func(f Factory) bool { return f.Name == "ax" },
		Run:      runFlows,
	}
}

// flowWork is one task's work: p.Work of waiting, or flowSpin steps of CPU.
// It returns a value the pipeline carries on, so that the work is not
// optimised away.
func flowWork(wait time.Duration, seed uint64) uint64 {
	if wait > 0 {
		time.Sleep(wait)
		return seed
	}
	x := seed | 1
	for range flowSpin {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// axFlowPipeline is the pipeline as a flow: three stages, each a task of the
// kernel, the second a sharded stage of flowShards.
func axFlowPipeline(wait time.Duration) *flow.Flow {
	var sum atomic.Uint64
	f := flow.New("pipeline").
		Stage("fetch", func(context.Context, flow.Inputs) ([]byte, error) {
			sum.Store(0)
			return strconv.AppendUint(nil, flowWork(wait, 1), 10), nil
		}, nil).
		Sharded("clean",
			func(context.Context, flow.Inputs) (int, error) { return flowShards, nil },
			func(_ context.Context, s flow.Shard, in flow.Inputs) error {
				seed, err := strconv.ParseUint(string(in.Result("fetch")), 10, 64)
				if err != nil {
					return err
				}
				sum.Add(flowWork(wait, seed+uint64(s.Index)))
				return nil
			}, &flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}}, MaxShards: flowShards}).
		Stage("store", func(context.Context, flow.Inputs) ([]byte, error) {
			return strconv.AppendUint(nil, flowWork(wait, sum.Load()), 10), nil
		}, &flow.StageOptions{After: []string{"clean"}})
	return f
}

// handPipeline is the same pipeline written by hand: fetch on a goroutine of
// an errgroup, its result passed on a channel; the shards on an errgroup of
// SetLimit(conc), their values sent on a channel and summed; store on a
// goroutine, its result on a channel.
func handPipeline(ctx context.Context, conc int, wait time.Duration) (string, error) {
	fetched := make(chan uint64, 1)
	var g errgroup.Group
	g.Go(func() error {
		fetched <- flowWork(wait, 1)
		return nil
	})
	if err := g.Wait(); err != nil {
		return "", err
	}
	seed := <-fetched

	sg, sctx := errgroup.WithContext(ctx)
	sg.SetLimit(conc)
	vals := make(chan uint64, flowShards)
	for i := range flowShards {
		sg.Go(func() error {
			if err := sctx.Err(); err != nil {
				return err
			}
			vals <- flowWork(wait, seed+uint64(i))
			return nil
		})
	}
	if err := sg.Wait(); err != nil {
		return "", err
	}
	close(vals)
	var sum uint64
	for v := range vals {
		sum += v
	}

	stored := make(chan string, 1)
	var st errgroup.Group
	st.Go(func() error {
		stored <- strconv.FormatUint(flowWork(wait, sum), 10)
		return nil
	})
	if err := st.Wait(); err != nil {
		return "", err
	}
	return <-stored, nil
}

func runFlows(ctx context.Context, _ Factory, p Params) (*Sample, error) {
	k, err := kernel.New(kernel.Config{MaxConcurrency: p.Conc})
	if err != nil {
		return nil, err
	}
	defer func() { _ = k.Close() }()
	f := axFlowPipeline(p.Work)
	runAx := func() (string, error) {
		h, err := flow.Run(ctx, k, f, nil)
		if err != nil {
			return "", err
		}
		if err := h.Wait(ctx); err != nil {
			return "", err
		}
		return string(h.Result("store")), nil
	}
	runHand := func() (string, error) { return handPipeline(ctx, p.Conc, p.Work) }

	axWall := make([]float64, 0, p.N)
	handWall := make([]float64, 0, p.N)
	var axCPU, handCPU time.Duration
	measure := func(run func() (string, error), walls *[]float64, cpu *time.Duration) (string, error) {
		c0, t0 := processCPU(), time.Now()
		out, err := run()
		el, c1 := time.Since(t0), processCPU()
		*walls = append(*walls, float64(el.Nanoseconds())/1e3)
		*cpu += c1 - c0
		return out, err
	}
	out := newSample()
	// Alternate the two, each first in half the rounds, so that neither gets
	// the warmer caches or the quieter moments.
	for i := range p.N {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var a, b string
		var errA, errB error
		if i%2 == 0 {
			a, errA = measure(runAx, &axWall, &axCPU)
			b, errB = measure(runHand, &handWall, &handCPU)
		} else {
			b, errB = measure(runHand, &handWall, &handCPU)
			a, errA = measure(runAx, &axWall, &axCPU)
		}
		if err := errors.Join(errA, errB); err != nil {
			return nil, fmt.Errorf("bench: flows: %w", err)
		}
		if a != b {
			return nil, fmt.Errorf("bench: flows: the flow stored %q, the hand-written pipeline %q", a, b)
		}
	}
	axP50, handP50 := median(axWall), median(handWall)
	tasks := float64(p.N * flowTasks)
	m := out.Metrics
	m["pipelines"] = float64(p.N)
	m["tasks_per_pipeline"] = flowTasks
	m["flow_wall_p50_us"] = axP50
	m["hand_wall_p50_us"] = handP50
	m["flow_cpu_us_per_task"] = float64(axCPU.Nanoseconds()) / 1e3 / tasks
	m["hand_cpu_us_per_task"] = float64(handCPU.Nanoseconds()) / 1e3 / tasks
	m["overhead_us_per_stage"] = (axP50 - handP50) / flowStages
	m["overhead_us_per_task"] = (axP50 - handP50) / flowTasks
	m["cpu_overhead_us_per_task"] = m["flow_cpu_us_per_task"] - m["hand_cpu_us_per_task"]
	m["wall_ratio"] = axP50 / handP50
	if p.Work > 0 {
		out.note(fmt.Sprintf("each task waits %v instead of spinning", p.Work))
	}
	return out, nil
}

// median returns the median of xs (which it sorts), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
