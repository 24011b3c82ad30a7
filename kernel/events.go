package kernel

import "sync"

// eventQueue carries events from the loop to Config.OnEvent on a goroutine of its
// own. The loop appends a pass's events at once; when limit events wait, further
// ones are dropped and counted, so a slow OnEvent never blocks the loop.
type eventQueue struct {
	fn    func(Event)
	limit int

	mu     sync.Mutex
	buf    []Event // guarded by mu
	closed bool    // guarded by mu
	wake   chan struct{}
	done   chan struct{}
}

func newEventQueue(fn func(Event), limit int) *eventQueue {
	q := &eventQueue{fn: fn, limit: limit, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// push hands evs over; it returns how many were dropped.
func (q *eventQueue) push(evs []Event) int {
	q.mu.Lock()
	room := q.limit - len(q.buf)
	dropped := 0
	if len(evs) > room {
		dropped = len(evs) - max(room, 0)
		evs = evs[:max(room, 0)]
	}
	q.buf = append(q.buf, evs...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return dropped
}

func (q *eventQueue) run() {
	defer close(q.done)
	var batch []Event
	for {
		q.mu.Lock()
		batch, q.buf = q.buf, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		for i := range batch {
			q.fn(batch[i])
			batch[i] = Event{}
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}

// stop delivers what is buffered, then ends the goroutine and waits for it.
func (q *eventQueue) stop() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// emit records a state change for OnEvent. Loop only.
func (k *Kernel) emit(h *Handle, from, to State, a *attempt, err error) {
	if k.events == nil {
		return
	}
	n := 0
	if a != nil {
		n = int(a.n)
	}
	k.evBuf = append(k.evBuf, Event{TaskID: h.ID(), Priority: h.prio, From: from, To: to, Time: k.now, Attempt: n, Err: err})
}

// flushEvents hands the pass's events to the event goroutine. Loop only.
func (k *Kernel) flushEvents() {
	if k.events == nil || len(k.evBuf) == 0 {
		return
	}
	if d := k.events.push(k.evBuf); d > 0 {
		k.m.eventsDropped.Add(d)
		if l := k.rcl.cfg.Logger; l != nil {
			l.Warn("kernel: events dropped: OnEvent is slower than the kernel", "dropped", d)
		}
	}
	clear(k.evBuf)
	k.evBuf = k.evBuf[:0]
}

// sidePool runs OnTimeout callbacks and zombie stack dumps on a few goroutines of
// their own, off the loop. Its queue is bounded: submit reports false when full.
type sidePool struct {
	jobs chan func() // buffered: the bound of pending callbacks
	wg   sync.WaitGroup
	once sync.Once
}

func newSidePool(workers, queue int) *sidePool {
	p := &sidePool{jobs: make(chan func(), queue)}
	p.wg.Add(workers)
	for range workers {
		go func() {
			defer p.wg.Done()
			for f := range p.jobs {
				func() {
					defer func() { _ = recover() }() // a panicking callback must not kill the pool
					f()
				}()
			}
		}()
	}
	return p
}

func (p *sidePool) submit(f func()) bool {
	select {
	case p.jobs <- f:
		return true
	default:
		return false
	}
}

// stop runs what is queued and waits for the goroutines. Must not race submit:
// the kernel calls it after its loop returned.
func (p *sidePool) stop() {
	p.once.Do(func() { close(p.jobs) })
	p.wg.Wait()
}
