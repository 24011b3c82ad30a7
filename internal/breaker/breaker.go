package breaker

import (
	"math"
	"strconv"
	"time"
)

// Buckets is the number of buckets a breaker's window is cut into.
const Buckets = 10

// Config holds a breaker's parameters. Every field is set and valid (the
// caller resolves defaults and validates): Window > 0, MinCalls >= 0,
// FailureRatio and SlowRatio in (0, 1] (SlowRatio unused when SlowCall is 0),
// 0 < OpenFor <= MaxOpenFor, and MaxOpenFor small enough that doubling it
// cannot overflow; Probes in [1, 65535].
type Config struct {
	Window       time.Duration // the span over which outcomes are counted while closed
	MinCalls     int           // outcomes the window must hold before the breaker may trip
	FailureRatio float64       // failures/calls at which the breaker trips
	SlowCall     time.Duration // beyond it a success is slow; 0: none is
	SlowRatio    float64       // slow/calls at which the breaker trips, with SlowCall set
	OpenFor      time.Duration // the open period after a trip from closed
	MaxOpenFor   time.Duration // the cap of the open period, which doubles at each reopening
	Probes       int           // attempts a half-open breaker admits, and successes that close it
}

// State is the state of a breaker.
type State uint8

// The states.
const (
	// Closed admits every attempt and counts their outcomes.
	Closed State = iota + 1
	// Open admits nothing until its open period ends.
	Open
	// HalfOpen admits at most Config.Probes attempts.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	default:
		return "State(" + strconv.Itoa(int(s)) + ")"
	}
}

// Outcome is how an admitted attempt ended, as the caller classifies it.
type Outcome uint8

// The outcomes.
const (
	// Success: the attempt succeeded, within SlowCall if set.
	Success Outcome = iota + 1
	// Failure: the attempt failed.
	Failure
	// Slow: a success that took longer than SlowCall. With SlowCall zero it
	// counts as a Success.
	Slow
	// Ignored: not judged (a cancellation, say). It is not counted, and frees a
	// half-open breaker's probe place.
	Ignored
)

// bucket counts the outcomes of one slice of a breaker's window. Counts saturate
// at math.MaxUint32 instead of wrapping.
type bucket struct {
	calls, failures, slow uint32
}

// Breaker is the circuit breaker of one upstream. Its window ring is inline, so a
// Breaker is one allocation of under 200 bytes. It is not safe for concurrent
// use.
//
// Times are kept as nanoseconds since the breaker's creation, so that they
// follow the monotonic clock reading of the times passed in. Times passed in
// must not go backwards; an outcome recorded at an earlier time than the newest
// bucket counts in that bucket.
type Breaker struct {
	cfg     *Config       // immutable: shared by the breakers of one configuration
	born    time.Time     // origin of the offsets below
	until   int64         // while open: offset at which it half-opens
	openFor time.Duration // the last open period; 0 while closed
	head    int64         // index (offset / bucket width) of the newest bucket in ring
	ring    [Buckets]bucket
	gen     uint32 // changes with each state change
	probing uint16 // while half-open: probes admitted whose outcome is pending
	passed  uint16 // while half-open: probes that succeeded
	st      State  // Open stays set after until; State reports it half-open
}

// New returns a closed breaker with an empty window, created at now. c must be
// valid, and must not change while the breaker lives.
func New(c *Config, now time.Time) *Breaker {
	return &Breaker{cfg: c, born: now, gen: 1, st: Closed}
}

// offset returns now as nanoseconds since b.born, never below zero.
func (b *Breaker) offset(now time.Time) int64 { return max(int64(now.Sub(b.born)), 0) }

// width returns the span of a bucket in nanoseconds.
func (b *Breaker) width() int64 { return max(int64(b.cfg.Window)/Buckets, 1) }

// Admit reports whether an attempt may start at now. If ok, gen identifies the
// breaker generation the attempt belongs to and must be passed back to
// [Breaker.Done] exactly once. If !ok, wake is when Admit may next succeed (the
// end of the open period), or zero if it waits for a probe's outcome. An open
// breaker whose period is over turns half-open here. It does not allocate.
func (b *Breaker) Admit(now time.Time) (ok bool, gen uint32, wake time.Time) {
	switch b.st {
	case Closed:
		return true, b.gen, time.Time{}
	case Open:
		if b.offset(now) < b.until {
			return false, 0, b.born.Add(time.Duration(b.until))
		}
		b.toHalfOpen()
	}
	if int(b.probing)+int(b.passed) >= b.cfg.Probes {
		return false, 0, time.Time{}
	}
	b.probing++
	return true, b.gen, time.Time{}
}

