package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// FlowShards is how many shards the clean stage of the flows scenarios' pipeline
// runs.
const FlowShards = flowShards

// flowsInFlight is how many flows the throughput phase of flows-durable keeps
// in flight.
const flowsInFlight = 4

// FlowWork is the work of one task of the flows scenarios' pipeline: a wait of
// wait, or (wait 0) 20,000 xorshift steps of CPU from seed. It returns a value
// the pipeline carries on.
func FlowWork(wait time.Duration, seed uint64) uint64 { return flowWork(wait, seed) }

func flowsDurableScenario() Scenario {
	return Scenario{
		Name:    "flows-durable",
		Key:     "flows_per_sec",
		Durable: true,
		Doc: "the flows pipeline (fetch → 64 shards of clean → store, 20,000 xorshift steps of CPU a task) " +
			"run durably: ax's durable flows on a store (package flow, Register/Start/Wait), a peer's chain of " +
			"jobs each inserting the next (river: fetch inserts the shards in its completion transaction, the " +
			"shard that completes a per-flow counter inserts store), ax's flows in memory for reference; " +
			"N flows one at a time, alternating with the pipeline by hand (errgroup), then N flows 4 in flight: " +
			"wall time per flow, overhead per stage over the hand-written one, flows/s, CPU per task of client and server",
		Defaults: Params{N: 100, Conc: 8},
		Accepts:  func(f Factory) bool { return f.Flows },
		Run:      runFlowsDurable,
	}
}

// flowTarget runs the pipeline, one flow at a time or several.
type flowTarget interface {
	// start starts flow id with input seed and returns a function that waits
	// for its end and returns the value its store stage computed.
	start(ctx context.Context, id int64, seed uint64) (wait func(context.Context) (uint64, error), err error)
	// runs returns how many task (or job) runs there were.
	runs() int64
	// close stops what the target started.
	close() error
}

// flowValue is the value the pipeline's store stage computes for seed.
func flowValue(wait time.Duration, seed uint64) uint64 {
	return flowWork(wait, flowWork(wait, seed))
}

// flowSeed is flow id's input: a value of its own, not 0.
func flowSeed(id int64) uint64 { return uint64(id)*0x9e3779b97f4a7c15 | 1 }

func runFlowsDurable(ctx context.Context, f Factory, p Params) (_ *Sample, err error) {
	if f.Durable == nil {
		return nil, fmt.Errorf("bench: flows-durable: %s is not a durable configuration", f.Name)
	}
	setup, err := f.Durable(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", f.Name, err)
	}
	defer func() {
		if cerr := setup.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: %s: close store: %w", f.Name, cerr))
		}
	}()
	var t flowTarget
	switch {
	case setup.MemoryFlows:
		t, err = newMemFlowTarget(p)
	case setup.FlowPeer != nil:
		t = peerFlowTarget{setup.FlowPeer}
	case setup.Store != nil:
		t, err = newDurableFlowTarget(setup, p)
	default:
		err = errors.New("DurableSetup has neither MemoryFlows, FlowPeer nor Store")
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", f.Name, err)
	}
	defer func() {
		if cerr := t.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: %s: %w", f.Name, cerr))
		}
	}()
	out := newSample()
	smp := startSampler(nil, time.Now(), false)
	err = measureFlows(ctx, t, setup, p, out)
	smp.finish(out)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: flows-durable: %w", f.Name, err)
	}
	return out, nil
}

