package kernel

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/internal/goid"
)

// eventQueue carries events from the loop to Config.OnEvent on a goroutine of its
// own. The loop appends a pass's events at once; when limit events wait, further
// ones are dropped and counted, so a slow OnEvent never blocks the loop. A panic
// in OnEvent is recovered and counted (panics); the events after it are still
// delivered.
type eventQueue struct {
	fn     func(Event)
	limit  int
	panics *metrics.Counter

	mu     sync.Mutex
	buf    []Event // guarded by mu
	closed bool    // guarded by mu
	wake   chan struct{}
	done   chan struct{}
	gid    atomic.Uint64 // the delivering goroutine's id (Kernel.onOwnGoroutine)
}

func newEventQueue(fn func(Event), limit int, panics *metrics.Counter) *eventQueue {
	q := &eventQueue{fn: fn, limit: limit, panics: panics, wake: make(chan struct{}, 1), done: make(chan struct{})}
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
	q.gid.Store(goid.ID())
	var batch []Event
	for {
		q.mu.Lock()
		batch, q.buf = q.buf, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		for i := range batch {
			q.deliver(&batch[i])
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

// deliver calls OnEvent with e, recovering a panic.
func (q *eventQueue) deliver(e *Event) {
	defer func() {
		if recover() != nil {
			q.panics.Inc()
		}
	}()
	q.fn(*e)
}

// stop asks the goroutine to deliver what is buffered and end, and waits for it
// until deadline (nil: no bound). It reports whether the goroutine ended: an
// OnEvent that blocks keeps it, and the kernel abandons it.
func (q *eventQueue) stop(deadline <-chan struct{}) bool {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case <-q.done:
		return true
	case <-deadline:
		return false
	}
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
	k.ls.evBuf = append(k.ls.evBuf, Event{TaskID: h.ID(), Priority: h.prio, From: from, To: to, Time: k.ls.now, Attempt: n, Err: err})
}

// flushEvents hands the pass's events to the event goroutine. Loop only.
func (k *Kernel) flushEvents() {
	if k.events == nil || len(k.ls.evBuf) == 0 {
		return
	}
	if d := k.events.push(k.ls.evBuf); d > 0 {
		k.m.eventsDropped.Add(d)
		if l := k.ls.rcl.cfg.Logger; l != nil {
			l.Warn("kernel: events dropped: OnEvent is slower than the kernel", "dropped", d)
		}
	}
	clear(k.ls.evBuf)
	k.ls.evBuf = k.ls.evBuf[:0]
}
