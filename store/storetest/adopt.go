package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/axsched/ax/store"
)

// The cases of an OpStart with Change.Adopt: the start of a pool task by ID, by the
// kernel that put it there.

// adopt returns the adopting start of pool task id at fence from, as attempt.
func adopt(id string, from uint64, attempt int) store.Change {
	c := start(id, from, from+1, attempt)
	c.Adopt = true
	return c
}

// ownerTasks returns how many live tasks the store says o holds.
func ownerTasks(t *testing.T, s store.SharedStore, o store.Owner) int {
	t.Helper()
	os, err := s.Owners(context.Background())
	if err != nil {
		t.Fatalf("Owners() error = %v", err)
	}
	for _, oi := range os {
		if oi.Epoch == o.Epoch {
			return oi.Tasks
		}
	}
	return 0
}

// testAdopt: an adopt starts a waiting pool task for the committing owner, whose
// writes (at the new fence) then apply; a retried adopt reports nil again; an adopt of a task that is
// not in the pool (an owner's, running, ended) or at another fence is refused and
// changes nothing; Adopt on another op is invalid.
func testAdopt(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a,
		pooled("p1", "k", store.Normal, t0),
		pooled("p2", "k", store.High, at(50)), // delayed: the adopter decides when it is due
		ins(task("mine")),                     // a's own, not the pool's
	)
	batch := []store.Change{adopt("p1", 1, 1), adopt("p2", 1, 1)}
	commitAs(t, s, a, batch...)
	for _, id := range []string{"p1", "p2"} {
		if st := get(t, s, id); st.State != store.Running || st.Attempt != 1 || st.Fence != 2 || !st.UpdatedAt.Equal(at(1)) {
			t.Errorf("adopted %s = %v attempt %d fence %d updated %v; want running, attempt 1, fence 2, updated at %v",
				id, st.State, st.Attempt, st.Fence, st.UpdatedAt, at(1))
		}
	}
	if n := ownerTasks(t, s, a); n != 3 {
		t.Errorf("Owners(): a holds %d tasks, want 3 (mine and the two adopted)", n)
	}
	// The retry of a batch whose answer was lost: the same results.
	commitAs(t, s, a, batch...)
	// Not in the pool: refused, untouched.
	res, err := s.CommitAs(ctx, b, []store.Change{adopt("p1", 2, 2), adopt("mine", 1, 1)})
	if err != nil {
		t.Fatalf("CommitAs() error = %v", err)
	}
	wantResults(t, batch, res, store.ErrStaleFence, store.ErrStaleFence)
	if st := get(t, s, "mine"); st.State != store.Queued || st.Fence != 1 {
		t.Errorf("mine after a refused adopt = %v fence %d, want queued at fence 1", st.State, st.Fence)
	}
	if st := get(t, s, "p1"); st.Fence != 2 || st.Attempt != 1 {
		t.Errorf("p1 after b's refused adopt: fence %d attempt %d, want 2 and 1", st.Fence, st.Attempt)
	}
	// Writes of the pool task's fence are stale; the adopter's apply; and it is a's
	// for a rescue.
	if res, err := s.CommitAs(ctx, b, []store.Change{succeed("p1", 1)}); err != nil || !errors.Is(res[0], store.ErrStaleFence) {
		t.Errorf("a write at the pool task's fence after its adopt = %v, %v; want ErrStaleFence", res, err)
	}
	commitAs(t, s, a, succeed("p1", 2))
	if err := s.Leave(ctx, a); err != nil {
		t.Fatal(err)
	}
	got := rescue(t, s, b, 0)
	if len(got) != 2 || got[0].ID != "p2" || got[0].State != store.Running || got[0].Fence <= 2 {
		t.Fatalf("Rescue() by b after a left = %+v, want p2 (running, a new fence) and mine", ids(got))
	}
	// An ended task, and a wrong fence, are refused.
	commitAs(t, s, b, pooled("p3", "k", store.Normal, t0))
	res, err = s.CommitAs(ctx, b, []store.Change{adopt("p1", 2, 2), adopt("p3", 7, 1)})
	if err != nil {
		t.Fatalf("CommitAs() error = %v", err)
	}
	wantResults(t, batch, res, store.ErrStaleFence, store.ErrStaleFence)
	if st := get(t, s, "p3"); st.State != store.Queued || st.Fence != 1 {
		t.Errorf("p3 after an adopt at another fence = %v fence %d, want queued at fence 1", st.State, st.Fence)
	}
	bad := succeed("p3", 1)
	bad.Adopt = true
	if err := bad.Validate(); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("Validate(Adopt on a succeed) = %v, want ErrInvalidChange", err)
	}
	res, err = s.CommitAs(ctx, b, []store.Change{bad})
	if err != nil || !errors.Is(res[0], store.ErrInvalidChange) {
		t.Errorf("CommitAs(Adopt on a succeed) = %v, %v; want ErrInvalidChange", res, err)
	}
}

