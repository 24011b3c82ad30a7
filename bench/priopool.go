package bench

import "sync"

// prioPool is the hand-written strict-priority pool: Conc goroutines taking
// funcs from one buffered channel per priority (Queue funcs each), always High
// before Normal before Low. It is the latency ideal for High, and it starves
// Low while High and Normal keep every worker busy. In blocking mode a full
// channel makes the submitter wait; otherwise it gets [ErrRejected].
type prioPool struct {
	levels      [numPriorities]chan func() // immutable; closed once by Wait
	wg          sync.WaitGroup
	nonBlocking bool // immutable
	closeOnce   sync.Once
}

var _ PriorityPool = (*prioPool)(nil)

func newPrioPool(conc, queue int, nonBlocking bool) *prioPool {
	p := &prioPool{nonBlocking: nonBlocking}
	for i := range p.levels {
		p.levels[i] = make(chan func(), queue)
	}
	for range conc {
		p.wg.Go(p.work)
	}
	return p
}

// work is one worker: it takes the highest-priority func waiting, or waits
// for the first to come, until every channel is closed and drained.
func (p *prioPool) work() {
	high, normal, low := p.levels[High], p.levels[Normal], p.levels[Low]
	for {
		f := poll(&high)
		if f == nil {
			f = poll(&normal)
		}
		if f == nil {
			f = poll(&low)
		}
		if f == nil {
			if high == nil && normal == nil && low == nil {
				return
			}
			// Nothing waits: block on all three (a nil channel, one closed and
			// drained, never becomes ready).
			var ok bool
			select {
			case f, ok = <-high:
				if !ok {
					high = nil
				}
			case f, ok = <-normal:
				if !ok {
					normal = nil
				}
			case f, ok = <-low:
				if !ok {
					low = nil
				}
			}
			if !ok {
				continue
			}
		}
		f()
	}
}

// poll takes a func from *ch without blocking. It returns nil when none waits,
// and sets *ch to nil once the channel is closed and drained.
func poll(ch *chan func()) func() {
	select {
	case f, ok := <-*ch:
		if !ok {
			*ch = nil
		}
		return f
	default:
		return nil
	}
}

// Go runs f at Normal priority.
func (p *prioPool) Go(f func()) error { return p.GoAt(Normal, f) }

// GoAt runs f at priority pr (Normal if pr is not one of the three).
func (p *prioPool) GoAt(pr Priority, f func()) error {
	if pr >= numPriorities {
		pr = Normal
	}
	ch := p.levels[pr]
	if !p.nonBlocking {
		ch <- f
		return nil
	}
	select {
	case ch <- f:
		return nil
	default:
		return ErrRejected
	}
}

// Wait closes the channels and waits for the workers to drain them.
func (p *prioPool) Wait() {
	p.closeOnce.Do(func() {
		for _, ch := range p.levels {
			close(ch)
		}
	})
	p.wg.Wait()
}

// Close stops the workers if Wait did not.
func (p *prioPool) Close() { p.Wait() }
