package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// Several kernels on one SharedStore, in one process: a MemoryStore shared by two
// kernels, on a synctest bubble's virtual clock (the store's leases read time.Now,
// which the bubble makes virtual).

const sharedLease = time.Second

// cutStore is a MemoryStore that can be cut off: while cut, every call fails with
// ErrStoreUnavailable, as if the database were unreachable from this process only.
type cutStore struct {
	*storekit.MemoryStore
	cut atomic.Bool
}

var errCut = fmt.Errorf("cut off: %w", store.ErrStoreUnavailable)

func (s *cutStore) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.MemoryStore.Commit(ctx, cs)
}

func (s *cutStore) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.MemoryStore.CommitAs(ctx, o, cs)
}

func (s *cutStore) Rescue(ctx context.Context, o store.Owner, limit int) ([]store.StoredTask, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.MemoryStore.Rescue(ctx, o, limit)
}

func (s *cutStore) Join(ctx context.Context, name string, lease time.Duration) (store.Owner, error) {
	if s.cut.Load() {
		return store.Owner{}, errCut
	}
	return s.MemoryStore.Join(ctx, name, lease)
}

func (s *cutStore) Get(ctx context.Context, id string) (store.StoredTask, error) {
	if s.cut.Load() {
		return store.StoredTask{}, errCut
	}
	return s.MemoryStore.Get(ctx, id)
}

// runLog counts the runs of each payload, across kernels.
type runLog struct {
	mu   sync.Mutex
	runs map[string]int
	by   map[string][]string // payload → the kernels that ran it
}

func newRunLog() *runLog { return &runLog{runs: map[string]int{}, by: map[string][]string{}} }

func (r *runLog) fn(who string, g gate) kernel.DurableFunc {
	return func(ctx context.Context, p []byte) error {
		r.mu.Lock()
		r.runs[string(p)]++
		r.by[string(p)] = append(r.by[string(p)], who)
		r.mu.Unlock()
		if g != nil {
			return g.run(ctx)
		}
		return nil
	}
}

func (r *runLog) count(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[p]
}

// TestSharedLiveOwnersKeepTheirTasks: two live kernels on one store never take each
// other's tasks, however long they run.
func TestSharedLiveOwnersKeepTheirTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		g := make(gate)
		a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 4})
		b := newTestKernel(t, kernel.Config{Store: s, Owner: "b", Lease: sharedLease, MaxConcurrency: 4})
		_ = a.Register("k", log.fn("a", g))
		_ = b.Register("k", log.fn("b", g))
		var hs []*kernel.Handle
		for i := range 20 {
			k := a
			if i%2 == 1 {
				k = b
			}
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i)})
			if err != nil {
				t.Fatalf("SubmitDurable() = %v", err)
			}
			hs = append(hs, h)
		}
		// Ten leases pass while the tasks hold the slots: heartbeats keep both owners.
		for range 10 {
			advance(sharedLease)
		}
		g.open()
		if got := waitAll(t, hs); got[kernel.Succeeded] != 20 {
			t.Fatalf("ends = %v, want 20 succeeded", got)
		}
		for i := range 20 {
			if n := log.count(fmt.Sprintf("t%d", i)); n != 1 {
				t.Errorf("t%d ran %d times (%v), want once", i, n, log.by[fmt.Sprintf("t%d", i)])
			}
		}
	})
}

