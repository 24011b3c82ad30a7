package rate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestNewLimit(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		per   time.Duration
		burst int
		late  time.Duration
		want  Limit
	}{
		{"no limit", 0, 0, 0, time.Millisecond, Limit{}},
		{"10 per second", 10, time.Second, 0, 2 * time.Millisecond, Limit{Interval: 1e8, Late: 2e6}},
		{"burst 1 is burst 0", 10, time.Second, 1, 0, Limit{Interval: 1e8}},
		{"burst 5", 10, time.Second, 5, 0, Limit{Interval: 1e8, Tolerance: 4e8}},
		{"one per nanosecond", 1000, time.Microsecond, 0, 0, Limit{Interval: 1}},
		{"interval rounds down", 3, 10, 0, 0, Limit{Interval: 3}},
		{"tolerance capped", 1, time.Duration(math.MaxInt64), 1 << 20, 0, Limit{Interval: math.MaxInt64, Tolerance: math.MaxInt64 / 4}},
		{"tolerance just under the cap", 1, time.Duration(math.MaxInt64 / 4), 2, 0, Limit{Interval: math.MaxInt64 / 4, Tolerance: math.MaxInt64 / 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewLimit(tt.n, tt.per, tt.burst, tt.late); got != tt.want {
				t.Errorf("NewLimit(%d, %v, %d, %v) = %+v, want %+v", tt.n, tt.per, tt.burst, tt.late, got, tt.want)
			}
		})
	}
}

// step is one call on a Bucket at now: Next (checked against next), then
// Refuse if refuse, then Take if take. full, if set, is checked before.
type step struct {
	now    int64
	next   int64
	refuse bool
	take   bool
	full   int8 // 0: not checked; 1: want full; -1: want not full
}

func TestBucket(t *testing.T) {
	iv100 := Limit{Interval: 100, Late: 20}
	tests := []struct {
		name  string
		l     Limit
		steps []step
	}{
		{"no limit", Limit{}, []step{
			{now: 0, next: math.MinInt64, take: true, full: 1},
			{now: 0, next: math.MinInt64, refuse: true, take: true, full: 1},
			{now: 5, next: math.MinInt64, take: true, full: 1},
		}},
		{"evenly spaced", iv100, []step{
			{now: 0, next: 0, take: true, full: 1},
			{now: 50, next: 100, refuse: true, full: -1},
			{now: 100, next: 100, take: true, full: 1},
			{now: 200, next: 200, take: true},
			{now: 300, next: 300},
		}},
		{"a waited-for token taken late counts at its due time", iv100, []step{
			{now: 0, next: 0, take: true},
			{now: 50, next: 100, refuse: true},
			{now: 115, next: 100, take: true},
			{now: 115, next: 200, refuse: true},
			{now: 220, next: 200, take: true}, // exactly Late after
			{now: 220, next: 300},
		}},
		{"a waited-for token taken later than Late counts at now", iv100, []step{
			{now: 0, next: 0, take: true},
			{now: 50, next: 100, refuse: true},
			{now: 121, next: 100, take: true},
			{now: 121, next: 221},
		}},
		{"a token nobody waited for counts at now", iv100, []step{
			{now: 0, next: 0, take: true},
			{now: 110, next: 100, take: true},
			{now: 110, next: 210},
		}},
		{"a take clears the debt", iv100, []step{
			{now: 0, next: 0, take: true},
			{now: 50, next: 100, refuse: true},
			{now: 105, next: 100, take: true},
			{now: 210, next: 200, take: true}, // not waited for: at now
			{now: 210, next: 310},
		}},
		{"burst", Limit{Interval: 100, Tolerance: 200}, []step{
			{now: 0, next: -200, take: true, full: 1},
			{now: 0, next: -100, take: true, full: -1},
			{now: 0, next: 0, take: true},
			{now: 0, next: 100, refuse: true},
			{now: 100, next: 100, take: true},
			{now: 400, next: 200, full: 1}, // refilled after a quiet spell
			{now: 400, next: 200, take: true},
			{now: 400, next: 300, take: true},
			{now: 400, next: 400, take: true},
			{now: 400, next: 500, full: -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bucket
			for i, s := range tt.steps {
				if s.full != 0 {
					if got := b.Full(s.now); got != (s.full > 0) {
						t.Fatalf("step %d: Full(%d) = %v, want %v", i, s.now, got, s.full > 0)
					}
				}
				if got := b.Next(tt.l); got != s.next {
					t.Fatalf("step %d at %d: Next() = %d, want %d", i, s.now, got, s.next)
				}
				if s.refuse {
					b.Refuse(tt.l)
				}
				if s.take {
					b.Take(tt.l, s.now)
				}
			}
		})
	}
}

// TestBucketBacklog drives a backlogged caller that wakes up to Late after each
// token it waits for: its starts keep the rate, each within Late of its token's
// due time, and no window of length w holds more than burst + (w+Late)/Interval
// starts, whatever the wake-ups and quiet spells.
func TestBucketBacklog(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 9))
		burst := 1 + rng.IntN(4)
		iv := int64(1 + rng.IntN(1000))
		late := int64(rng.IntN(3)) * int64(1+rng.IntN(500))
		l := NewLimit(1, time.Duration(iv), burst, time.Duration(late))
		var b Bucket
		var starts []int64
		now := int64(0)
		backlog := rng.IntN(2) == 0
		for range 400 {
			at := b.Next(l)
			if at > now {
				b.Refuse(l)
				now = at + rng.Int64N(late+1) // the wake-up, up to Late after
			}
			b.Take(l, now)
			starts = append(starts, now)
			if !backlog && rng.IntN(10) == 0 {
				now += rng.Int64N(5 * iv) // a quiet spell
			}
		}
		for i := range starts {
			for j := i; j < len(starts); j++ {
				w := starts[j] - starts[i]
				if allowed := int64(burst) + (w+late)/iv; int64(j-i+1) > allowed {
					t.Fatalf("seed %d (%+v, burst %d): %d starts in %d ns, want at most %d", seed, l, burst, j-i+1, w, allowed)
				}
			}
		}
		if !backlog || burst != 1 {
			continue
		}
		for i, at := range starts {
			if due := int64(i) * iv; at < due || at > due+late {
				t.Fatalf("seed %d (%+v): start %d at %d, want in [%d, %d]", seed, l, i, at, due, due+late)
			}
		}
	}
}

func BenchmarkBucket(b *testing.B) {
	l := NewLimit(1000, time.Second, 10, 2*time.Millisecond)
	var bk Bucket
	now := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		now += 500_000
		if bk.Next(l) > now {
			bk.Refuse(l)
			continue
		}
		bk.Take(l, now)
	}
}
