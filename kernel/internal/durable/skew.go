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
// measured by [Skew.Measure] (see [store.Clock]): the kernel turns the due times it
// writes and the times it claims with into the store's clock, and the due times it
// reads back into its own, so that due times follow the store's clock, as leases do.
//
// A measure only bounds the offset: the store read its clock at some moment of a
// round trip. Clocks that agree within that round trip get no offset at all, so a
// due time never moves by a measure's noise. Clocks that do not agree are told
// apart from it, and each conversion takes the bound that can only make a task
// later: a due time is written at its latest on the store's clock and read back at
// its latest on the kernel's, and "now" on the store's clock is its earliest. So a
// task one kernel gives a due time never runs before it in another whose clock is
// off, whatever their round trips.
//
// The zero Skew, or one of a store that is no store.Clock, is an offset of zero.
// Its methods are safe for concurrent use.
type Skew struct {
	rd atomic.Int64 // ns: offset (store time - kernel time) to read with: its lower bound, or 0
	wr atomic.Int64 // ns: offset to write due times with: its upper bound, or 0

	mu      sync.Mutex // guards the fields below and serialises Measure
	samples [skewSamples]skewSample
	n       int // samples taken
}

// skewSample is one measure: the offset lies in [lo, hi], since the store read its
// clock between the kernel's t0 and t1 (hi - lo is the round trip).
type skewSample struct {
	lo, hi time.Duration
}

// Offset returns how far the store's clock runs ahead of the kernel's, at least:
// zero when the clocks agree within the measure's round trip, else the measure's
// lower bound. The kernel's time plus it is the store's time at its earliest, and
// a time on the store's clock less it the kernel's time at its latest, so that a
// client converting with it never reaches a due time early. Zero for a nil Skew.
func (s *Skew) Offset() time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(s.rd.Load())
}

// DueToStore turns a due time t, on the kernel's clock, into the store's, at its
// latest (see [Skew]). The zero time stays zero.
func (s *Skew) DueToStore(t time.Time) time.Time {
	if t.IsZero() || s == nil {
		return t
	}
	return t.Add(time.Duration(s.wr.Load()))
}

// NowToStore turns now, on the kernel's clock, into the store's, at its earliest:
// the time to claim with and to make a task due at once. The zero time stays zero.
func (s *Skew) NowToStore(now time.Time) time.Time {
	if now.IsZero() {
		return now
	}
	return now.Add(s.Offset())
}

// DueFromStore turns a due time t, on the store's clock, into the kernel's, at its
// latest. The zero time stays zero.
func (s *Skew) DueFromStore(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-s.Offset())
}

// Measure reads the clock of st, when it is a store.Clock, through guard (see
// Config.GuardFunc), and updates the bounds of the offset from the sample of the
// shortest round trip among the last skewSamples (the latest of those). The store
// read its clock at some moment of the round trip, so the sample bounds the offset
// between the store's time less the kernel's at the answer and at the call; a slow
// answer moves nothing. It returns the store's error; the offset then stays as it
// was. A store that is no store.Clock leaves it zero.
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
	if b.lo <= 0 && b.hi >= 0 {
		s.rd.Store(0) // the clocks agree within the round trip
		s.wr.Store(0)
	} else {
		s.rd.Store(int64(b.lo))
		s.wr.Store(int64(b.hi))
	}
	return nil
}

// CeilMilli rounds t up to a whole millisecond: a due time stored at millisecond
// precision is never before the one given.
func CeilMilli(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
