package hist

import (
	"sync"
	"testing"
	"time"
)

// TestSummaryWithinBucketError: the percentiles of a known distribution come back
// within a bucket's relative error (1/histSub) above the true value, never below
// it and never above the maximum; Count, Mean and Max are exact.
func TestSummaryWithinBucketError(t *testing.T) {
	var h Hist
	const n = 10_000
	for i := 1; i <= n; i++ {
		h.Observe(i, time.Duration(i)*time.Microsecond)
	}
	s := h.Summary()
	if s.Count != n || s.Max != n*time.Microsecond {
		t.Fatalf("Count, Max = %d, %v; want %d, %v", s.Count, s.Max, n, n*time.Microsecond)
	}
	if want := time.Duration(n+1) * time.Microsecond / 2; s.Mean != want {
		t.Errorf("Mean = %v, want %v", s.Mean, want)
	}
	for _, c := range []struct {
		name string
		got  time.Duration
		q    float64
	}{{"P50", s.P50, 0.5}, {"P90", s.P90, 0.9}, {"P99", s.P99, 0.99}, {"P999", s.P999, 0.999}} {
		exact := time.Duration(c.q*float64(n-1)+1) * time.Microsecond
		hi := exact + exact/histSub + 1
		if c.got < exact || c.got > hi || c.got > s.Max {
			t.Errorf("%s = %v, want within [%v, %v] and at most Max", c.name, c.got, exact, hi)
		}
	}
}

// TestObserveEdges: negative values count as 0, each value lands in the bucket
// whose bounds hold it (up to the largest Duration), any shard number is
// accepted, and an empty histogram summarises to zero.
func TestObserveEdges(t *testing.T) {
	var h Hist
	if s := h.Summary(); s != (Summary{}) {
		t.Fatalf("empty Summary = %+v, want zero", s)
	}
	h.Observe(-5, -time.Second)
	if h.Count(0) != 1 {
		t.Errorf("Count(0) = %d, want the negative value there", h.Count(0))
	}
	const largest = time.Duration(1<<63 - 1)
	h.Observe(1<<40, largest)
	last := histIndex(uint64(largest))
	if h.Count(last) != 1 {
		t.Errorf("Count(%d) = %d, want the largest Duration there", last, h.Count(last))
	}
	if s := h.Summary(); s.Count != 2 || s.Max != largest {
		t.Errorf("Summary = %+v, want Count 2 and Max the largest Duration", s)
	}
	for i := 1; i <= last; i++ {
		if Lower(i) <= Lower(i-1) {
			t.Fatalf("Lower(%d) = %d, not above Lower(%d) = %d", i, Lower(i), i-1, Lower(i-1))
		}
	}
	for _, v := range []uint64{0, 1, 7, 8, 9, 15, 16, 1000, 1 << 20, 1<<20 + 1, 1<<62 + 12345, uint64(largest)} {
		i := histIndex(v)
		if Lower(i) > v || (i < last && Lower(i+1) <= v) {
			t.Errorf("value %d in bucket %d of [%d, %d)", v, i, Lower(i), Lower(i+1))
		}
	}
}

// TestConcurrentObserve: recorders on many shards and a reader at once lose no
// count (and -race sees no race).
func TestConcurrentObserve(t *testing.T) {
	var h Hist
	var wg sync.WaitGroup
	const workers, each = 8, 5_000
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				h.Observe(w, time.Duration(i))
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = h.Summary()
		}
	})
	wg.Wait()
	if c := h.Summary().Count; c != workers*each {
		t.Errorf("Count = %d, want %d", c, workers*each)
	}
}
