package callback

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/internal/goid"
)

// Pool runs OnTimeout callbacks and zombie stack dumps on a few goroutines of
// their own, off the loop. Its queue is bounded: submit reports false when full. A
// panicking callback is recovered and counted; one that calls runtime.Goexit ends
// its worker, which is counted as a panic and replaced.
type Pool struct {
	jobs   chan func() // buffered: the bound of pending callbacks
	panics *metrics.Counter
	gids   []atomic.Uint64 // the workers' goroutine ids (see Has)
	live   atomic.Int32    // workers not yet returned
	done   chan struct{}   // closed when the last worker returned
	once   sync.Once
}

// NewPool starts workers goroutines that run the functions submitted, at most queue
// of them waiting; panics counts the functions' panics.
func NewPool(workers, queue int, panics *metrics.Counter) *Pool {
	p := &Pool{jobs: make(chan func(), queue), panics: panics, gids: make([]atomic.Uint64, workers), done: make(chan struct{})}
	p.live.Store(int32(workers))
	for i := range workers {
		go p.work(i)
	}
	return p
}

// work is the body of worker i. If a callback ends the worker (runtime.Goexit), a
// new worker i takes over.
func (p *Pool) work(i int) {
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
func (p *Pool) call(f func()) {
	defer func() {
		if recover() != nil {
			p.panics.Inc()
		}
	}()
	f()
}

// Submit queues f; it reports false, and drops f, when the queue is full.
func (p *Pool) Submit(f func()) bool {
	select {
	case p.jobs <- f:
		return true
	default:
		return false
	}
}

// Has reports whether gid is one of the pool's workers.
func (p *Pool) Has(gid uint64) bool {
	for i := range p.gids {
		if p.gids[i].Load() == gid {
			return true
		}
	}
	return false
}

// Stop lets the workers run what is queued and return, and waits for them until
// deadline (nil: no bound). It returns how many are still running a callback
// then: the kernel abandons them. Must not race Submit: the kernel calls it after
// its loop returned. It may be called again.
func (p *Pool) Stop(deadline <-chan struct{}) int {
	p.once.Do(func() { close(p.jobs) })
	select {
	case <-p.done:
		return 0
	case <-deadline:
		return int(p.live.Load())
	}
}