// Done records at now the outcome o of an attempt that [Breaker.Admit] admitted
// with gen, and returns the transition it caused, if any (from != to): closed to
// open (a trip), half-open to closed or half-open to open. An outcome of an older
// generation changes nothing and is not counted; from and to are then both the
// state at now. It does not allocate, and panics on an unknown outcome.
func (b *Breaker) Done(now time.Time, gen uint32, o Outcome) (from, to State) {
	if o < Success || o > Ignored {
		panic("breaker: outcome " + strconv.Itoa(int(o)) + " is unknown")
	}
	if o == Slow && b.cfg.SlowCall == 0 {
		o = Success
	}
	if gen != b.gen {
		s := b.State(now)
		return s, s
	}
	switch b.st {
	case Closed:
		if o == Ignored {
			return Closed, Closed
		}
		if b.record(b.offset(now), o) {
			b.toOpen(now, b.cfg.OpenFor)
			return Closed, Open
		}
		return Closed, Closed
	case HalfOpen:
		if b.probing > 0 {
			b.probing--
		}
		switch o {
		case Ignored:
			return HalfOpen, HalfOpen
		case Success:
			b.passed++
			if int(b.passed) < b.cfg.Probes {
				return HalfOpen, HalfOpen
			}
			b.toClosed(now)
			return HalfOpen, Closed
		default:
			b.toOpen(now, min(2*b.openFor, b.cfg.MaxOpenFor))
			return HalfOpen, Open
		}
	}
	// Open: no attempt holds an open generation, since Admit admits none.
	return Open, Open
}

// State returns the state at now: an open breaker whose period is over reports
// half-open. It does not change b.
func (b *Breaker) State(now time.Time) State {
	if b.st == Open && b.offset(now) >= b.until {
		return HalfOpen
	}
	return b.st
}

// Idle reports whether b is closed with an empty window at now, so that it may
// be forgotten: a new breaker would decide the same. It does not know of
// attempts in flight; the caller keeps the breaker while it has some, so that
// their outcomes meet the generation they were admitted with.
func (b *Breaker) Idle(now time.Time) bool {
	if b.st != Closed {
		return false
	}
	calls, _, _ := b.Window(now)
	return calls == 0
}

// Window returns the outcomes the window holds at now (all zero unless closed).
// It does not change b.
func (b *Breaker) Window(now time.Time) (calls, failures, slow uint64) {
	if b.st != Closed {
		return 0, 0, 0
	}
	idx := max(b.offset(now)/b.width(), b.head)
	for i := max(idx-Buckets+1, 0); i <= b.head; i++ {
		k := &b.ring[i%Buckets]
		calls += uint64(k.calls)
		failures += uint64(k.failures)
		slow += uint64(k.slow)
	}
	return calls, failures, slow
}

// record counts outcome o (success, failure or slow) at offset off in the window
// and reports whether the window now trips the breaker.
func (b *Breaker) record(off int64, o Outcome) bool {
	idx := off / b.width()
	if idx > b.head {
		for i := b.head + 1; i <= min(idx, b.head+Buckets); i++ {
			b.ring[i%Buckets] = bucket{}
		}
		b.head = idx
	}
	k := &b.ring[b.head%Buckets]
	if k.calls < math.MaxUint32 {
		k.calls++
		switch o {
		case Failure:
			k.failures++
		case Slow:
			k.slow++
		}
	}
	var calls, failures, slow uint64
	for i := range b.ring {
		calls += uint64(b.ring[i].calls)
		failures += uint64(b.ring[i].failures)
		slow += uint64(b.ring[i].slow)
	}
	return trips(b.cfg, calls, failures, slow)
}

// trips reports whether a closed breaker configured by c trips with a window
// holding these counts.
func trips(c *Config, calls, failures, slow uint64) bool {
	if calls == 0 || calls < uint64(c.MinCalls) {
		return false
	}
	n := float64(calls)
	return float64(failures)/n >= c.FailureRatio || (c.SlowCall > 0 && float64(slow)/n >= c.SlowRatio)
}

// toOpen opens b at now for d.
func (b *Breaker) toOpen(now time.Time, d time.Duration) {
	b.st = Open
	b.gen++
	b.openFor = d
	b.until = b.offset(now) + int64(d)
	b.probing, b.passed = 0, 0
}

// toHalfOpen turns an open b half-open.
func (b *Breaker) toHalfOpen() {
	b.st = HalfOpen
	b.gen++
	b.probing, b.passed = 0, 0
}

// toClosed closes b at now with an empty window and resets its open period.
func (b *Breaker) toClosed(now time.Time) {
	b.st = Closed
	b.gen++
	b.openFor = 0
	b.ring = [Buckets]bucket{}
	b.head = b.offset(now) / b.width()
	b.probing, b.passed = 0, 0
}
