package callback

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/internal/goid"
)

// Queue carries values from the kernel to a user callback (Config.OnEvent, the
// handler of Config.Logger, Task.OnEnd) on a goroutine of its own, so that a slow, blocked
// or panicking callback never holds up or ends the goroutine that produced them.
// When limit values wait, further ones are dropped and counted by the caller of
// push. A panic in the callback is recovered and counted (panics), and the values
// after it are still delivered; a callback that calls runtime.Goexit ends the
// delivering goroutine, which is counted as a panic and replaced by a new one that
// goes on with the next value.
type Queue[T any] struct {
	fn     func(T)
	limit  int
	panics *metrics.Counter

	mu     sync.Mutex
	buf    []T  // guarded by mu
	closed bool // guarded by mu
	wake   chan struct{}
	done   chan struct{}
	gid    atomic.Uint64 // the delivering goroutine's id (see GID)

	// The batch being delivered and the index of the value in the callback: owned
	// by the delivering goroutine, handed to its replacement by the go statement.
	batch []T
	next  int
}

// NewQueue starts a queue that calls fn with each value pushed, in order, holding
// at most limit values; panics counts the callback's panics.
func NewQueue[T any](fn func(T), limit int, panics *metrics.Counter) *Queue[T] {
	q := &Queue[T]{fn: fn, limit: limit, panics: panics, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// Push hands vs over; it returns how many were dropped.
func (q *Queue[T]) Push(vs ...T) int {
	q.mu.Lock()
	room := q.limit - len(q.buf)
	dropped := 0
	if len(vs) > room {
		dropped = len(vs) - max(room, 0)
		vs = vs[:max(room, 0)]
	}
	q.buf = append(q.buf, vs...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return dropped
}

// run delivers the queue's values until stop. If the callback ends the goroutine
// (runtime.Goexit), a new one takes over after the value it was given.
func (q *Queue[T]) run() {
	q.gid.Store(goid.ID())
	normal := false
	defer func() {
		if normal {
			close(q.done)
			return
		}
		q.panics.Inc()
		if q.next < len(q.batch) {
			var zero T
			q.batch[q.next] = zero
			q.next++
		}
		go q.run()
	}()
	for {
		for ; q.next < len(q.batch); q.next++ {
			q.deliver(&q.batch[q.next])
			var zero T
			q.batch[q.next] = zero
		}
		q.mu.Lock()
		q.batch, q.buf = q.buf, q.batch[:0]
		q.next = 0
		closed := q.closed
		q.mu.Unlock()
		if len(q.batch) > 0 {
			continue
		}
		if closed {
			normal = true
			return
		}
		<-q.wake
	}
}

// deliver calls the callback with *v, recovering a panic.
func (q *Queue[T]) deliver(v *T) {
	defer func() {
		if recover() != nil {
			q.panics.Inc()
		}
	}()
	q.fn(*v)
}

// Stop asks the goroutine to deliver what is buffered and end, and waits for it
// until deadline (nil: no bound). It reports whether the goroutine ended: a
// callback that blocks keeps it, and the kernel abandons it. It may be called
// again.
func (q *Queue[T]) Stop(deadline <-chan struct{}) bool {
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

// GID returns the id of the goroutine delivering the values, so that the kernel
// can tell its own goroutines (a Shutdown called from the callback).
func (q *Queue[T]) GID() uint64 { return q.gid.Load() }
