package kernel

import (
	"strconv"
	"time"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/kernel/internal/check"
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
// The window is cut into 10 buckets of Window/10, and a
// bucket leaves it whole, so an outcome counts for at least 9/10 of Window and at
// most Window after it was recorded.
type BreakerConfig struct {
	// Window is the span of time over which outcomes are counted while closed. If
	// zero, 10 s; from 100 ms to
	// 24 h.
	Window time.Duration
	// MinCalls is the number of outcomes the window must hold before the breaker
	// may trip. If zero, 10; at most 2^24.
	MinCalls int
	// FailureRatio trips the breaker when failures/calls in the window reaches it.
	// If zero, 0.5; must be in (0, 1] otherwise.
	FailureRatio float64
	// SlowCall is the duration beyond which a successful attempt counts as slow. If
	// zero, no attempt is slow.
	SlowCall time.Duration
	// SlowRatio trips the breaker when slow/calls in the window reaches it. Set it
	// only with SlowCall. If zero, 0.5; must be in
	// (0, 1] otherwise.
	SlowRatio float64
	// OpenFor is how long the breaker stays open after tripping from closed. If
	// zero, 60 s; from 1 ms to
	// MaxOpenFor.
	OpenFor time.Duration
	// MaxOpenFor caps the open period, which doubles each time a half-open breaker
	// opens again. If zero, 10 min, or OpenFor if that
	// is longer; at most 24 h, and not shorter than OpenFor.
	MaxOpenFor time.Duration
	// Probes is the number of attempts a half-open breaker admits, and the number
	// of successes that close it. If zero, 1; at most
	// 10,000.
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
// "." + field, e.g. `Config.Groups["x"].Breaker.FailureRatio` (check.Breaker).
func (c *BreakerConfig) validate(prefix string) []error {
	e := fields(prefix + ".")
	check.Breaker(e, c.params())
	return e.List()
}

// withDefaults returns a copy of c with every zero field resolved. c must be valid.
func (c BreakerConfig) withDefaults() BreakerConfig {
	p := check.BreakerDefaults(*c.params())
	c.Window, c.MinCalls, c.FailureRatio, c.SlowRatio = p.Window, p.MinCalls, p.FailureRatio, p.SlowRatio
	c.OpenFor, c.MaxOpenFor, c.Probes = p.OpenFor, p.MaxOpenFor, p.Probes
	return c
}

// params returns the parameters of the breaker arithmetic of c, which must be
// defaulted and valid.
func (c *BreakerConfig) params() *breaker.Config {
	return &breaker.Config{
		Window: c.Window, MinCalls: c.MinCalls, FailureRatio: c.FailureRatio,
		SlowCall: c.SlowCall, SlowRatio: c.SlowRatio,
		OpenFor: c.OpenFor, MaxOpenFor: c.MaxOpenFor, Probes: c.Probes,
	}
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
		return "BreakerState(" + strconv.Itoa(int(s)) + ")"
	}
}

// breakerState returns s as a BreakerState: the values of the two are the same
// (TestBreakerStateValues).
func breakerState(s breaker.State) BreakerState { return BreakerState(s) }
