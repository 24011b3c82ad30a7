package kernel

import (
	"cmp"
	"math"
	"time"
)

// Defaults and limits of [BreakerConfig]. OpenFor and Probes follow
// sony/gobreaker's Timeout (60 s) and MaxRequests (1).
const (
	BreakerWindowDefault       = 10 * time.Second
	BreakerWindowMin           = 100 * time.Millisecond
	BreakerWindowMax           = 24 * time.Hour
	BreakerMinCallsDefault     = 10
	BreakerMinCallsMax         = 1 << 24
	BreakerFailureRatioDefault = 0.5
	BreakerSlowRatioDefault    = 0.5
	BreakerOpenForDefault      = 60 * time.Second
	BreakerOpenForMin          = time.Millisecond
	BreakerMaxOpenForDefault   = 10 * time.Minute
	BreakerOpenForMax          = 24 * time.Hour
	BreakerProbesDefault       = 1
	BreakerProbesMax           = 10_000

	// BreakerBuckets is the number of buckets a breaker's window is cut into.
	BreakerBuckets = 10
)

// BreakerConfig configures the circuit breaker each key of a group holds. The zero
// BreakerConfig is valid: every zero field takes its default.
//
// A breaker is closed at first: attempts run, and their outcomes are counted over a
// sliding Window. It opens (trips) when the window holds at least MinCalls calls
// and failures/calls >= FailureRatio, or, with SlowCall set, slow/calls >=
// SlowRatio. While open no attempt starts: the key's tasks wait, or end with
// [ErrCircuitOpen] if FailFast is set, and no retry budget is spent. After OpenFor
// the breaker is half-open and admits at most Probes attempts (a probe whose outcome
// is ignored, such as a canceled one, gives its place back); once Probes of them
// have succeeded it closes with an empty window, and as soon as one fails (or is
// slow, with SlowCall set) it opens again for twice its last open period, up to
// MaxOpenFor. Closing resets the open period to OpenFor.
//
// A probe is judged when its attempt ends, or at its timeout if its goroutine
// lives on. Outcomes of attempts that started before the breaker's last change of
// state (an attempt that started closed and ends after the trip, a probe that ends
// after the breaker closed or reopened) are dropped: they neither change the state
// nor count in the window.
//
// The window is cut into [BreakerBuckets] buckets of Window/BreakerBuckets, and a
// bucket leaves it whole, so an outcome counts for at least 9/10 of Window and at
// most Window after it was recorded.
type BreakerConfig struct {
	// Window is the span of time over which outcomes are counted while closed. If
	// zero, BreakerWindowDefault (10 s); from BreakerWindowMin (100 ms) to
	// BreakerWindowMax (24 h).
	Window time.Duration
	// MinCalls is the number of outcomes the window must hold before the breaker
	// may trip. If zero, BreakerMinCallsDefault (10); at most BreakerMinCallsMax.
	MinCalls int
	// FailureRatio trips the breaker when failures/calls in the window reaches it.
	// If zero, BreakerFailureRatioDefault (0.5); must be in (0, 1] otherwise.
	FailureRatio float64
	// SlowCall is the duration beyond which a successful attempt counts as slow. If
	// zero, no attempt is slow.
	SlowCall time.Duration
	// SlowRatio trips the breaker when slow/calls in the window reaches it. Set it
	// only with SlowCall. If zero, BreakerSlowRatioDefault (0.5); must be in
	// (0, 1] otherwise.
	SlowRatio float64
	// OpenFor is how long the breaker stays open after tripping from closed. If
	// zero, BreakerOpenForDefault (60 s); from BreakerOpenForMin (1 ms) to
	// MaxOpenFor.
	OpenFor time.Duration
	// MaxOpenFor caps the open period, which doubles each time a half-open breaker
	// opens again. If zero, BreakerMaxOpenForDefault (10 min), or OpenFor if that
	// is longer; at most BreakerOpenForMax (24 h), and not shorter than OpenFor.
	MaxOpenFor time.Duration
	// Probes is the number of attempts a half-open breaker admits, and the number
	// of successes that close it. If zero, BreakerProbesDefault (1); at most
	// BreakerProbesMax.
	Probes int
	// FailFast ends the key's tasks with [ErrCircuitOpen] while the breaker is
	// open, instead of keeping them queued until it half-opens. A task ended so
	// spends no attempt. If false, tasks wait.
	FailFast bool
	// IsFailure reports whether an attempt's non-nil error counts as a failure of
	// the upstream; an error it refuses counts as a success. It runs on the task's
	// goroutine after the attempt, never on the scheduler's, and must be safe for
	// concurrent use. If nil, every error is a failure.
	IsFailure func(err error) bool
}

