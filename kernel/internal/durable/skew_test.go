package durable

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/benbjohnson/clock"
)

// slowClockStore answers Now with its clock's time read between two steps of the
// kernel's mock clock: a round trip of rtt on the kernel's clock.
type slowClockStore struct {
	*storekit.MemoryStore
	kernel *clock.Mock
	at     time.Time // the store's time it answers
	rtt    time.Duration
}

func (s *slowClockStore) Now(context.Context) (time.Time, error) {
	s.kernel.Add(s.rtt)
	return s.at, nil
}

func direct(f func()) (any, bool) { f(); return nil, true }

// TestSkewMeasure: the offset is bounded by the measure of the shortest round trip;
// Offset is its lower bound, or zero when the clocks agree within it.
func TestSkewMeasure(t *testing.T) {
	k := clock.NewMock()
	base := k.Now()
	st := &slowClockStore{MemoryStore: storekit.NewMemoryStore(), kernel: k}
	var s Skew
	measure := func(storeAt time.Time, rtt time.Duration) time.Duration {
		t.Helper()
		st.at, st.rtt = storeAt, rtt
		if err := s.Measure(context.Background(), st, k, direct); err != nil {
			t.Fatal(err)
		}
		return s.Offset()
	}
	// The store read 30 s ahead of the call, with a 4 ms round trip: [30 s - 4 ms, 30 s].
	if got := measure(base.Add(30*time.Second), 4*time.Millisecond); got != 30*time.Second-4*time.Millisecond {
		t.Errorf("Offset() = %v, want 30s - 4ms", got)
	}
	// A shorter round trip wins; a longer one later does not.
	now := k.Now()
	if got := measure(now.Add(-20*time.Second), time.Millisecond); got != -20*time.Second-time.Millisecond {
		t.Errorf("Offset() = %v, want -20s - 1ms", got)
	}
	now = k.Now()
	if got := measure(now.Add(time.Minute), 10*time.Millisecond); got != -20*time.Second-time.Millisecond {
		t.Errorf("Offset() after a slower measure = %v, want -20s - 1ms kept", got)
	}
	// The store's time within the round trip: [-1 ms, +1 ms].
	for range skewSamples {
		now = k.Now()
		measure(now.Add(time.Millisecond), 2*time.Millisecond)
	}
	if got := s.Offset(); got != 0 {
		t.Errorf("Offset() with the store's time inside the round trip = %v, want 0", got)
	}
	if s.DueToStore(base) != base || s.DueFromStore(base) != base || s.NowToStore(base) != base {
		t.Error("clocks that agree within the round trip must convert nothing")
	}
	// Clocks that disagree: [5 s - 2 ms, 5 s]. Due times take the bound that makes
	// them later, now the one that makes it earlier.
	for range skewSamples {
		now = k.Now()
		measure(now.Add(5*time.Second), 2*time.Millisecond)
	}
	if got, want := s.DueToStore(base), base.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("DueToStore() = %v, want %v", got, want)
	}
	if got, want := s.DueFromStore(base), base.Add(-5*time.Second+2*time.Millisecond); !got.Equal(want) {
		t.Errorf("DueFromStore() = %v, want %v", got, want)
	}
	if got, want := s.NowToStore(base), base.Add(5*time.Second-2*time.Millisecond); !got.Equal(want) {
		t.Errorf("NowToStore() = %v, want %v", got, want)
	}
	var none *Skew
	if none.Offset() != 0 || none.Measure(context.Background(), st, k, direct) != nil {
		t.Error("a nil Skew must be an offset of zero")
	}
	if !none.DueToStore(base).Equal(base) || !none.NowToStore(base).Equal(base) || !none.DueFromStore(base).Equal(base) {
		t.Error("a nil Skew must convert nothing")
	}
	z := time.Time{}
	if (&Skew{}).DueToStore(z) != z || (&Skew{}).NowToStore(z) != z || (&Skew{}).DueFromStore(z) != z {
		t.Error("the zero time must stay zero")
	}
	_ = store.Clock(st)
}

// stepClock is a kernel's clock that moves only when told (Now is all Measure
// reads; the mock clock's Add yields for a millisecond, too slow for many cases).
type stepClock struct {
	clock.Clock
	now time.Time
}

func (c *stepClock) Now() time.Time { return c.now }

// skewedClockStore answers Now with the time of a store whose clock runs off ahead
// of the kernel's, read at a point frac of a round trip of rtt.
type skewedClockStore struct {
	*storekit.MemoryStore
	kernel *stepClock
	off    time.Duration
	rtt    time.Duration
	frac   float64
}

func (s *skewedClockStore) Now(context.Context) (time.Time, error) {
	read := time.Duration(float64(s.rtt) * s.frac)
	at := s.kernel.now.Add(read + s.off)
	s.kernel.now = s.kernel.now.Add(s.rtt)
	return at, nil
}

// TestSkewNeverEarly: a due time one kernel writes on the store's clock and another
// reads back never falls before the true one, nor does a claim's "now" run ahead of
// the store's, whatever the kernels' offsets, round trips and the moment of the
// round trip the store read its clock; except that clocks that agree within a round
// trip are taken to agree, and may be off by up to that round trip.
func TestSkewNeverEarly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	offs := []time.Duration{0, time.Millisecond, -time.Millisecond, 30 * time.Second, -30 * time.Second}
	for i := range 2000 {
		var sk [2]Skew
		var clk [2]*stepClock
		var off, slack [2]time.Duration
		for j := range sk {
			clk[j] = &stepClock{now: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)}
			off[j] = offs[rng.IntN(len(offs))] + time.Duration(rng.Int64N(int64(time.Millisecond)))
			st := &skewedClockStore{MemoryStore: storekit.NewMemoryStore(), kernel: clk[j], off: off[j]}
			for range 1 + rng.IntN(skewSamples+2) {
				st.rtt, st.frac = time.Duration(rng.Int64N(int64(20*time.Millisecond))), rng.Float64()
				if err := sk[j].Measure(context.Background(), st, clk[j], direct); err != nil {
					t.Fatal(err)
				}
			}
			if sk[j].Offset() == 0 {
				slack[j] = off[j].Abs() // taken to agree: off within the round trip
				if slack[j] > 20*time.Millisecond {
					t.Fatalf("case %d: offset %v taken for agreement", i, off[j])
				}
			}
		}
		// Kernel 0 writes a due time d on its clock; on the store's clock it is
		// d + off[0]; kernel 1 reads it back: on its clock the true one is
		// d + off[0] - off[1].
		d := clk[0].Now().Add(time.Duration(rng.Int64N(int64(time.Minute))))
		stored := sk[0].DueToStore(d)
		if truth := d.Add(off[0]); stored.Before(truth.Add(-slack[0])) {
			t.Fatalf("case %d: DueToStore = %v before the true %v", i, stored, truth)
		}
		if got, truth := sk[1].DueFromStore(stored), stored.Add(-off[1]); got.Before(truth.Add(-slack[1])) {
			t.Fatalf("case %d: DueFromStore = %v before the true %v", i, got, truth)
		}
		now := clk[1].Now()
		if got, truth := sk[1].NowToStore(now), now.Add(off[1]); got.After(truth.Add(slack[1])) {
			t.Fatalf("case %d: NowToStore = %v after the store's %v", i, got, truth)
		}
	}
}
