package kernel

import "time"

// BreakerConfig configures the circuit breaker each key of a group holds.
type BreakerConfig struct {
	Window       time.Duration
	MinCalls     int
	FailureRatio float64
	SlowCall     time.Duration
	SlowRatio    float64
	OpenFor      time.Duration
	MaxOpenFor   time.Duration
	Probes       int
	FailFast     bool
	IsFailure    func(err error) bool
}

// BreakerState is the state of one key's breaker.
type BreakerState uint8

const (
	BreakerClosed BreakerState = iota + 1
	BreakerOpen
	BreakerHalfOpen
)

type breakerOutcome uint8

const (
	breakerSuccess breakerOutcome = iota + 1 // the attempt succeeded (and was not slow)
	breakerFailure                           // failed or timed out (a timeout is judged at the timeout, even if the goroutine lives on)
	breakerSlow                              // succeeded but ran longer than SlowCall
	breakerIgnored                           // not counted: canceled, rate-limited, kernel closing
)

// breaker is loop-owned.
type breaker struct{}

// withDefaults returns c with zero fields filled.
func (c BreakerConfig) withDefaults() BreakerConfig { return c }

// validate returns *ConfigError values naming fields under prefix (e.g. `Config.Groups["x"].Breaker`).
func (c *BreakerConfig) validate(prefix string) []error { return nil }

func newBreaker(c *BreakerConfig, now time.Time) *breaker { return &breaker{} }

// admit reports whether an attempt may start at now. If ok, gen identifies the breaker generation the
// attempt belongs to and must be passed back to done. If !ok, wake is when admit may next succeed
// (end of the open period), or zero if it waits for a probe's outcome.
func (b *breaker) admit(now time.Time) (ok bool, gen uint32, wake time.Time) {
	return true, 0, time.Time{}
}

// done records the outcome of an attempt admitted with gen. It returns the transition it caused, if any (from != to).
func (b *breaker) done(now time.Time, gen uint32, o breakerOutcome) (from, to BreakerState) {
	return BreakerClosed, BreakerClosed
}

// state reports the state at now (open turns half-open when its time is up).
func (b *breaker) state(now time.Time) BreakerState { return BreakerClosed }

// idle reports whether the breaker holds nothing worth keeping (closed, empty window), so its key may be forgotten.
func (b *breaker) idle(now time.Time) bool { return true }
