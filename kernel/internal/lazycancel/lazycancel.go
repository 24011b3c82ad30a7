// Package lazycancel is the cancellation half of a task attempt's context: it costs no
// allocation until Done is called (its channel is made lazily), and it lets
// context.AfterFunc and the contexts derived from it hook cancellation without a
// goroutine each.
package lazycancel

import (
	"sync"
	"sync/atomic"
)

// State is a cancellation that one owner triggers with [State.Cancel]. Embedded in a
// context type, it gives it Done, Err and AfterFunc. The zero value is live
// (not cancelled). Safe for concurrent use; it must not be copied after first use.
type State struct {
	canceled atomic.Bool
	mu       sync.Mutex
	done     chan struct{}
	err      error
	afters   []*afterFunc
}

type afterFunc struct {
	f    func()
	once sync.Once
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Canceled reports whether Cancel was called, without taking the lock.
func (c *State) Canceled() bool { return c.canceled.Load() }

// Done returns a channel closed when the state is cancelled.
func (c *State) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

// Err returns nil until the state is cancelled, then the error Cancel was given.
func (c *State) Err() error {
	if !c.canceled.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to run on a goroutine of its own once the state is
// cancelled (at once if it is); the returned function stops that, reporting whether
// it did. It lets context.AfterFunc and derived contexts hook cancellation without a
// goroutine each.
func (c *State) AfterFunc(f func()) func() bool {
	af := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		af.once.Do(func() { go f() })
		return func() bool { return false }
	}
	c.afters = append(c.afters, af)
	c.mu.Unlock()
	return func() bool {
		stopped := false
		af.once.Do(func() { stopped = true })
		return stopped
	}
}

// Cancel cancels the state with err (context.Canceled or DeadlineExceeded): Done's
// channel closes and the AfterFunc functions start. Idempotent: the first err stays.
func (c *State) Cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.canceled.Store(true)
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, af := range afters {
		af.once.Do(func() { go af.f() })
	}
}