// TestSharedRescueAfterLeaseEnds: a kernel cut off from the store stops starting
// attempts; once its lease ended, the other kernel rescues its tasks within lease +
// margin and runs them; the cut-off kernel, back, finds its starts refused (its
// tasks end Abandoned with ErrTaskTaken, never run twice) and joins again.
func TestSharedRescueAfterLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &cutStore{MemoryStore: storekit.NewMemoryStore()}
		log := newRunLog()
		ga := make(gate)
		// a sees the store through the cut; b directly.
		a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 1})
		b := newTestKernel(t, kernel.Config{Store: s.MemoryStore, Owner: "b", Lease: sharedLease, MaxConcurrency: 4})
		_ = a.Register("k", log.fn("a", ga))
		_ = b.Register("k", log.fn("b", nil))
		// One submit of five while a is idle: they stay a's (t0 runs, the others queue).
		var ts []kernel.DurableTask
		for i := range 5 {
			ts = append(ts, kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i), MaxAttempts: 3})
		}
		hs, err := a.SubmitDurableMany(context.Background(), ts)
		if err != nil {
			t.Fatalf("SubmitDurableMany() = %v", err)
		}
		synctest.Wait()
		if log.count("t0") != 1 || log.count("t1") != 0 {
			t.Fatalf("before the cut: t0 ran %d, t1 %d; want t0 running on a's one slot", log.count("t0"), log.count("t1"))
		}
		cutAt := time.Now()
		s.cut.Store(true)
		ga.open() // t0 ends in a; its success cannot be stored
		// b rescues a's tasks within lease + margin, and runs the queued ones.
		for time.Since(cutAt) < sharedLease+sharedLease/3+sharedLease/4 {
			advance(sharedLease / 10)
		}
		for i := 1; i < 5; i++ {
			if n := log.by[fmt.Sprintf("t%d", i)]; len(n) != 1 || n[0] != "b" {
				t.Fatalf("t%d ran in %v within lease + margin of the cut, want once in b", i, n)
			}
		}
		// a is back: its commit is refused, it joins again; no task runs in a again.
		s.cut.Store(false)
		for range 10 {
			advance(sharedLease / 4)
		}
		for i, h := range hs {
			t.Logf("t%d: %v %v", i, h.State(), h.Err())
		}
		t.Logf("a stats: %+v", a.Stats())
		ends := waitAll(t, hs)
		for i := 1; i < 5; i++ {
			h := hs[i]
			if n := log.count(fmt.Sprintf("t%d", i)); n != 1 {
				t.Errorf("t%d ran %d times (%v), want once", i, n, log.by[fmt.Sprintf("t%d", i)])
			}
			if h.State() != kernel.Abandoned || !errors.Is(h.Err(), kernel.ErrTaskTaken) {
				t.Errorf("a's handle of t%d: %v, %v; want abandoned with ErrTaskTaken", i, h.State(), h.Err())
			}
		}
		t.Logf("a's handles: %v", ends)
		// t0 ran in a before the cut; its success was refused, and b ran it again
		// as a new attempt (at least once).
		if n := log.by["t0"]; len(n) != 2 || n[0] != "a" || n[1] != "b" {
			t.Errorf("t0 ran in %v, want in a (before the cut), then in b", n)
		}
		for i := range 5 {
			st := stored(t, s.MemoryStore, hs[i].ID())
			if st.State != kernel.Succeeded {
				t.Errorf("t%d stored %v, want succeeded", i, st.State)
			}
		}
		owners, err := s.Owners(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, o := range owners {
			if o.Live && o.Name == "a" {
				live++
			}
		}
		if live != 1 {
			t.Errorf("owners %+v: want a live again under a new epoch", owners)
		}
		if st := a.Stats().Store; st.Owner != "a" || st.Joins < 2 || st.LeaseLost < 1 {
			t.Errorf("a's Stats().Store = %+v, want owner a, at least 2 joins and 1 lease lost", st)
		}
		if st := b.Stats().Store; st.Rescued < 5 {
			t.Errorf("b's Stats().Store.Rescued = %d, want a's 5 tasks at least", st.Rescued)
		}
	})
}

// TestSharedPoolSpillsToIdleKernel: a kernel with no room left (Capacity) sends its
// further durable tasks to the pool instead of waiting; an idle kernel claims and
// runs them; the full kernel's handles follow them and end as the store says. A task
// asked for the pool (DurableTask.Pool) runs once, wherever a slot is free.
func TestSharedPoolSpillsToIdleKernel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		ga := make(gate)
		a := newTestKernel(t, kernel.Config{
			Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 1,
			Capacity: kernel.ByPriority[int]{High: 1, Normal: 1, Low: 1},
		})
		_ = a.Register("k", log.fn("a", ga))
		h0, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("t0")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // t0 holds a's one slot
		h1, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("t1")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // t1 holds a's room for one Normal task: a is full
		var hs []*kernel.Handle
		for i := 2; i <= 4; i++ {
			h, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i)})
			if err != nil {
				t.Fatalf("SubmitDurable() = %v", err)
			}
			hs = append(hs, h)
		}
		synctest.Wait()
		for i, h := range hs {
			if h.State() != kernel.Queued {
				t.Fatalf("t%d: %v, want queued (in the pool)", i+2, h.State())
			}
		}
		if n := log.count("t2"); n != 0 {
			t.Fatalf("t2 ran %d times before any kernel was free", n)
		}
		b := newTestKernel(t, kernel.Config{Store: s, Owner: "b", Lease: sharedLease, MaxConcurrency: 4})
		_ = b.Register("k", log.fn("b", nil))
		for range 10 { // b claims at once; a reads their ends within a few polls
			advance(sharedLease / 4)
		}
		for i, h := range hs {
			p := fmt.Sprintf("t%d", i+2)
			if by := log.by[p]; len(by) != 1 || by[0] != "b" {
				t.Errorf("%s ran in %v, want once in b", p, by)
			}
			if h.State() != kernel.Succeeded || h.Err() != nil {
				t.Errorf("a's handle of %s: %v, %v; want succeeded (in b)", p, h.State(), h.Err())
			}
		}
		if n := log.count("t1"); n != 0 {
			t.Fatalf("t1 (queued in a) ran %d times while a's slot was taken", n)
		}
		ga.open()
		if err := h0.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := h1.Wait(context.Background()); err != nil || log.by["t1"][0] != "a" {
			t.Fatalf("t1: Wait() = %v, ran in %v; want in a", err, log.by["t1"])
		}
		// Asked for the pool while both are free: one of them runs it, once.
		hp, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("p"), Pool: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := hp.Wait(context.Background()); err != nil || log.count("p") != 1 {
			t.Fatalf("pool task: Wait() = %v, ran %d times (%v)", err, log.count("p"), log.by["p"])
		}
		st := a.Stats()
		if n := st.ByPriority.Normal; n.Submitted != n.Succeeded {
			t.Errorf("a's Stats: submitted %d, succeeded %d; want equal", n.Submitted, n.Succeeded)
		}
		if st.Store.Following != 0 {
			t.Errorf("a's Stats().Store.Following = %d, want 0 (every pool task ended)", st.Store.Following)
		}
		// t2, t3 and t4 claimed by b; p claimed by b or adopted by a.
		sa, sb := a.Stats().Store, b.Stats().Store
		if c := sa.Claimed + sb.Claimed + sa.Adopted; c != 4 {
			t.Errorf("claimed %d (a) + %d (b) and adopted %d (a), want 4 in all", sa.Claimed, sb.Claimed, sa.Adopted)
		}
	})
}

