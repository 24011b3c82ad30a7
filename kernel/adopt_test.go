package kernel_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestSharedAdoptOwnOverflow: one kernel alone on a SharedStore whose room is full
// sends its durable submits to the pool and runs them itself by adopting them
// through its journal: no claim, every task once.
func TestSharedAdoptOwnOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		k := newTestKernel(t, kernel.Config{
			Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 4,
			Capacity: kernel.ByPriority[int]{High: 2, Normal: 2, Low: 2},
		})
		_ = k.Register("k", log.fn("a", nil))
		// The claimer's first claim, at start, finds the pool empty; it polls next
		// well after every task ran (the clock stands still while they run). A claim
		// sent as the first pool rows land could take them before their handles
		// reach the loop: it would start them on their handles (claimedEarly) too.
		synctest.Wait()
		var hs []*kernel.Handle
		for b := range 5 {
			ts := make([]kernel.DurableTask, 10)
			for i := range ts {
				ts[i] = kernel.DurableTask{Kind: "k", Priority: kernel.Priority(i%3 + 1), Payload: fmt.Appendf(nil, "t%d", b*10+i)}
			}
			got, err := k.SubmitDurableMany(context.Background(), ts)
			if err != nil {
				t.Fatalf("SubmitDurableMany() = %v", err)
			}
			hs = append(hs, got...)
		}
		if ends := waitAll(t, hs); ends[kernel.Succeeded] != 50 {
			t.Fatalf("ends = %v, want 50 succeeded", ends)
		}
		for i := range 50 {
			if n := log.count(fmt.Sprintf("t%d", i)); n != 1 {
				t.Errorf("t%d ran %d times, want once", i, n)
			}
		}
		synctest.Wait()
		st := k.Stats().Store
		if st.Claimed != 0 || st.Adopted == 0 || st.AdoptRefused != 0 || st.Following != 0 {
			t.Fatalf("Stats().Store: Claimed %d, Adopted %d, AdoptRefused %d, Following %d; want no claim, some adopted, none refused, none followed",
				st.Claimed, st.Adopted, st.AdoptRefused, st.Following)
		}
		for _, h := range hs {
			if tk := stored(t, s, h.ID()); tk.State != store.Succeeded || tk.Attempt != 1 {
				t.Fatalf("stored %s: %v attempt %d, want succeeded at attempt 1", h.ID(), tk.State, tk.Attempt)
			}
		}
	})
}

// TestSharedAdoptRacesClaim: a pool task that another owner claims before this
// kernel adopts it runs there only: the adopt is refused, the kernel stops adopting
// it and its handle ends as the store says; the other pool task is adopted.
func TestSharedAdoptRacesClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		g := make(gate)
		k := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 1})
		_ = k.Register("k", log.fn("a", g))
		h0, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("t0")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // t0 holds the one slot
		var ps []*kernel.Handle
		for _, p := range []string{"p1", "p2"} {
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte(p), Pool: true})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, h)
			advance(time.Millisecond) // p1 is due first
		}
		// Another owner claims p1 first.
		b, err := s.Join(context.Background(), "b", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := s.Claim(context.Background(), b, store.ClaimRequest{Now: time.Now(), Want: store.ByPriority[int]{Normal: 1}, Kinds: []string{"k"}})
		if err != nil || len(got) != 1 || got[0].ID != ps[0].ID() {
			t.Fatalf("Claim() by b = %v, %v; want p1", got, err)
		}
		g.open() // t0 ends: the slot frees, a adopts p1 (refused), then p2
		if err := h0.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := ps[1].Wait(context.Background()); err != nil {
			t.Fatalf("p2: Wait() = %v", err)
		}
		synctest.Wait()
		if st := ps[0].State(); st != kernel.Queued {
			t.Fatalf("p1 (claimed by b) in a: %v, want still queued (followed)", st)
		}
		res, err := s.CommitAs(context.Background(), b, []store.Change{{Op: store.OpSucceed, Fence: got[0].Fence, Task: store.StoredTask{ID: got[0].ID, UpdatedAt: time.Now()}}})
		if err != nil || res[0] != nil {
			t.Fatalf("b's succeed of p1 = %v, %v", res, err)
		}
		for range 5 { // a reads the end within a few polls
			advance(100 * time.Millisecond)
		}
		if err := ps[0].Wait(context.Background()); err != nil || ps[0].State() != kernel.Succeeded {
			t.Fatalf("p1 in a: %v, %v; want succeeded (in b)", ps[0].State(), err)
		}
		if n := log.count("p1"); n != 0 {
			t.Errorf("p1 ran %d times in a, want none (b runs it)", n)
		}
		if n := log.count("p2"); n != 1 {
			t.Errorf("p2 ran %d times in a, want once", n)
		}
		st := k.Stats().Store
		if st.Adopted != 1 || st.AdoptRefused != 1 || st.Claimed != 0 || st.Following != 0 {
			t.Fatalf("Stats().Store: Adopted %d, AdoptRefused %d, Claimed %d, Following %d; want 1, 1, 0, 0",
				st.Adopted, st.AdoptRefused, st.Claimed, st.Following)
		}
	})
}

