package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/alitto/pond/v2"
	"github.com/gammazero/workerpool"
	"github.com/panjf2000/ants/v2"
	"github.com/sourcegraph/conc/pool"

	"github.com/axsched/ax/bench"
)

// peers returns the third-party pools, each in its blocking and (where it has
// one) its non-blocking configuration. All of them run tasks from one FIFO;
// bench.Emulate gives them timeouts, delays and retries.
func peers() []bench.Factory {
	return []bench.Factory{
		{
			Name: "ants", Mode: bench.Blocking,
			Doc: "panjf2000/ants/v2 pool of conc workers; Submit blocks while all are busy",
			New: func(_ context.Context, p bench.Params) (bench.Executor, error) { return newAnts(p.Conc, false) },
		},
		{
			Name: "ants-nb", Mode: bench.NonBlocking,
			Doc: "ants with WithNonblocking: Submit returns ErrPoolOverload while all workers are busy",
			New: func(_ context.Context, p bench.Params) (bench.Executor, error) { return newAnts(p.Conc, true) },
		},
		{
			Name: "pond", Mode: bench.Blocking,
			Doc: "alitto/pond/v2 pool of conc with a queue of queue tasks; Go blocks when it is full",
			New: func(ctx context.Context, p bench.Params) (bench.Executor, error) {
				return newPond(ctx, p.Conc, p.Queue, false), nil
			},
		},
		{
			Name: "pond-nb", Mode: bench.NonBlocking,
			Doc: "pond with WithNonBlocking: Go returns ErrQueueFull when the queue is full",
			New: func(ctx context.Context, p bench.Params) (bench.Executor, error) {
				return newPond(ctx, p.Conc, p.Queue, true), nil
			},
		},
		{
			Name: "conc", Mode: bench.Blocking,
			Doc: "sourcegraph/conc pool with WithMaxGoroutines(conc); Go blocks while all run",
			New: func(_ context.Context, p bench.Params) (bench.Executor, error) {
				return bench.Emulate(&concPool{p: pool.New().WithMaxGoroutines(p.Conc)}), nil
			},
		},
		{
			Name: "workerpool", Mode: bench.Unbounded,
			Doc: "gammazero/workerpool of conc workers; Submit never blocks (its queue has no bound)",
			New: func(_ context.Context, p bench.Params) (bench.Executor, error) {
				return bench.Emulate(&workerPool{wp: workerpool.New(p.Conc)}), nil
			},
		},
	}
}

// antsPool adapts ants. ants has no wait-for-tasks call, so a WaitGroup counts
// them, as its README does.
type antsPool struct {
	p  *ants.Pool
	wg sync.WaitGroup
}

func newAnts(conc int, nonBlocking bool) (bench.Executor, error) {
	p, err := ants.NewPool(conc, ants.WithNonblocking(nonBlocking))
	if err != nil {
		return nil, fmt.Errorf("ants: %w", err)
	}
	return bench.Emulate(&antsPool{p: p}), nil
}

func (a *antsPool) Go(f func()) error {
	a.wg.Add(1)
	err := a.p.Submit(func() {
		defer a.wg.Done()
		f()
	})
	if err != nil {
		a.wg.Done()
		if errors.Is(err, ants.ErrPoolOverload) {
			return bench.ErrRejected
		}
		return err
	}
	return nil
}

func (a *antsPool) Wait()  { a.wg.Wait() }
func (a *antsPool) Close() { a.p.Release() }

// pondPool adapts pond; StopAndWait waits for every queued and running task.
type pondPool struct {
	p pond.Pool
}

func newPond(ctx context.Context, conc, queue int, nonBlocking bool) bench.Executor {
	return bench.Emulate(&pondPool{p: pond.NewPool(conc,
		pond.WithContext(ctx), pond.WithQueueSize(queue), pond.WithNonBlocking(nonBlocking))})
}

func (p *pondPool) Go(f func()) error {
	if err := p.p.Go(f); err != nil {
		if errors.Is(err, pond.ErrQueueFull) {
			return bench.ErrRejected
		}
		return err
	}
	return nil
}

func (p *pondPool) Wait()  { p.p.StopAndWait() }
func (p *pondPool) Close() { p.p.StopAndWait() }

// concPool adapts conc; its Wait waits for every task (and may be called once).
type concPool struct {
	p *pool.Pool
}

func (c *concPool) Go(f func()) error {
	c.p.Go(f)
	return nil
}

func (c *concPool) Wait()  { c.p.Wait() }
func (c *concPool) Close() {}

// workerPool adapts workerpool; StopWait runs every queued task and waits.
type workerPool struct {
	wp *workerpool.WorkerPool
}

func (w *workerPool) Go(f func()) error {
	w.wp.Submit(f)
	return nil
}

func (w *workerPool) Wait()  { w.wp.StopWait() }
func (w *workerPool) Close() { w.wp.StopWait() }