// measureFlows runs the two phases on t: N flows one at a time, alternating
// with the pipeline by hand; then N flows flowsInFlight at a time.
func measureFlows(ctx context.Context, t flowTarget, setup *DurableSetup, p Params, out *Sample) error {
	var nextID atomic.Int64
	runOne := func(ctx context.Context) error {
		id := nextID.Add(1)
		seed := flowSeed(id)
		wait, err := t.start(ctx, id, seed)
		if err != nil {
			return fmt.Errorf("start flow %d: %w", id, err)
		}
		got, err := wait(ctx)
		if err != nil {
			return fmt.Errorf("flow %d: %w", id, err)
		}
		if want := flowValue(p.Work, seed); got != want {
			return fmt.Errorf("flow %d stored %d, want %d", id, got, want)
		}
		return nil
	}
	runHand := func() error {
		seed := flowSeed(-1 - nextID.Load())
		got, err := handChain(ctx, p.Conc, p.Work, seed)
		if err == nil && got != flowValue(p.Work, seed) {
			err = fmt.Errorf("the hand-written pipeline computed %d, want %d", got, flowValue(p.Work, seed))
		}
		return err
	}
	// One of each first, unmeasured: connections, caches, the first
	// statements' plans.
	if err := errors.Join(runOne(ctx), runHand()); err != nil {
		return err
	}

	// One flow at a time, alternating with the pipeline by hand, each first in
	// half the rounds.
	flowWall := make([]float64, 0, p.N)
	handWall := make([]float64, 0, p.N)
	var flowCPU, handCPU time.Duration
	timed := func(run func() error, walls *[]float64, cpu *time.Duration) error {
		c0, t0 := processCPU(), time.Now()
		err := run()
		el, c1 := time.Since(t0), processCPU()
		*walls = append(*walls, float64(el.Nanoseconds())/1e3)
		*cpu += c1 - c0
		return err
	}
	flowSide := func() error { return timed(func() error { return runOne(ctx) }, &flowWall, &flowCPU) }
	handSide := func() error { return timed(runHand, &handWall, &handCPU) }
	for i := range p.N {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		first, second := flowSide, handSide
		if i%2 == 1 {
			first, second = handSide, flowSide
		}
		if err := errors.Join(first(), second()); err != nil {
			return err
		}
	}

	// N flows, flowsInFlight at a time.
	inflightWall := make([]int64, p.N)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	cpu := startCPU(setup.ServerCPU)
	t0 := time.Now()
	for range min(flowsInFlight, p.N) {
		g.Go(func() error {
			for {
				i := next.Add(1) - 1
				if i >= int64(p.N) {
					return nil
				}
				s := time.Now()
				if err := runOne(gctx); err != nil {
					return err
				}
				inflightWall[i] = int64(time.Since(s))
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	el := time.Since(t0)
	cpu.put(out, "", p.N*flowTasks, el)

	m := out.Metrics
	flowP50, handP50 := median(flowWall), median(handWall)
	flowQ := QuantilesOf(floatsToInt64(flowWall))
	m["flows"] = float64(p.N)
	m["tasks_per_flow"] = flowTasks
	m["inflight"] = flowsInFlight
	m["flow_wall_p50_us"] = flowP50
	m["flow_wall_p99_us"] = flowQ.P99
	m["hand_wall_p50_us"] = handP50
	m["wall_ratio"] = flowP50 / handP50
	m["overhead_us_per_stage"] = (flowP50 - handP50) / flowStages
	m["overhead_us_per_task"] = (flowP50 - handP50) / flowTasks
	tasks := float64(p.N * flowTasks)
	m["flow_cpu_us_per_task"] = float64(flowCPU.Nanoseconds()) / 1e3 / tasks
	m["hand_cpu_us_per_task"] = float64(handCPU.Nanoseconds()) / 1e3 / tasks
	m["flows_per_sec"] = float64(p.N) / el.Seconds()
	QuantilesOf(inflightWall).put(m, "inflight_wall", "")
	// Every flow of the run: the warm-up's, then N one at a time, then N in flight.
	want := int64(2*p.N+1) * flowTasks
	runs := t.runs()
	m["executed"] = float64(runs)
	m["reruns"] = float64(runs - want)
	if runs != want {
		out.note(fmt.Sprintf("%d task runs for %d flows of %d tasks (%d expected)", runs, 2*p.N+1, flowTasks, want))
	}
	if p.Work > 0 {
		out.note(fmt.Sprintf("each task waits %v instead of spinning", p.Work))
	}
	return nil
}

// floatsToInt64 turns microseconds into nanoseconds, for [QuantilesOf].
func floatsToInt64(xs []float64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x * 1e3)
	}
	return out
}

// handChain is the durable pipeline by hand, in memory: fetch on an errgroup
// goroutine, its value passed on a channel; the shards on an errgroup of
// SetLimit(conc); store on a goroutine, its value on a channel.
func handChain(ctx context.Context, conc int, wait time.Duration, seed uint64) (uint64, error) {
	fetched := make(chan uint64, 1)
	var g errgroup.Group
	g.Go(func() error {
		fetched <- flowWork(wait, seed)
		return nil
	})
	if err := g.Wait(); err != nil {
		return 0, err
	}
	v := <-fetched
	sg, sctx := errgroup.WithContext(ctx)
	sg.SetLimit(conc)
	for i := range flowShards {
		sg.Go(func() error {
			if err := sctx.Err(); err != nil {
				return err
			}
			flowWork(wait, v+uint64(i))
			return nil
		})
	}
	if err := sg.Wait(); err != nil {
		return 0, err
	}
	stored := make(chan uint64, 1)
	var st errgroup.Group
	st.Go(func() error {
		stored <- flowWork(wait, v)
		return nil
	})
	if err := st.Wait(); err != nil {
		return 0, err
	}
	return <-stored, nil
}

// flowResults holds the values the store stages computed, by flow, for the
// waiters.
type flowResults struct {
	mu   sync.Mutex
	vals map[int64]uint64
}

func (r *flowResults) put(id int64, v uint64) {
	r.mu.Lock()
	if r.vals == nil {
		r.vals = map[int64]uint64{}
	}
	r.vals[id] = v
	r.mu.Unlock()
}

// take returns and forgets flow id's value.
func (r *flowResults) take(id int64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.vals[id]
	delete(r.vals, id)
	return v, ok
}

// flowInput is a flow's input: its id and seed, 16 bytes.
func flowInput(id int64, seed uint64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(id))
	return binary.BigEndian.AppendUint64(b, seed)
}

// parseFlowInput reverses flowInput.
func parseFlowInput(b []byte) (int64, uint64, error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("flow input of %d bytes, want 16", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint64(b[8:]), nil
}

// chainPipeline is the durable pipeline as a flow. input returns the flow's
// input in a stage: the run's for a durable flow, a fixed one in memory.
func chainPipeline(wait time.Duration, runs *atomic.Int64, res *flowResults, input func(flow.Inputs) []byte) *flow.Flow {
	value := func(in flow.Inputs) (uint64, error) {
		return strconv.ParseUint(string(in.Result("fetch")), 10, 64)
	}
	return flow.New("axbench-chain").
		Stage("fetch", func(_ context.Context, in flow.Inputs) ([]byte, error) {
			_, seed, err := parseFlowInput(input(in))
			if err != nil {
				return nil, err
			}
			runs.Add(1)
			return strconv.AppendUint(nil, flowWork(wait, seed), 10), nil
		}, nil).
		Sharded("clean",
			func(context.Context, flow.Inputs) (int, error) { return flowShards, nil },
			func(_ context.Context, s flow.Shard, in flow.Inputs) error {
				v, err := value(in)
				if err != nil {
					return err
				}
				runs.Add(1)
				flowWork(wait, v+uint64(s.Index))
				return nil
			}, &flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}}, MaxShards: flowShards}).
		Stage("store", func(_ context.Context, in flow.Inputs) ([]byte, error) {
			id, _, err := parseFlowInput(input(in))
			if err != nil {
				return nil, err
			}
			v, err := value(in)
			if err != nil {
				return nil, err
			}
			runs.Add(1)
			out := flowWork(wait, v)
			res.put(id, out)
			return strconv.AppendUint(nil, out, 10), nil
		}, &flow.StageOptions{After: []string{"clean"}})
}