// crashAtAdopt is a MemoryStore whose process "dies" at the first commit that holds
// an adopt: that commit applies (lost is true: its answer is lost) or not, and every
// call after it fails, as from a process that is gone. Its claims find nothing.
type crashAtAdopt struct {
	*storekit.MemoryStore
	lost bool
	dead atomic.Bool
}

var errGone = fmt.Errorf("process gone: %w", store.ErrStoreUnavailable)

func (s *crashAtAdopt) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	if s.dead.Load() {
		return nil, errGone
	}
	for _, c := range cs {
		if c.Adopt {
			s.dead.Store(true)
			if s.lost {
				_, _ = s.MemoryStore.CommitAs(ctx, o, cs)
				return nil, fmt.Errorf("answer lost: %w", store.ErrOutcomeUnknown)
			}
			return nil, errGone
		}
	}
	return s.MemoryStore.CommitAs(ctx, o, cs)
}

// Claim finds nothing: a claim made before the loop follows the task it just put in
// the pool could take that task, and the kernel under test must adopt it.
func (s *crashAtAdopt) Claim(context.Context, store.Owner, store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	if s.dead.Load() {
		return nil, time.Time{}, errGone
	}
	return nil, time.Time{}, nil
}

func (s *crashAtAdopt) Rescue(ctx context.Context, o store.Owner, limit int) ([]store.StoredTask, error) {
	if s.dead.Load() {
		return nil, errGone
	}
	return s.MemoryStore.Rescue(ctx, o, limit)
}

func (s *crashAtAdopt) Leave(ctx context.Context, o store.Owner) error {
	if s.dead.Load() {
		return errGone
	}
	return s.MemoryStore.Leave(ctx, o)
}

// TestSharedAdoptCrash: a kernel that dies between the adopt of its pool task and the
// answer of that commit never runs it; the next kernel on the store runs it once:
// claimed from the pool when the adopt did not land (attempt 1), rescued once the
// lease ended when it did (attempt 2: the adopted attempt could have begun).
func TestSharedAdoptCrash(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", lost), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := storekit.NewMemoryStore()
				s := &crashAtAdopt{MemoryStore: mem, lost: lost}
				log := newRunLog()
				g := make(gate)
				a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease, MaxConcurrency: 1, StoreTimeout: time.Second})
				_ = a.Register("k", log.fn("a", nil))
				h, err := a.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("p"), Pool: true})
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if !s.dead.Load() {
					t.Fatal("no commit held an adopt")
				}
				if n := log.count("p"); n != 0 {
					t.Fatalf("p ran %d times in a, whose adopt's commit got no answer", n)
				}
				tk := stored(t, mem, h.ID())
				switch {
				case !lost && (tk.State != store.Queued || tk.Attempt != 0):
					t.Fatalf("stored p = %v attempt %d, want queued at attempt 0 (in the pool)", tk.State, tk.Attempt)
				case lost && (tk.State != store.Running || tk.Attempt != 1):
					t.Fatalf("stored p = %v attempt %d, want running at attempt 1 (adopted)", tk.State, tk.Attempt)
				}
				b := newTestKernel(t, kernel.Config{Store: mem, Owner: "b", Lease: sharedLease, MaxConcurrency: 1})
				_ = b.Register("k", log.fn("b", g))
				for range 12 { // a's lease ends; b rescues or claims p
					advance(sharedLease / 4)
				}
				if by := log.by["p"]; len(by) != 1 || by[0] != "b" {
					t.Fatalf("p ran in %v, want once in b", by)
				}
				want := 1
				if lost {
					want = 2
				}
				if tk := stored(t, mem, h.ID()); tk.State != store.Running || tk.Attempt != want {
					t.Fatalf("stored p in b = %v attempt %d, want running at attempt %d", tk.State, tk.Attempt, want)
				}
				g.open()
			})
		})
	}
}
