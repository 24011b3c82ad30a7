package durable

import (
	"context"
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

// TestSkewMeasure: the offset is the bound of the shortest round trip nearest zero;
// clocks that agree within a round trip get none.
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
	if got := measure(now.Add(-20*time.Second), time.Millisecond); got != -20*time.Second {
		t.Errorf("Offset() = %v, want -20s", got)
	}
	now = k.Now()
	if got := measure(now.Add(time.Minute), 10*time.Millisecond); got != -20*time.Second {
		t.Errorf("Offset() after a slower measure = %v, want -20s kept", got)
	}
	// The store's time within the round trip: no offset.
	for range skewSamples {
		now = k.Now()
		measure(now.Add(time.Millisecond), 2*time.Millisecond)
	}
	if got := s.Offset(); got != 0 {
		t.Errorf("Offset() with the store's time inside the round trip = %v, want 0", got)
	}
	if got := s.ToStore(base); !got.Equal(base) {
		t.Errorf("ToStore() = %v, want %v", got, base)
	}
	var none *Skew
	if none.Offset() != 0 || none.Measure(context.Background(), st, k, direct) != nil {
		t.Error("a nil Skew must be an offset of zero")
	}
	if (&Skew{}).ToStore(time.Time{}) != (time.Time{}) {
		t.Error("ToStore(zero) must stay zero")
	}
	_ = store.Clock(st)
}
