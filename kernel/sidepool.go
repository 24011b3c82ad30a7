package kernel

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/internal/goid"
)

// sidePool runs OnTimeout callbacks and zombie stack dumps on a few goroutines of
// their own, off the loop. Its queue is bounded: submit reports false when full. A
// panicking callback is recovered and counted; one that calls runtime.Goexit ends
// its worker, which is counted as a panic and replaced.
type sidePool struct {
	jobs   chan func() // buffered: the bound of pending callbacks
	panics *metrics.Counter
	gids   []atomic.Uint64 // the workers' goroutine ids (Kernel.onOwnGoroutine)
	live   atomic.Int32    // workers not yet returned
	done   chan struct{}   // closed when the last worker returned
	once   sync.Once
}

func newSidePool(workers, queue int, panics *metrics.Counter) *sidePool {
	p := &sidePool{jobs: make(chan func(), queue), panics: panics, gids: make([]atomic.Uint64, workers), done: make(chan struct{})}
	p.live.Store(int32(workers))
	for i := range workers {
		go p.work(i)
	}
	return p
}

// work is the body of worker i. If a callback ends the worker (runtime.Goexit), a
// new worker i takes over.
func (p *sidePool) work(i int) {
	normal := false
	defer func() {
		if !normal {
			p.panics.Inc()
			go p.work(i)
			return
		}
		if p.live.Add(-1) == 0 {
			close(p.done)
		}
	}()
	p.gids[i].Store(goid.ID())
	for f := range p.jobs {
		p.call(f)
	}
	normal = true
}

// call runs f, recovering a panic: a panicking callback must not kill the pool.
func (p *sidePool) call(f func()) {
	defer func() {
		if recover() != nil {
			p.panics.Inc()
		}
	}()
	f()
}

func (p *sidePool) submit(f func()) bool {
	select {
	case p.jobs <- f:
		return true
	default:
		return false
	}
}

// has reports whether gid is one of the pool's workers.
func (p *sidePool) has(gid uint64) bool {
	for i := range p.gids {
		if p.gids[i].Load() == gid {
			return true
		}
	}
	return false
}

// stop lets the workers run what is queued and return, and waits for them until
// deadline (nil: no bound). It returns how many are still running a callback
// then: the kernel abandons them. Must not race submit: the kernel calls it after
// its loop returned. It may be called again.
func (p *sidePool) stop(deadline <-chan struct{}) int {
	p.once.Do(func() { close(p.jobs) })
	select {
	case <-p.done:
		return 0
	case <-deadline:
		return int(p.live.Load())
	}
}
