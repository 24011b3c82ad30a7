package kernel

import (
	"math"
	"math/rand/v2"
	"time"
)

// DefaultBackoff is the delay before retry number n (1 for the first retry) under
// policy p: Base × Multiplier^(n-1), capped at Max, then jittered per p.Jitter.
// p's zero fields take their defaults. The result is in [0, Max] for every policy
// that validates, however large its fields: the growth is computed in floating
// point and capped before it becomes a Duration.
func DefaultBackoff(p RetryPolicy, n int) time.Duration {
	p = p.withDefaults()
	dd := p.Max
	if d := float64(p.Base) * math.Pow(p.Multiplier, float64(max(n-1, 0))); d < float64(p.Max) {
		dd = time.Duration(d) // below Max, so it fits
	}
	dd = max(dd, 0)
	switch p.Jitter {
	case JitterFull:
		return time.Duration(rand.Uint64N(uint64(dd) + 1)) // <= dd: fits
	case JitterEqual:
		return dd - dd/2 + time.Duration(rand.Uint64N(uint64(dd/2)+1))
	default:
		return dd
	}
}

// backoff is the delay before the retry that follows attempt n. A BackoffFunc's
// negative answer means no delay. The loop waits for a BackoffFunc, which runs on
// a goroutine of its own (callGuarded) so that neither a panic nor a
// runtime.Goexit in it ends the loop; either one is counted in
// Stats.CallbackPanics and gets the default rule's delay instead.
func (k *Kernel) backoff(p *RetryPolicy, n int, err error) time.Duration {
	if p.BackoffFunc != nil {
		var d time.Duration
		if _, ok := callGuarded(k, func() { d = p.BackoffFunc(n, err) }); ok {
			return max(d, 0)
		}
		k.m.callbackPanics.Inc()
	}
	return DefaultBackoff(*p, n)
}
