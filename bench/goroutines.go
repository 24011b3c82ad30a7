package bench

import (
	"sync"
	"time"
)

// goPool starts one goroutine per func, without limit: the `go f()` baseline.
type goPool struct {
	wg sync.WaitGroup
}

var (
	_ Pool    = (*goPool)(nil)
	_ Delayer = (*goDelayer)(nil)
)

func (p *goPool) Go(f func()) error {
	p.wg.Go(f)
	return nil
}

func (p *goPool) Wait()  { p.wg.Wait() }
func (p *goPool) Close() {}

// goDelayer is the goroutine baseline with time.AfterFunc as its delay.
type goDelayer struct {
	Executor
}

// After is time.AfterFunc: the runtime's timer heap, one goroutine per firing.
func (goDelayer) After(d time.Duration, f func()) error {
	time.AfterFunc(d, f)
	return nil
}