// validate reports each invalid field of c as a [*ConfigError] named prefix +
// "." + field, e.g. `Config.Groups["x"].Breaker.FailureRatio`. Every config it
// accepts is safe: doubling the open period cannot overflow.
func (c *BreakerConfig) validate(prefix string) []error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &ConfigError{Field: prefix + "." + field, Value: v, Reason: reason})
	}
	if c.Window != 0 && (c.Window < BreakerWindowMin || c.Window > BreakerWindowMax) {
		bad("Window", c.Window, "must be 0 or in ["+BreakerWindowMin.String()+", "+BreakerWindowMax.String()+"]")
	}
	if c.MinCalls < 0 || c.MinCalls > BreakerMinCallsMax {
		bad("MinCalls", c.MinCalls, "must be in [0, "+itoa(BreakerMinCallsMax)+"]")
	}
	ratio := func(field string, v float64) {
		if math.IsNaN(v) || v < 0 || v > 1 {
			bad(field, v, "must be 0 or in (0, 1]")
		}
	}
	ratio("FailureRatio", c.FailureRatio)
	if c.SlowCall < 0 {
		bad("SlowCall", c.SlowCall, "must be >= 0")
	}
	ratio("SlowRatio", c.SlowRatio)
	if c.SlowCall == 0 && c.SlowRatio > 0 && c.SlowRatio <= 1 {
		bad("SlowRatio", c.SlowRatio, "must be 0 when SlowCall is 0 (no call is slow)")
	}
	openOK := c.OpenFor == 0 || (c.OpenFor >= BreakerOpenForMin && c.OpenFor <= BreakerOpenForMax)
	if !openOK {
		bad("OpenFor", c.OpenFor, "must be 0 or in ["+BreakerOpenForMin.String()+", "+BreakerOpenForMax.String()+"]")
	}
	switch {
	case c.MaxOpenFor < 0 || c.MaxOpenFor > BreakerOpenForMax:
		bad("MaxOpenFor", c.MaxOpenFor, "must be in [0, "+BreakerOpenForMax.String()+"]")
	case c.MaxOpenFor > 0 && openOK && c.MaxOpenFor < cmp.Or(c.OpenFor, BreakerOpenForDefault):
		bad("MaxOpenFor", c.MaxOpenFor, "must be 0 or >= OpenFor ("+cmp.Or(c.OpenFor, BreakerOpenForDefault).String()+")")
	}
	if c.Probes < 0 || c.Probes > BreakerProbesMax {
		bad("Probes", c.Probes, "must be in [0, "+itoa(BreakerProbesMax)+"]")
	}
	return errs
}

// withDefaults returns a copy of c with every zero field resolved. c must be valid.
func (c BreakerConfig) withDefaults() BreakerConfig {
	c.Window = cmp.Or(c.Window, BreakerWindowDefault)
	c.MinCalls = cmp.Or(c.MinCalls, BreakerMinCallsDefault)
	c.FailureRatio = cmp.Or(c.FailureRatio, BreakerFailureRatioDefault)
	if c.SlowCall > 0 {
		c.SlowRatio = cmp.Or(c.SlowRatio, BreakerSlowRatioDefault)
	}
	c.OpenFor = cmp.Or(c.OpenFor, BreakerOpenForDefault)
	c.MaxOpenFor = cmp.Or(c.MaxOpenFor, max(BreakerMaxOpenForDefault, c.OpenFor))
	c.Probes = cmp.Or(c.Probes, BreakerProbesDefault)
	return c
}

// BreakerState is the state of a key's circuit breaker.
type BreakerState uint8

// The breaker states.
const (
	// BreakerClosed lets every attempt run and counts their outcomes.
	BreakerClosed BreakerState = iota + 1
	// BreakerOpen lets no attempt run until its open period ends.
	BreakerOpen
	// BreakerHalfOpen lets at most BreakerConfig.Probes attempts run.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	default:
		return "BreakerState(" + itoa(int(s)) + ")"
	}
}

