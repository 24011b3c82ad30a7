// Package taskctx holds what a task attempt's context keeps besides its values and
// deadline: its cancellation (Done, Err, AfterFunc) and the result its function
// leaves (Set, Freeze). The kernel's context type embeds [State].
package taskctx

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrEnded is wrapped by Set after Freeze: the attempt ended, its result is taken.
var ErrEnded = errors.New("the attempt ended")

// State is the cancellation and result of one attempt. The zero value is an attempt
// not cancelled, with no result. Its methods are safe for concurrent use; Cancel and
// Freeze are the kernel loop's.
type State struct {
	canceled atomic.Bool
	frozen   atomic.Bool // Freeze was called: Set refuses
	mu       sync.Mutex
	done     chan struct{}        // guarded by mu; made lazily by Done
	err      error                // guarded by mu
	more     atomic.Pointer[more] // set under mu, once; read without it to find none
}

// more is what few attempts need: AfterFunc hooks and a result. Guarded by
// State.mu.
type more struct {
	afters []*afterFunc
	result []byte
}

type afterFunc struct {
	f    func()
	once sync.Once
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done returns a channel closed when the attempt is cancelled.
func (s *State) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		if s.err != nil {
			return closedChan
		}
		s.done = make(chan struct{})
	}
	return s.done
}

// Err returns nil until the attempt is cancelled, then the error Cancel was given.
func (s *State) Err() error {
	if !s.canceled.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Canceled reports whether Cancel was called, without taking the lock.
func (s *State) Canceled() bool { return s.canceled.Load() }

// AfterFunc lets context.AfterFunc and derived contexts hook cancellation without a
// goroutine each.
func (s *State) AfterFunc(f func()) func() bool {
	af := &afterFunc{f: f}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		af.once.Do(func() { go f() })
		return func() bool { return false }
	}
	m := s.moreLocked()
	m.afters = append(m.afters, af)
	s.mu.Unlock()
	return func() bool {
		stopped := false
		af.once.Do(func() { stopped = true })
		return stopped
	}
}

func (s *State) moreLocked() *more {
	m := s.more.Load()
	if m == nil {
		m = new(more)
		s.more.Store(m)
	}
	return m
}

// Cancel cancels the context with err (context.Canceled or DeadlineExceeded).
// Idempotent.
func (s *State) Cancel(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	s.canceled.Store(true)
	if s.done != nil {
		close(s.done)
	}
	var afters []*afterFunc
	if m := s.more.Load(); m != nil {
		afters = m.afters
		m.afters = nil
	}
	s.mu.Unlock()
	for _, af := range afters {
		af.once.Do(func() { go af.f() })
	}
}

// Set keeps a copy of b as the attempt's result, replacing one set before; nil
// clears it. It refuses, changing nothing, a b longer than limit bytes (the error
// names the limit), and any call after Freeze (wrapping [ErrEnded]).
func (s *State) Set(b []byte, limit int) error {
	if len(b) > limit {
		return fmt.Errorf("result of %d bytes is larger than the limit of %d bytes", len(b), limit)
	}
	b = slices.Clone(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.moreLocked() // published before frozen is read: see Freeze
	if s.frozen.Load() {
		return ErrEnded
	}
	m.result = b
	return nil
}

// Freeze ends the attempt's result: later Sets are refused. It returns the result,
// which nobody changes from then on. Idempotent. It neither allocates nor takes
// the lock for an attempt that set no result: a Set that read frozen false stored
// more before, so the Load below sees it and the lock waits for that Set.
func (s *State) Freeze() []byte {
	s.frozen.Store(true)
	return s.Result()
}

// Result returns the result once frozen, nil before.
func (s *State) Result() []byte {
	if !s.frozen.Load() || s.more.Load() == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.more.Load().result
}

var _ interface {
	Done() <-chan struct{}
	Err() error
} = (*State)(nil)

// The context package finds AfterFunc through this interface.
var _ interface {
	AfterFunc(func()) func() bool
} = (*State)(nil)
