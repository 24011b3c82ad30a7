package durable

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
	"github.com/benbjohnson/clock"
)

// skewSamples is how many measures of the store's clock a Skew keeps: it uses the
// one of the shortest round trip among them.
const skewSamples = 8

// Skew is how far the store's clock runs ahead of the kernel's (Config.Clock), as
// measured by [Skew.Measure] (see [store.Clock]): the kernel adds it to the due times
// it writes and subtracts it from those it reads, so that due times follow the
// store's clock, as leases do. The zero Skew, or one of a store that is no
// store.Clock, is an offset of zero. Its methods are safe for concurrent use.
type Skew struct {
	off atomic.Int64 // ns: store time - kernel time

	mu      sync.Mutex // guards the fields below and serialises Measure
	samples [skewSamples]skewSample
	n       int // samples taken
}

// skewSample is one measure: the offset lies in [lo, hi], since the store read its
// clock between the kernel's t0 and t1 (hi - lo is the round trip).
type skewSample struct {
	lo, hi time.Duration
}

// Offset returns the store's clock less the kernel's; zero for a nil Skew.
func (s *Skew) Offset() time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(s.off.Load())
}

// ToStore turns t, on the kernel's clock, into the store's clock. The zero time stays
// zero.
func (s *Skew) ToStore(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(s.Offset())
}

// FromStore turns t, on the store's clock, into the kernel's. The zero time stays
// zero.
func (s *Skew) FromStore(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-s.Offset())
}

// Measure reads the clock of st, when it is a store.Clock, through guard (see
// Config.GuardFunc), and updates the offset from the sample of the shortest round
// trip among the last skewSamples (the latest of those). The store read its clock
// at some moment of the round trip, so the sample bounds the offset between the
// store's time less the kernel's at the answer and at the call; of those bounds,
// the offset is the value nearest zero: clocks that agree within a round trip get
// no offset at all, so a due time never moves by a measure's noise. It returns the
// store's error; the offset then stays as it was. A store that is no store.Clock
// leaves it zero.
func (s *Skew) Measure(ctx context.Context, st store.Store, clk clock.Clock, guard func(func()) (any, bool)) error {
	sc, ok := st.(store.Clock)
	if !ok || s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t0 := clk.Now()
	now, err := call(guard, "Now", func() (time.Time, error) { return sc.Now(ctx) })
	t1 := clk.Now()
	if err != nil {
		return err
	}
	if t1.Before(t0) {
		t1 = t0
	}
	s.samples[s.n%skewSamples] = skewSample{lo: now.Sub(t1), hi: now.Sub(t0)}
	s.n++
	best := -1
	for i := range min(s.n, skewSamples) {
		// Newest first: of equal round trips, the latest sample wins.
		j := (s.n - 1 - i) % skewSamples
		if b := &s.samples[j]; best < 0 || b.hi-b.lo < s.samples[best].hi-s.samples[best].lo {
			best = j
		}
	}
	b := s.samples[best]
	s.off.Store(int64(min(max(0, b.lo), b.hi)))
	return nil
}

// CeilMilli rounds t up to a whole millisecond, the precision a store keeps: a due
// time stored so is never earlier than the one given.
func CeilMilli(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