// testAdoptAfterClaim: a task another owner claimed first is not adopted (its adopt
// is refused, the claim's attempt and fence stand), and a task adopted first is not
// claimed.
func testAdoptAfterClaim(t *testing.T, s store.SharedStore) {
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, pooled("x", "k", store.Normal, t0), pooled("y", "k", store.Normal, t0))
	got, _ := claim(t, s, b, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{Normal: 1}, Kinds: []string{"k"}})
	if len(got) != 1 || got[0].ID != "x" {
		t.Fatalf("Claim() = %v, want x", ids(got))
	}
	batch := []store.Change{adopt("x", 1, 1), adopt("y", 1, 1)}
	res, err := s.CommitAs(context.Background(), a, batch)
	if err != nil {
		t.Fatalf("CommitAs() error = %v", err)
	}
	wantResults(t, batch, res, store.ErrStaleFence, nil)
	if st := get(t, s, "x"); st.State != store.Running || st.Fence != got[0].Fence || st.Attempt != 1 {
		t.Errorf("x after a's refused adopt = %v fence %#x attempt %d, want b's claim (fence %#x, attempt 1)", st.State, st.Fence, st.Attempt, got[0].Fence)
	}
	if n := ownerTasks(t, s, b); n != 1 {
		t.Errorf("Owners(): b holds %d tasks, want 1 (x)", n)
	}
	got, next := claim(t, s, b, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{Normal: 5}, Kinds: []string{"k"}})
	if len(got) != 0 || !next.IsZero() {
		t.Fatalf("Claim() after a adopted y = %v next %v, want nothing", ids(got), next)
	}
}

// testAdoptRacesClaim: owners claiming while another adopts the same pool tasks never
// start one task twice, and together start them all.
func testAdoptRacesClaim(t *testing.T, s store.SharedStore) {
	const tasks, claimers = 120, 2
	a := join(t, s, "adopter", longLease)
	var cs []store.Change
	for i := range tasks {
		cs = append(cs, pooled(fmt.Sprintf("r%03d", i), "k", store.Normal, t0))
	}
	commitAs(t, s, a, cs...)
	var (
		mu  sync.Mutex
		all = make(map[string]int)
		wg  sync.WaitGroup
	)
	for c := range claimers {
		o := join(t, s, fmt.Sprintf("claimer-%d", c), longLease)
		wg.Go(func() {
			for {
				got, _, err := s.Claim(context.Background(), o, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{Normal: 4}, Kinds: []string{"k"}})
				if err != nil {
					t.Errorf("Claim() error = %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					all[tk.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < tasks; i += 6 {
			var batch []store.Change
			for j := i; j < min(i+6, tasks); j++ {
				batch = append(batch, adopt(fmt.Sprintf("r%03d", j), 1, 1))
			}
			res, err := s.CommitAs(context.Background(), a, batch)
			if err != nil {
				t.Errorf("CommitAs() error = %v", err)
				return
			}
			mu.Lock()
			for j, r := range res {
				switch {
				case r == nil:
					all[batch[j].Task.ID]++
				case !errors.Is(r, store.ErrStaleFence):
					t.Errorf("adopt %s = %v, want nil or ErrStaleFence", batch[j].Task.ID, r)
				}
			}
			mu.Unlock()
		}
	})
	wg.Wait()
	if len(all) != tasks {
		t.Fatalf("%d tasks started, want %d", len(all), tasks)
	}
	for id, n := range all {
		if n != 1 {
			t.Fatalf("%s started %d times", id, n)
		}
	}
}

// testClaimMax: a claim with Max takes each priority's Want, then gives what a
// priority could not fill to the others, High first, never more than Max in all.
func testClaimMax(t *testing.T, s store.SharedStore) {
	b := join(t, s, "b", longLease)
	mustCommit(t, s,
		pooled("h1", "k", store.High, at(0)),
		pooled("n1", "k", store.Normal, at(0)), pooled("n2", "k", store.Normal, at(1)),
		pooled("n3", "k", store.Normal, at(2)), pooled("n4", "k", store.Normal, at(3)),
		pooled("l1", "k", store.Low, at(0)), pooled("l2", "k", store.Low, at(1)),
	)
	got, next := claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 3, Normal: 1, Low: 1}, Max: 5, Kinds: []string{"k"}})
	if g := ids(got); fmt.Sprint(g) != "[h1 n1 n2 n3 l1]" {
		t.Fatalf("Claim(Want 3/1/1, Max 5) = %v, want [h1 n1 n2 n3 l1] (High's unused share to Normal)", g)
	}
	if !next.Equal(at(1)) {
		t.Fatalf("Claim() next = %v, want %v (l2, due and left)", next, at(1))
	}
	got, _ = claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Max: 1, Kinds: []string{"k"}})
	if g := ids(got); fmt.Sprint(g) != "[n4]" {
		t.Fatalf("Claim(Max 1) = %v, want [n4] (Normal before Low)", g)
	}
	if _, _, err := s.Claim(context.Background(), b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 1}, Max: -1, Kinds: []string{"k"}}); !errors.Is(err, store.ErrInvalidChange) {
		t.Fatalf("Claim(Max -1) = %v, want ErrInvalidChange", err)
	}
}
