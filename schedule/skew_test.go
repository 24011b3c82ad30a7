package schedule

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
	"github.com/benbjohnson/clock"
)

// TestScheduleDurableSkewedClock: a durable schedule every minute on the minute,
// added by a scheduler whose kernel's clock is 30 s off the store's, fires each
// target when the store's clock reaches it: neither 30 s early nor 30 s late.
func TestScheduleDurableSkewedClock(t *testing.T) {
	for _, off := range []time.Duration{30 * time.Second, -30 * time.Second} {
		t.Run(off.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore() // on the bubble's clock
				l := newOccLog()
				ran := map[time.Time]time.Time{} // target → when it ran, on the store's clock
				k, sch := setup(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, Clock: axtest.SkewClock{Clock: clock.New(), Off: off}}, Config{Store: s})
				fn := l.fn("a", nil)
				if err := k.Register("occ", func(ctx context.Context, p []byte) error {
					if _, at, ok := OccurrenceOf(ctx); ok {
						l.mu.Lock()
						ran[at] = time.Now()
						l.mu.Unlock()
					}
					return fn(ctx, p)
				}); err != nil {
					t.Fatal(err)
				}
				sp, err := ParseCron("* * * * *", time.UTC)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now() // on the minute: the bubble starts at midnight
				mustScheduleDurable(t, sch, sp, Options{})
				for time.Since(start) < 3*time.Minute+time.Second {
					advance(100 * time.Millisecond)
				}
				got := l.targets(t)
				if len(got) != 3 {
					t.Fatalf("%d occurrences ran (%v), want 3 in 3 minutes", len(got), got)
				}
				l.mu.Lock()
				defer l.mu.Unlock()
				for i, at := range got {
					if want := start.Add(time.Duration(i+1) * time.Minute); !at.Equal(want) {
						t.Errorf("occurrence %d targets %v, want %v (on the store's clock)", i, at, want)
					}
					if late := ran[at].Sub(at); late < 0 || late > time.Second {
						t.Errorf("occurrence of %v ran %v after its target on the store's clock, want within 1 s, never before", at.Format("15:04:05"), late)
					}
				}
			})
		})
	}
}
