package retries

import (
	"math"
	"math/rand/v2"
	"time"
)

// The jitters of [Backoff].
const (
	JitterFull  = iota // uniformly from [0, d]
	JitterEqual        // from [d/2, d]
	JitterNone         // d itself
)

// Backoff returns the delay before retry number n (1 for the first retry):
// base × mult^(n-1), capped at maxD, then jittered. It is in [0, maxD] however
// large the arguments: the growth is computed in floating point and capped before
// it becomes a Duration.
func Backoff(base time.Duration, mult float64, maxD time.Duration, jitter, n int) time.Duration {
	dd := maxD
	if d := float64(base) * math.Pow(mult, float64(max(n-1, 0))); d < float64(maxD) {
		dd = time.Duration(d) // below maxD, so it fits
	}
	dd = max(dd, 0)
	switch jitter {
	case JitterFull:
		return time.Duration(rand.Uint64N(uint64(dd) + 1)) // <= dd: fits
	case JitterEqual:
		return dd - dd/2 + time.Duration(rand.Uint64N(uint64(dd/2)+1))
	default:
		return dd
	}
}
