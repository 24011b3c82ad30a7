// Package taskctx holds the result a task attempt's function leaves (Set, Freeze).
// The kernel's context type embeds [Result] beside its cancellation
// (lazycancel.State).
package taskctx

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// ErrEnded is wrapped by Set after Freeze: the attempt ended, its result is taken.
var ErrEnded = errors.New("the attempt ended")

// Result is the result of one attempt: one pointer, so that the context that embeds
// it stays small. The zero value holds none. Its methods are safe for concurrent
// use; Freeze is the kernel loop's.
type Result struct {
	p atomic.Pointer[box] // nil: none set, not frozen
}

// box is an immutable state of a Result.
type box struct {
	b      []byte
	frozen bool
}

// frozenNone is the state of a Result frozen with none set (Freeze allocates nothing).
var frozenNone = &box{frozen: true}

// Set keeps a copy of b as the attempt's result, replacing one set before; nil
// clears it. It refuses, changing nothing, a b longer than limit bytes (the error
// names the limit), and any call after Freeze (wrapping [ErrEnded]).
func (r *Result) Set(b []byte, limit int) error {
	if len(b) > limit {
		return fmt.Errorf("result of %d bytes is larger than the limit of %d bytes", len(b), limit)
	}
	nb := &box{b: slices.Clone(b)}
	for {
		old := r.p.Load()
		if old != nil && old.frozen {
			return ErrEnded
		}
		if r.p.CompareAndSwap(old, nb) {
			return nil
		}
	}
}

// Freeze ends the attempt's result: later Sets are refused. It returns the result,
// which nobody changes from then on. Idempotent. It allocates nothing for an attempt
// that set no result.
func (r *Result) Freeze() []byte {
	for {
		old := r.p.Load()
		switch {
		case old == nil:
			if r.p.CompareAndSwap(nil, frozenNone) {
				return nil
			}
		case old.frozen:
			return old.b
		case r.p.CompareAndSwap(old, &box{b: old.b, frozen: true}):
			return old.b
		}
	}
}

// Get returns the result once frozen, nil before.
func (r *Result) Get() []byte {
	if old := r.p.Load(); old != nil && old.frozen {
		return old.b
	}
	return nil
}
