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
// A measure only bounds the offset (the store read its clock at some moment of a
// round trip), so each conversion takes the bound that can only make a task later:
// a due time is written at its latest on the store's clock and read back at its
// latest on the kernel's, and "now" on the store's clock is its earliest. A task
// given a due time therefore never runs before it on the store's clock, whatever
// the kernels' round trips; it may run later by the shortest round trips measured.
// The zero Skew, or one of a store that is no store.Clock, is an offset of zero.
// Its methods are safe for concurrent use.
type Skew struct {
	lo atomic.Int64 // ns: the least the offset (store time - kernel time) can be
	hi atomic.Int64 // ns: the most the offset can be

	mu      sync.Mutex // guards the fields below and serialises Measure
	samples [skewSamples]skewSample
	n       int // samples taken
}

// skewSample is one measure: the offset lies in [lo, hi], since the store read its
// clock between the kernel's t0 and t1 (hi - lo is the round trip).
type skewSample struct {
	lo, hi time.Duration
}

// Offset returns the least the store's clock can run ahead of the kernel's (the
// lower bound of the last measure): the kernel's time plus it is the earliest the
// store's clock can read, and a time on the store's clock less it the latest the
// kernel's can read then, so that a client converting with it never reaches a due
// time early. Zero for a nil Skew.
func (s *Skew) Offset() time.Duration {
	lo, _ := s.bounds()
	return lo
}

func (s *Skew) bounds() (lo, hi time.Duration) {
	if s == nil {
		return 0, 0
	}
	return time.Duration(s.lo.Load()), time.Duration(s.hi.Load())
}

// DueToStore turns a due time t, on the kernel's clock, into the store's: the
// latest the store's clock can read at t. The zero time stays zero.
func (s *Skew) DueToStore(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	_, hi := s.bounds()
	return t.Add(hi)
}

// NowToStore turns now, on the kernel's clock, into the store's: the earliest the
// store's clock can read, the time to claim with and to make a task due at once.
// The zero time stays zero.
func (s *Skew) NowToStore(now time.Time) time.Time {
	if now.IsZero() {
		return now
	}
	return now.Add(s.Offset())
}

// DueFromStore turns a due time t, on the store's clock, into the kernel's: the
// latest the kernel's clock can read when the store's reads t. The zero time stays
// zero.
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
	s.lo.Store(int64(b.lo))
	s.hi.Store(int64(b.hi))
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
