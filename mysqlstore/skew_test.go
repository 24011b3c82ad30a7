package mysqlstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
	"github.com/benbjohnson/clock"
)

// Kernels whose clocks are 30 s off the database's: due times follow the database's
// clock (UTC_TIMESTAMP), as leases do. The test process runs on the database's
// machine, so time.Now is the database's clock.

// slack is how late a task may run in these tests, on a loaded machine: far below
// the 30 s of the skews.
const slack = 2 * time.Second

// skews are the two directions: the first kernel ahead of the database and the
// second behind it, and the other way round.
var skews = []struct {
	name        string
	first, then time.Duration
}{
	{"ahead then behind", 30 * time.Second, -30 * time.Second},
	{"behind then ahead", -30 * time.Second, 30 * time.Second},
}

// cutStore is a Store a kernel sees through until cut: then every call the kernel
// makes fails, as if its process were gone.
type cutStore struct {
	*mysqlstore.Store
	cut atomic.Bool
}

var errCut = fmt.Errorf("cut off: %w", store.ErrStoreUnavailable)

func (s *cutStore) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.Store.CommitAs(ctx, o, cs)
}

func (s *cutStore) Rescue(ctx context.Context, o store.Owner, limit int) ([]store.StoredTask, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.Store.Rescue(ctx, o, limit)
}

func (s *cutStore) Claim(ctx context.Context, o store.Owner, req store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	if s.cut.Load() {
		return nil, time.Time{}, errCut
	}
	return s.Store.Claim(ctx, o, req)
}

func (s *cutStore) Join(ctx context.Context, name string, lease time.Duration) (store.Owner, error) {
	if s.cut.Load() {
		return store.Owner{}, errCut
	}
	return s.Store.Join(ctx, name, lease)
}

// start is a start of a durable task: its payload and when it started.
type start struct {
	payload string
	at      time.Time
}

