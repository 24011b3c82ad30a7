package kernel

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/internal/goid"
)

// callbackQueue carries values from the kernel to a user callback (Config.OnEvent,
// the handler of Config.Logger) on a goroutine of its own, so that a slow, blocked
// or panicking callback never holds up or ends the goroutine that produced them.
// When limit values wait, further ones are dropped and counted by the caller of
// push. A panic in the callback is recovered and counted (panics), and the values
// after it are still delivered; a callback that calls runtime.Goexit ends the
// delivering goroutine, which is counted as a panic and replaced by a new one that
// goes on with the next value.
type callbackQueue[T any] struct {
	fn     func(T)
	limit  int
	panics *metrics.Counter

	mu     sync.Mutex
	buf    []T  // guarded by mu
	closed bool // guarded by mu
	wake   chan struct{}
	done   chan struct{}
	gid    atomic.Uint64 // the delivering goroutine's id (Kernel.onOwnGoroutine)

	// The batch being delivered and the index of the value in the callback: owned
	// by the delivering goroutine, handed to its replacement by the go statement.
	batch []T
	next  int
}

func newCallbackQueue[T any](fn func(T), limit int, panics *metrics.Counter) *callbackQueue[T] {
	q := &callbackQueue[T]{fn: fn, limit: limit, panics: panics, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// push hands vs over; it returns how many were dropped.
func (q *callbackQueue[T]) push(vs ...T) int {
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
func (q *callbackQueue[T]) run() {
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
func (q *callbackQueue[T]) deliver(v *T) {
	defer func() {
		if recover() != nil {
			q.panics.Inc()
		}
	}()
	q.fn(*v)
}

// stop asks the goroutine to deliver what is buffered and end, and waits for it
// until deadline (nil: no bound). It reports whether the goroutine ended: a
// callback that blocks keeps it, and the kernel abandons it. It may be called
// again.
func (q *callbackQueue[T]) stop(deadline <-chan struct{}) bool {
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

// callGuarded calls f on a goroutine of its own and waits for it. It returns
// normally when f returned; otherwise r is the value f panicked with, or nil when
// f called runtime.Goexit, which then ended only that goroutine. The kernel calls
// user code that its own goroutines wait for (a BackoffFunc on the loop, a Store's
// methods) this way, since a deferred recover cannot stop a Goexit. The goroutine
// counts as k's own while f runs (Kernel.onOwnGoroutine), so that a Shutdown or
// Close called from f does not wait for the goroutine that waits for f.
func callGuarded(k *Kernel, f func()) (r any, normal bool) {
	type result struct {
		r      any
		normal bool
	}
	done := make(chan result, 1)
	go func() {
		var res result
		gid := goid.ID()
		k.guarded.Store(gid, struct{}{})
		defer func() {
			k.guarded.Delete(gid)
			if !res.normal {
				res.r = recover()
			}
			done <- res
		}()
		f()
		res.normal = true
	}()
	res := <-done
	return res.r, res.normal
}
