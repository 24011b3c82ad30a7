package check

import (
	"cmp"
	"math"
	"strconv"
	"time"

	"github.com/axsched/ax/internal/breaker"
)

// Defaults and limits of kernel.BreakerConfig. OpenFor and Probes follow
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
)

// Breaker records each invalid field of the breaker configuration c (its zero
// fields take their defaults) under its kernel.BreakerConfig name. Every config it
// accepts is safe: doubling the open period cannot overflow.
func Breaker(e *Errs, c *breaker.Config) {
	ZeroOrIn(e, "Window", c.Window, BreakerWindowMin, BreakerWindowMax)
	In(e, "MinCalls", c.MinCalls, BreakerMinCallsMax)
	ratio := func(field string, v float64) {
		if math.IsNaN(v) || v < 0 || v > 1 {
			e.Bad(field, v, "must be 0 or in (0, 1]")
		}
	}
	ratio("FailureRatio", c.FailureRatio)
	NonNeg(e, "SlowCall", c.SlowCall)
	ratio("SlowRatio", c.SlowRatio)
	if c.SlowCall == 0 && c.SlowRatio > 0 && c.SlowRatio <= 1 {
		e.Bad("SlowRatio", c.SlowRatio, "must be 0 when SlowCall is 0 (no call is slow)")
	}
	openOK := ZeroOrIn(e, "OpenFor", c.OpenFor, BreakerOpenForMin, BreakerOpenForMax)
	if In(e, "MaxOpenFor", c.MaxOpenFor, BreakerOpenForMax) && c.MaxOpenFor > 0 && openOK && c.MaxOpenFor < cmp.Or(c.OpenFor, BreakerOpenForDefault) {
		e.Bad("MaxOpenFor", c.MaxOpenFor, "must be 0 or >= OpenFor ("+cmp.Or(c.OpenFor, BreakerOpenForDefault).String()+")")
	}
	In(e, "Probes", c.Probes, BreakerProbesMax)
}

// BreakerDefaults returns c with every zero field resolved. c must be valid.
func BreakerDefaults(c breaker.Config) breaker.Config {
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

// Name reports whether name is at most max bytes of ASCII letters, digits, '_', '-'
// and '.' (the empty name is).
func Name(name string, max int) bool {
	if len(name) > max {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// Between records field's v unless lo <= v <= hi.
func Between(e *Errs, field string, v, lo, hi int) {
	switch {
	case v < lo:
		e.Bad(field, v, "must be >= "+strconv.Itoa(lo))
	case v > hi:
		e.Bad(field, v, "must be <= "+strconv.Itoa(hi))
	}
}

// Multiplier records field's v unless it is 0 or a finite number >= 1.
func Multiplier(e *Errs, field string, v float64) {
	if v != 0 && (v < 1 || math.IsNaN(v) || math.IsInf(v, 0)) {
		e.Bad(field, v, "must be 0 or a finite number >= 1")
	}
}