func skewKernel(t *testing.T, s store.Store, owner string, off time.Duration, maxConc int, starts chan<- start, block bool) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(kernel.Config{
		Store: s, Owner: owner, Lease: time.Second, StoreTimeout: 2 * time.Second,
		MaxConcurrency: maxConc, Clock: axtest.SkewClock{Clock: clock.New(), Off: off},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	if err := k.Register("k", func(ctx context.Context, p []byte) error {
		starts <- start{string(p), time.Now()}
		if block {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSkewPoolTaskDueOnDatabaseClock: a pool task with Delay 2 s, submitted by a
// kernel 30 s off the database's clock, runs in a kernel 30 s off the other way 2 s
// after the submit on the database's clock.
func TestSkewPoolTaskDueOnDatabaseClock(t *testing.T) {
	for _, tt := range skews {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := setup(t, mysqlstore.Options{})
			sa, sb := make(chan start, 4), make(chan start, 4)
			a := skewKernel(t, s, "a", tt.first, 1, sa, false)
			skewKernel(t, s, "b", tt.then, 4, sb, false)
			busy := make(chan struct{})
			t.Cleanup(func() { close(busy) })
			// a's one slot is busy: the pool task is b's to claim.
			if _, err := a.TrySubmit(kernel.Task{Run: func(ctx context.Context) error {
				select {
				case <-busy:
				case <-ctx.Done():
				}
				return nil
			}}); err != nil {
				t.Fatal(err)
			}
			if off := a.StoreOffset(); off < -tt.first-50*time.Millisecond || off > -tt.first+50*time.Millisecond {
				t.Errorf("a.StoreOffset() = %v, want about %v", off, -tt.first)
			}
			t0 := time.Now()
			if _, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("p"), Delay: 2 * time.Second, Pool: true}); err != nil {
				t.Fatal(err)
			}
			got := axtest.WaitOrTimeout(t, sb, "the pool task to run in b")
			if d := got.at.Sub(t0); d < 2*time.Second-5*time.Millisecond || d > 2*time.Second+slack {
				t.Errorf("the pool task ran in b %v after the submit, want 2 s after", d)
			}
		})
	}
}

// TestSkewOrphanRescuedOnTime: a kernel 30 s off the database's clock is gone (cut
// off, its lease expired in the database) holding a running task and a delayed one;
// a kernel 30 s off the other way rescues both, runs the running one at once and the
// delayed one when it is due on the database's clock.
func TestSkewOrphanRescuedOnTime(t *testing.T) {
	for _, tt := range skews {
		t.Run(tt.name, func(t *testing.T) {
			s, db := setup(t, mysqlstore.Options{})
			cs := &cutStore{Store: s}
			sa, sb := make(chan start, 4), make(chan start, 4)
			a := skewKernel(t, cs, "a", tt.first, 4, sa, true)
			skewKernel(t, s, "b", tt.then, 4, sb, false)
			const delay = 3 * time.Second
			t0 := time.Now()
			if _, err := a.SubmitDurableMany(context.Background(), []kernel.DurableTask{
				{Kind: "k", Payload: []byte("running")},
				{Kind: "k", Payload: []byte("delayed"), Delay: delay},
			}); err != nil {
				t.Fatal(err)
			}
			if got := axtest.WaitOrTimeout(t, sa, "the running task to start in a"); got.payload != "running" {
				t.Fatalf("a started %q, want the running task", got.payload)
			}
			cs.cut.Store(true)
			if _, err := db.ExecContext(context.Background(), "UPDATE `"+s.Table()+"_owners` SET expires_at = UTC_TIMESTAMP(6) WHERE name = 'a'"); err != nil {
				t.Fatal(err)
			}
			expired := time.Now()
			at := map[string]time.Time{}
			for range 2 {
				got := axtest.WaitOrTimeout(t, sb, "the orphans to run in b")
				at[got.payload] = got.at
			}
			// b's rescuer comes within a quarter lease (and a tenth of it of jitter).
			if d := at["running"].Sub(expired); d < 0 || d > time.Second/4+time.Second/10+slack {
				t.Errorf("the running orphan ran in b %v after a's lease expired, want within b's next rescue", d)
			}
			if d := at["delayed"].Sub(t0); d < delay-5*time.Millisecond || d > delay+slack {
				t.Errorf("the delayed orphan ran in b %v after the submit, want %v after", d, delay)
			}
		})
	}
}

// gridSpec targets every multiple of d since the Unix epoch: absolute times.
type gridSpec time.Duration

func (g gridSpec) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(g)).Add(time.Duration(g))
}

// TestSkewDurableScheduleOnDatabaseClock: a durable schedule on a kernel 30 s off
// the database's clock fires each target when the database's clock reaches it.
func TestSkewDurableScheduleOnDatabaseClock(t *testing.T) {
	for _, tt := range skews {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := setup(t, mysqlstore.Options{})
			k, err := kernel.New(kernel.Config{
				Store: s, Owner: "a", Lease: time.Second, StoreTimeout: 2 * time.Second,
				Clock: axtest.SkewClock{Clock: clock.New(), Off: tt.first},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close() })
			type occ struct{ target, at time.Time }
			ch := make(chan occ, 16)
			if err := k.Register("occ", func(ctx context.Context, _ []byte) error {
				_, target, _ := schedule.OccurrenceOf(ctx)
				ch <- occ{target, time.Now()}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			sch, err := schedule.New(k, schedule.Config{Store: s})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sch.Stop)
			if _, err := sch.AddDurable(gridSpec(time.Second), "occ", nil, &schedule.Options{Name: "grid"}); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				o := axtest.WaitOrTimeout(t, ch, "an occurrence")
				if d := o.at.Sub(o.target); d < -5*time.Millisecond || d > slack {
					t.Errorf("the occurrence of %v ran %v after its target on the database's clock, want within %v, never before", o.target.Format("15:04:05.000"), d, slack)
				}
			}
		})
	}
}
