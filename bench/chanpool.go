package bench

import "sync"

// chanPool is the hand-written worker pool: Conc goroutines ranging over one
// buffered channel of Queue funcs. In blocking mode a full channel makes Go
// wait; otherwise Go returns [ErrRejected].
type chanPool struct {
	tasks       chan func()
	wg          sync.WaitGroup
	nonBlocking bool
	closeOnce   sync.Once
}

var _ Pool = (*chanPool)(nil)

func newChanPool(conc, queue int, nonBlocking bool) *chanPool {
	p := &chanPool{tasks: make(chan func(), queue), nonBlocking: nonBlocking}
	for range conc {
		p.wg.Go(func() {
			for f := range p.tasks {
				f()
			}
		})
	}
	return p
}

func (p *chanPool) Go(f func()) error {
	if !p.nonBlocking {
		p.tasks <- f
		return nil
	}
	select {
	case p.tasks <- f:
		return nil
	default:
		return ErrRejected
	}
}

// Wait closes the channel and waits for the workers to drain it.
func (p *chanPool) Wait() {
	p.closeOnce.Do(func() { close(p.tasks) })
	p.wg.Wait()
}

// Close stops the workers if Wait did not.
func (p *chanPool) Close() { p.Wait() }
