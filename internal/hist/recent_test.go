package hist

import (
	"testing"
	"time"
)

// TestRecent: a Read summarises what the histogram recorded, and how the counters
// changed, since the newest kept reading at least Span old (the oldest kept before
// any is); the first Read only keeps its reading.
func TestRecent(t *testing.T) {
	var h Hist
	r := NewRecent(time.Minute, 6, &h)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	observe := func(n int, d time.Duration) {
		for range n {
			h.Observe(0, d)
		}
	}
	observe(100, time.Second) // before the first reading: never in a span
	if sums, deltas, span := r.Read(at(0), 7); span != 0 || sums[0].Count != 0 || deltas[0] != 0 {
		t.Fatalf("first Read = %+v, %v, %v; want zeros", sums, deltas, span)
	}
	observe(10, time.Millisecond)
	sums, deltas, span := r.Read(at(30), 12)
	if span != 30*time.Second || sums[0].Count != 10 || deltas[0] != 5 {
		t.Fatalf("Read at 30 s = %+v, %v, %v; want 10 values, +5, over 30 s", sums[0], deltas, span)
	}
	if p := sums[0].P99; p < time.Millisecond || p > time.Millisecond+time.Millisecond/8 || sums[0].Max > p {
		t.Errorf("P99 = %v, Max = %v; want about 1 ms, not the 1 s values before the span", p, sums[0].Max)
	}
	observe(10, 2*time.Millisecond)
	// At 70 s the reading of 0 s is a minute old: the span starts there.
	if sums, _, span := r.Read(at(70), 20); span != 70*time.Second || sums[0].Count != 20 {
		t.Fatalf("Read at 70 s = %+v over %v, want 20 values over 70 s", sums[0], span)
	}
	// At 100 s the reading of 30 s is: the first 10 values left the span.
	sums, deltas, span = r.Read(at(100), 20)
	if span != 70*time.Second || sums[0].Count != 10 || deltas[0] != 8 {
		t.Fatalf("Read at 100 s = %+v, %v over %v; want the 10 values after 30 s, +8, over 70 s", sums[0], deltas, span)
	}
	// A counter that went down (a reset) changed by 0.
	if _, deltas, _ := r.Read(at(101), 1); deltas[0] != 0 {
		t.Errorf("delta of a counter that went down = %d, want 0", deltas[0])
	}
	// Once frozen, every Read returns what the first one after returns.
	r.Freeze()
	want, _, wantSpan := r.Read(at(110), 1)
	observe(5, time.Millisecond)
	if sums, _, span := r.Read(at(200), 9); span != wantSpan || sums[0] != want[0] {
		t.Errorf("Read after Freeze = %+v over %v, want %+v over %v", sums[0], span, want[0], wantSpan)
	}
}