// memFlowTarget runs the pipeline with flow.Run on a kernel without a store:
// the reference. Each flow is a definition of its own, its input in its
// stages' closures.
type memFlowTarget struct {
	k    *kernel.Kernel
	wait time.Duration
	n    atomic.Int64
	res  flowResults
}

func newMemFlowTarget(p Params) (*memFlowTarget, error) {
	k, err := kernel.New(kernel.Config{MaxConcurrency: p.Conc})
	if err != nil {
		return nil, err
	}
	return &memFlowTarget{k: k, wait: p.Work}, nil
}

func (t *memFlowTarget) start(ctx context.Context, id int64, seed uint64) (func(context.Context) (uint64, error), error) {
	input := flowInput(id, seed)
	f := chainPipeline(t.wait, &t.n, &t.res, func(flow.Inputs) []byte { return input })
	h, err := flow.Run(ctx, t.k, f, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (uint64, error) {
		if err := h.Wait(ctx); err != nil {
			return 0, err
		}
		v, ok := t.res.take(id)
		if !ok {
			return 0, errors.New("the store stage recorded no value")
		}
		return v, nil
	}, nil
}

func (t *memFlowTarget) runs() int64  { return t.n.Load() }
func (t *memFlowTarget) close() error { return t.k.Close() }

// peerFlowTarget is a [DurableFlowPeer].
type peerFlowTarget struct{ p DurableFlowPeer }

func (t peerFlowTarget) start(ctx context.Context, id int64, seed uint64) (func(context.Context) (uint64, error), error) {
	done, err := t.p.StartFlow(ctx, id, seed)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (uint64, error) {
		select {
		case v := <-done:
			return v, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, nil
}

func (t peerFlowTarget) runs() int64  { return t.p.FlowRuns() }
func (t peerFlowTarget) close() error { return nil } // the setup's Close stops the peer
