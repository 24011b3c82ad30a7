package retries

import (
	"testing"
	"time"
)

func TestBackoffWithinBounds(t *testing.T) {
	tests := []struct {
		name           string
		jitter, n      int
		lo, hi         time.Duration
		base, maxDelay time.Duration
		mult           float64
	}{
		{"none grows", JitterNone, 3, 4 * time.Second, 4 * time.Second, time.Second, time.Minute, 2},
		{"none capped", JitterNone, 40, time.Minute, time.Minute, time.Second, time.Minute, 2},
		{"huge growth capped", JitterNone, 1 << 30, time.Minute, time.Minute, time.Hour, time.Minute, 1e300},
		{"equal", JitterEqual, 1, 500 * time.Millisecond, time.Second, time.Second, time.Minute, 2},
		{"full", JitterFull, 1, 0, time.Second, time.Second, time.Minute, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 100 {
				if d := Backoff(tt.base, tt.mult, tt.maxDelay, tt.jitter, tt.n); d < tt.lo || d > tt.hi {
					t.Fatalf("Backoff() = %v, want in [%v, %v]", d, tt.lo, tt.hi)
				}
			}
		})
	}
}
