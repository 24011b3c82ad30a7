package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// durableFlowTarget runs the pipeline as a durable flow (flow.Register) on a
// kernel of its own on the setup's store.
type durableFlowTarget struct {
	k   *kernel.Kernel
	d   *flow.Durable
	n   atomic.Int64
	res flowResults
}

func newDurableFlowTarget(setup *DurableSetup, p Params) (flowTarget, error) {
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: p.Conc,
		Capacity:       kernel.ByPriority[int]{High: p.Queue, Normal: p.Queue, Low: p.Queue},
		Store:          setup.Store,
		SnapshotEvery:  setup.SnapshotEvery,
	})
	if err != nil {
		return nil, err
	}
	t := &durableFlowTarget{k: k}
	f := chainPipeline(p.Work, &t.n, &t.res, flow.Inputs.Input)
	if t.d, err = flow.Register(k, setup.Store, f, nil); err != nil {
		return nil, errors.Join(err, k.Close())
	}
	return t, nil
}

func (t *durableFlowTarget) start(ctx context.Context, id int64, seed uint64) (func(context.Context) (uint64, error), error) {
	runID, err := t.d.Start(ctx, flowInput(id, seed), nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (uint64, error) {
		if err := t.d.Wait(ctx, runID); err != nil {
			return 0, err
		}
		v, ok := t.res.take(id)
		if !ok {
			return 0, errors.New("the store stage recorded no value in this process")
		}
		return v, nil
	}, nil
}

func (t *durableFlowTarget) runs() int64 { return t.n.Load() }

func (t *durableFlowTarget) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(t.d.Close(), t.k.Shutdown(ctx))
}