// breakerOutcome is how an attempt admitted by a breaker ended, as the kernel
// classifies it.
type breakerOutcome uint8

const (
	// breakerSuccess: the attempt returned nil, within SlowCall if set.
	breakerSuccess breakerOutcome = iota + 1
	// breakerFailure: an error IsFailure accepts, a panic or a timeout.
	breakerFailure
	// breakerSlow: a success that took longer than SlowCall. With SlowCall zero it
	// counts as a success.
	breakerSlow
	// breakerIgnored: not judged (a cancellation). It is not counted, and frees a
	// half-open breaker's probe slot.
	breakerIgnored
)

// breakerBucket counts the outcomes of one slice of a breaker's window. Counts
// saturate at math.MaxUint32 instead of wrapping.
type breakerBucket struct {
	calls, failures, slow uint32
}

// breaker is the circuit breaker of one key: a state machine driven by the times
// and outcomes the loop gives it, with no clock, lock or goroutine of its own.
// Loop-owned. Its window ring is inline, so a breaker is one allocation of under
// 200 bytes.
//
// Times are kept as nanoseconds since born, so that they follow the monotonic
// clock reading of the times passed in. Times passed in must not go backwards; an
// outcome recorded at an earlier time than the newest bucket counts in that bucket.
type breaker struct {
	cfg     *BreakerConfig // immutable: defaulted and valid, shared by the keys of a group
	born    time.Time      // origin of the offsets below
	until   int64          // while open: offset at which it half-opens
	openFor time.Duration  // the last open period; 0 while closed
	head    int64          // index (offset / bucket width) of the newest bucket in ring
	ring    [BreakerBuckets]breakerBucket
	gen     uint32       // changes with each state change
	probing uint16       // while half-open: probes admitted whose outcome is pending
	passed  uint16       // while half-open: probes that succeeded
	st      BreakerState // BreakerOpen stays set after until; state reports it half-open
}

// newBreaker returns a closed breaker with an empty window, created at now. c must
// be defaulted and valid, and must not change while the breaker lives.
func newBreaker(c *BreakerConfig, now time.Time) *breaker {
	return &breaker{cfg: c, born: now, gen: 1, st: BreakerClosed}
}

// offset returns now as nanoseconds since b.born, never below zero.
func (b *breaker) offset(now time.Time) int64 { return max(int64(now.Sub(b.born)), 0) }

// width returns the span of a bucket in nanoseconds.
func (b *breaker) width() int64 { return max(int64(b.cfg.Window)/BreakerBuckets, 1) }