// TestSharedCloseLeavesTasksToOthers: a kernel that closes with tasks left live
// leaves the store; the other kernel rescues them at its next rescue, not a lease
// later.
func TestSharedCloseLeavesTasksToOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		a, err := kernel.New(kernel.Config{Store: s, Owner: "a", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		b := newTestKernel(t, kernel.Config{Store: s, Owner: "b", Lease: time.Minute})
		_ = a.Register("k", log.fn("a", nil))
		_ = b.Register("k", log.fn("b", nil))
		for i := range 3 {
			if _, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i), Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		// b's rescuer runs every quarter lease (± a tenth).
		for time.Since(closed) < time.Minute/4+time.Minute/10 {
			advance(time.Second)
		}
		live, err := s.Recover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		owners, _ := s.Owners(context.Background())
		for _, o := range owners {
			if o.Name == "a" {
				t.Errorf("owner a still known after Close and a rescue: %+v", o)
			}
			if o.Name == "b" && o.Tasks != 3 {
				t.Errorf("b holds %d tasks, want the 3 a left", o.Tasks)
			}
		}
		if len(live) != 3 {
			t.Fatalf("%d live tasks, want 3 (delayed, now b's)", len(live))
		}
	})
}

// TestSharedConfig: Owner and Lease are validated and cannot change.
func TestSharedConfig(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   kernel.Config
		field string
	}{
		{"owner_too_long", kernel.Config{Owner: string(make([]byte, store.OwnerNameMax+1))}, "Config.Owner"},
		{"lease_too_short", kernel.Config{Lease: time.Millisecond}, "Config.Lease"},
		{"lease_too_long", kernel.Config{Lease: 2 * time.Hour}, "Config.Lease"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var ce *kernel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate() = %v, want a *ConfigError for %s", err, tt.field)
			}
		})
	}
	k := newTestKernel(t, kernel.Config{Store: storekit.NewMemoryStore(), Owner: "x"})
	if err := k.Update(func(c *kernel.Config) { c.Lease = time.Minute }); err == nil {
		t.Fatal("Update(Lease) = nil, want refused")
	}
}

// TestSharedLeaseLapseCancelsRunning: a kernel that cannot renew its lease cancels
// its running durable attempts before the lease may end, so that the kernel that
// rescues the task runs it only after the first attempt returned.
func TestSharedLeaseLapseCancelsRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &cutStore{MemoryStore: storekit.NewMemoryStore()}
		a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease})
		b := newTestKernel(t, kernel.Config{Store: s.MemoryStore, Owner: "b", Lease: sharedLease})
		var mu sync.Mutex
		var aEnd, bStart time.Time
		running := make(chan struct{})
		_ = a.Register("k", func(ctx context.Context, _ []byte) error {
			close(running)
			<-ctx.Done()
			mu.Lock()
			aEnd = time.Now()
			mu.Unlock()
			return ctx.Err()
		})
		_ = b.Register("k", func(context.Context, []byte) error {
			mu.Lock()
			bStart = time.Now()
			mu.Unlock()
			return nil
		})
		h, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		<-running
		synctest.Wait()
		cutAt := time.Now() // the last renewal was at cutAt or before
		s.cut.Store(true)
		for range 40 {
			advance(sharedLease / 10)
		}
		mu.Lock()
		defer mu.Unlock()
		if aEnd.IsZero() || bStart.IsZero() {
			t.Fatalf("a's attempt ended at %v, b started the task at %v; want both", aEnd, bStart)
		}
		if d := aEnd.Sub(cutAt); d >= sharedLease {
			t.Errorf("a's attempt was cancelled %v after its last renewal, want before the lease (%v) ends", d, sharedLease)
		}
		if !bStart.After(aEnd) {
			t.Errorf("b started the task at %v, before a's attempt ended at %v", bStart, aEnd)
		}
		s.cut.Store(false)
		for range 10 {
			advance(sharedLease / 4)
		}
		if st := h.State(); !st.Terminal() {
			t.Errorf("a's handle is %v, want it ended", st)
		}
	})
}
