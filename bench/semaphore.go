package bench

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// semaphorePool is a weighted semaphore of Conc guarding `go f()`, the pattern
// of the semaphore package's own example: Acquire(1) before each goroutine and
// Acquire(Conc) to wait for all.
type semaphorePool struct {
	sem  *semaphore.Weighted
	conc int64
}

var _ Pool = (*semaphorePool)(nil)

func newSemaphorePool(conc int) *semaphorePool {
	return &semaphorePool{sem: semaphore.NewWeighted(int64(conc)), conc: int64(conc)}
}

func (p *semaphorePool) Go(f func()) error {
	if err := p.sem.Acquire(context.Background(), 1); err != nil {
		return err
	}
	go func() {
		defer p.sem.Release(1)
		f()
	}()
	return nil
}

func (p *semaphorePool) Wait() {
	_ = p.sem.Acquire(context.Background(), p.conc)
	p.sem.Release(p.conc)
}

func (p *semaphorePool) Close() {}