// admit reports whether an attempt may start at now. If ok, gen identifies the
// breaker generation the attempt belongs to and must be passed back to [breaker.done]
// exactly once. If !ok, wake is when admit may next succeed (the end of the open
// period), or zero if it waits for a probe's outcome. An open breaker whose period
// is over turns half-open here. It does not allocate.
func (b *breaker) admit(now time.Time) (ok bool, gen uint32, wake time.Time) {
	switch b.st {
	case BreakerClosed:
		return true, b.gen, time.Time{}
	case BreakerOpen:
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

// done records at now the outcome o of an attempt that [breaker.admit] admitted
// with gen, and returns the transition it caused, if any (from != to): closed to
// open (a trip), half-open to closed or half-open to open. An outcome of an older
// generation changes nothing and is not counted; from and to are then both the
// state at now. It does not allocate, and panics on an unknown outcome.
func (b *breaker) done(now time.Time, gen uint32, o breakerOutcome) (from, to BreakerState) {
	if o < breakerSuccess || o > breakerIgnored {
		panic("kernel: breaker outcome " + itoa(int(o)) + " is unknown")
	}
	if o == breakerSlow && b.cfg.SlowCall == 0 {
		o = breakerSuccess
	}
	if gen != b.gen {
		s := b.state(now)
		return s, s
	}
	switch b.st {
	case BreakerClosed:
		if o == breakerIgnored {
			return BreakerClosed, BreakerClosed
		}
		if b.record(b.offset(now), o) {
			b.toOpen(now, b.cfg.OpenFor)
			return BreakerClosed, BreakerOpen
		}
		return BreakerClosed, BreakerClosed
	case BreakerHalfOpen:
		if b.probing > 0 {
			b.probing--
		}
		switch o {
		case breakerIgnored:
			return BreakerHalfOpen, BreakerHalfOpen
		case breakerSuccess:
			b.passed++
			if int(b.passed) < b.cfg.Probes {
				return BreakerHalfOpen, BreakerHalfOpen
			}
			b.toClosed(now)
			return BreakerHalfOpen, BreakerClosed
		default:
			b.toOpen(now, min(2*b.openFor, b.cfg.MaxOpenFor))
			return BreakerHalfOpen, BreakerOpen
		}
	}
	// Open: no attempt holds an open generation, since admit admits none.
	return BreakerOpen, BreakerOpen
}

// state returns the state at now: an open breaker whose period is over reports
// half-open. It does not change b.
func (b *breaker) state(now time.Time) BreakerState {
	if b.st == BreakerOpen && b.offset(now) >= b.until {
		return BreakerHalfOpen
	}
	return b.st
}

// idle reports whether b is closed with an empty window at now, so that the
// key's breaker may be forgotten: a new one would decide the same. It does not
// know of attempts in flight; the caller keeps the breaker while it has some, so
// that their outcomes meet the generation they were admitted with.
func (b *breaker) idle(now time.Time) bool {
	if b.st != BreakerClosed {
		return false
	}
	calls, _, _ := b.window(now)
	return calls == 0
}

// window returns the outcomes the window holds at now (all zero unless closed).
// It does not change b.
func (b *breaker) window(now time.Time) (calls, failures, slow uint64) {
	if b.st != BreakerClosed {
		return 0, 0, 0
	}
	idx := max(b.offset(now)/b.width(), b.head)
	for i := max(idx-BreakerBuckets+1, 0); i <= b.head; i++ {
		k := &b.ring[i%BreakerBuckets]
		calls += uint64(k.calls)
		failures += uint64(k.failures)
		slow += uint64(k.slow)
	}
	return calls, failures, slow
}

// record counts outcome o (success, failure or slow) at offset off in the window
// and reports whether the window now trips the breaker.
func (b *breaker) record(off int64, o breakerOutcome) bool {
	idx := off / b.width()
	if idx > b.head {
		for i := b.head + 1; i <= min(idx, b.head+BreakerBuckets); i++ {
			b.ring[i%BreakerBuckets] = breakerBucket{}
		}
		b.head = idx
	}
	k := &b.ring[b.head%BreakerBuckets]
	if k.calls < math.MaxUint32 {
		k.calls++
		switch o {
		case breakerFailure:
			k.failures++
		case breakerSlow:
			k.slow++
		}
	}
	var calls, failures, slow uint64
	for i := range b.ring {
		calls += uint64(b.ring[i].calls)
		failures += uint64(b.ring[i].failures)
		slow += uint64(b.ring[i].slow)
	}
	return breakerTrips(b.cfg, calls, failures, slow)
}

// breakerTrips reports whether a closed breaker configured by c trips with a
// window holding these counts.
func breakerTrips(c *BreakerConfig, calls, failures, slow uint64) bool {
	if calls == 0 || calls < uint64(c.MinCalls) {
		return false
	}
	n := float64(calls)
	return float64(failures)/n >= c.FailureRatio || (c.SlowCall > 0 && float64(slow)/n >= c.SlowRatio)
}

// toOpen opens b at now for d.
func (b *breaker) toOpen(now time.Time, d time.Duration) {
	b.st = BreakerOpen
	b.gen++
	b.openFor = d
	b.until = b.offset(now) + int64(d)
	b.probing, b.passed = 0, 0
}

// toHalfOpen turns an open b half-open.
func (b *breaker) toHalfOpen() {
	b.st = BreakerHalfOpen
	b.gen++
	b.probing, b.passed = 0, 0
}

// toClosed closes b at now with an empty window and resets its open period.
func (b *breaker) toClosed(now time.Time) {
	b.st = BreakerClosed
	b.gen++
	b.openFor = 0
	b.ring = [BreakerBuckets]breakerBucket{}
	b.head = b.offset(now) / b.width()
	b.probing, b.passed = 0, 0
}
