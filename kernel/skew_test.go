package kernel_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
	"github.com/benbjohnson/clock"
)

// Kernels whose clocks are off the store's: due times follow the store's clock. The
// MemoryStore reads time.Now, the synctest bubble's virtual clock; each kernel's
// Config.Clock is that clock shifted by its skew.

// ranAt records when (on the store's clock) each payload's task started, and its
// attempts there.
type ranAt struct {
	mu  sync.Mutex
	at  map[string][]time.Time
	run gate // nil: return at once; else block until it opens
}

func (r *ranAt) fn(ctx context.Context, p []byte) error {
	r.mu.Lock()
	if r.at == nil {
		r.at = map[string][]time.Time{}
	}
	r.at[string(p)] = append(r.at[string(p)], time.Now())
	r.mu.Unlock()
	if r.run != nil {
		return r.run.run(ctx)
	}
	return nil
}

func (r *ranAt) get(p string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at[p]...)
}

// skews are the two directions: the submitter ahead of the store and the runner
// behind it, and the other way round.
var skews = []struct {
	name       string
	subm, runr time.Duration
}{
	{"submitter ahead, runner behind", 30 * time.Second, -30 * time.Second},
	{"submitter behind, runner ahead", -30 * time.Second, 30 * time.Second},
}

// TestSkewPoolTaskDueOnStoreClock: a pool task with Delay 2 s, submitted by a
// kernel whose clock is 30 s off the store's, is claimed and run by another kernel
// 30 s off the other way 2 s after the submit on the store's clock: neither 62 s
// late nor at once.
func TestSkewPoolTaskDueOnStoreClock(t *testing.T) {
	for _, tt := range skews {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore()
				busy := make(gate)
				a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 1, Clock: axtest.SkewClock{Clock: clock.New(), Off: tt.subm}})
				b := newTestKernel(t, kernel.Config{Store: s, Owner: "b", Lease: sharedLease, Clock: axtest.SkewClock{Clock: clock.New(), Off: tt.runr}})
				var ra, rb ranAt
				_ = a.Register("k", ra.fn)
				_ = b.Register("k", rb.fn)
				// a's one slot is busy: the pool task is b's to claim.
				if _, err := a.TrySubmit(kernel.Task{Run: busy.run}); err != nil {
					t.Fatalf("TrySubmit() = %v", err)
				}
				synctest.Wait()
				if off := a.StoreOffset(); off != -tt.subm {
					t.Errorf("a.StoreOffset() = %v, want %v", off, -tt.subm)
				}
				t0 := time.Now()
				h, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("p"), Delay: 2 * time.Second, Pool: true})
				if err != nil {
					t.Fatalf("SubmitDurable() = %v", err)
				}
				if st := stored(t, s, h.ID()); !st.RunAt.Equal(t0.Add(2 * time.Second)) {
					t.Errorf("stored RunAt = %v, want %v (2 s after the submit on the store's clock)", st.RunAt, t0.Add(2*time.Second))
				}
				for time.Since(t0) < 4*time.Second && len(rb.get("p")) == 0 {
					advance(10 * time.Millisecond)
				}
				got := rb.get("p")
				if len(got) != 1 || got[0].Sub(t0) < 2*time.Second || got[0].Sub(t0) > 2*time.Second+100*time.Millisecond {
					var after []time.Duration
					for _, at := range got {
						after = append(after, at.Sub(t0))
					}
					t.Fatalf("the pool task ran in b %v after the submit, want once, 2 s after", after)
				}
				busy.open()
				<-h.Done()
			})
		})
	}
}

// TestSkewOrphanRescuedOnTime: a kernel dies (its store is cut off) holding a
// delayed task and a running one; a kernel whose clock is 60 s off the dead one's
// rescues them after the lease and runs the running one at once and the delayed
// one when it is due on the store's clock.
func TestSkewOrphanRescuedOnTime(t *testing.T) {
	for _, tt := range skews {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &cutStore{MemoryStore: storekit.NewMemoryStore()}
				ra := ranAt{run: make(gate)} // a's attempts never end
				var rb ranAt
				a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, Clock: axtest.SkewClock{Clock: clock.New(), Off: tt.subm}})
				b := newTestKernel(t, kernel.Config{Store: s.MemoryStore, Owner: "b", Lease: sharedLease, Clock: axtest.SkewClock{Clock: clock.New(), Off: tt.runr}})
				_ = a.Register("k", ra.fn)
				_ = b.Register("k", rb.fn)
				t0 := time.Now()
				const delay = 3 * time.Second // due after the rescue
				if _, err := a.SubmitDurableMany(context.Background(), []kernel.DurableTask{
					{Kind: "k", Payload: []byte("running")},
					{Kind: "k", Payload: []byte("delayed"), Delay: delay},
				}); err != nil {
					t.Fatalf("SubmitDurableMany() = %v", err)
				}
				synctest.Wait()
				if n := len(ra.get("running")); n != 1 {
					t.Fatalf("the running task ran %d times in a, want once", n)
				}
				s.cut.Store(true) // a is gone for the store
				for time.Since(t0) < delay+time.Second {
					advance(10 * time.Millisecond)
				}
				// b rescues within lease + margin + a quarter lease of its rescuer.
				if got := rb.get("running"); len(got) != 1 || got[0].Sub(t0) > sharedLease+sharedLease/3+sharedLease/4+sharedLease/10 {
					t.Errorf("the running orphan ran in b at %v after the submit, want once, within the lease and a rescue", durations(got, t0))
				}
				if got := rb.get("delayed"); len(got) != 1 || got[0].Sub(t0) < delay || got[0].Sub(t0) > delay+50*time.Millisecond {
					t.Errorf("the delayed orphan ran in b at %v after the submit, want once, %v after", durations(got, t0), delay)
				}
				if len(ra.get("delayed")) != 0 {
					t.Errorf("the delayed task ran in a, which was cut off")
				}
				ra.run.open()
			})
		})
	}
}

func durations(ts []time.Time, t0 time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(t0))
	}
	return out
}
