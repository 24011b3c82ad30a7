package main

import (
	"context"
	"sync"

	"golang.org/x/time/rate"

	"github.com/axsched/ax/bench"
)

// keyedBaseline is the groups scenario's baseline: per-key semaphores and
// x/time/rate limiters in front of a plain channel worker pool.
func keyedBaseline() bench.Factory {
	return bench.Factory{
		Name: "chanpool-keyed", Mode: bench.Blocking, Only: []string{"groups"},
		Doc: "groups only: a hand-written map of per-key queues, each drained by a goroutine that takes a buffered-channel " +
			"semaphore and waits on an x/time/rate limiter, then hands the task to conc workers ranging over a channel; no breaker",
		Keyed: func(ctx context.Context, _ bench.Params, cfg bench.KeyedConfig) (bench.KeyedExecutor, error) {
			return newKeyedPool(ctx, cfg), nil
		},
	}
}

// keyedPool is the hand-written keyed executor. Each key has a FIFO of tasks
// and a goroutine that, for each task in turn, takes a slot of the key's
// semaphore, waits for a token of the key's limiter, and sends the task to the
// workers; the slot returns when the task ends.
type keyedPool struct {
	ctx   context.Context // immutable
	lim   bench.KeyLimits // immutable
	work  chan func()     // the workers' channel
	wg    sync.WaitGroup  // the workers
	tasks sync.WaitGroup  // the accepted tasks not yet ended
	mu    sync.Mutex
	keys  map[string]*keyQueue // guarded by mu
	feeds sync.WaitGroup       // the keys' goroutines
}

// keyQueue is one key's FIFO, its semaphore and its limiter.
type keyQueue struct {
	mu     sync.Mutex
	q      []bench.KeyedTask // guarded by mu
	closed bool              // guarded by mu
	wake   chan struct{}     // size 1: a task was queued, or the pool closes
	sem    chan struct{}     // the key's concurrency slots
	lim    *rate.Limiter
}

var _ bench.KeyedExecutor = (*keyedPool)(nil)

func newKeyedPool(ctx context.Context, cfg bench.KeyedConfig) *keyedPool {
	p := &keyedPool{ctx: ctx, lim: cfg.PerKey, work: make(chan func(), cfg.Queue), keys: map[string]*keyQueue{}}
	for range cfg.Conc {
		p.wg.Go(func() {
			for f := range p.work {
				f()
			}
		})
	}
	return p
}

// Submit queues t on its key, starting the key's goroutine on its first task.
func (p *keyedPool) Submit(t bench.KeyedTask) error {
	p.mu.Lock()
	kq, ok := p.keys[t.Key]
	if !ok {
		kq = &keyQueue{
			wake: make(chan struct{}, 1),
			sem:  make(chan struct{}, p.lim.Concurrency),
			lim:  rate.NewLimiter(rate.Limit(p.lim.Rate), p.lim.Burst),
		}
		p.keys[t.Key] = kq
		p.feeds.Go(func() { p.feed(kq) })
	}
	p.mu.Unlock()
	p.tasks.Add(1)
	kq.mu.Lock()
	kq.q = append(kq.q, t)
	kq.mu.Unlock()
	select {
	case kq.wake <- struct{}{}:
	default:
	}
	return nil
}

// feed hands kq's tasks to the workers in order, each once it holds a slot and a token.
func (p *keyedPool) feed(kq *keyQueue) {
	for {
		kq.mu.Lock()
		if len(kq.q) == 0 {
			closed := kq.closed
			kq.mu.Unlock()
			if closed {
				return
			}
			<-kq.wake
			continue
		}
		t := kq.q[0]
		kq.q[0] = bench.KeyedTask{}
		kq.q = kq.q[1:]
		kq.mu.Unlock()
		kq.sem <- struct{}{}
		_ = kq.lim.Wait(p.ctx) // an error only once the run's ctx ends: run anyway, so that Wait returns
		p.work <- func() {
			defer p.tasks.Done()
			defer func() { <-kq.sem }()
			ctx, cancel := p.ctx, context.CancelFunc(func() {})
			if t.Timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, t.Timeout)
			}
			defer cancel()
			_ = t.Run(ctx)
		}
	}
}

// Wait waits for every accepted task to end.
func (p *keyedPool) Wait() { p.tasks.Wait() }

// Close stops the keys' goroutines, then the workers.
func (p *keyedPool) Close() {
	p.mu.Lock()
	for _, kq := range p.keys {
		kq.mu.Lock()
		kq.closed = true
		kq.mu.Unlock()
		select {
		case kq.wake <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	p.feeds.Wait()
	close(p.work)
	p.wg.Wait()
}
