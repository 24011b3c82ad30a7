package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// The leases of the shared-store cases. They run on the store's clock (a database's),
// so the cases wait for an end by polling, never by sleeping a guessed time.
const (
	shortLease = 300 * time.Millisecond
	longLease  = time.Minute
	leaseWait  = 10 * time.Second // the longest a case waits for a lease to end
	// racerLease is the lease of the owner that RescueRacesCommit races: its
	// completions come at random up to 5/4 of it apart, so some outlive it.
	racerLease = 100 * time.Millisecond
	// heartbeatLease: long enough that a busy machine never holds a renewal past it.
	heartbeatLease = time.Second
)

// exerciseShared runs the cases of [store.SharedStore]: owners, rescue and named
// leases. Exercise calls it when the store implements SharedStore.
func exerciseShared(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.SharedStore)
	}{
		{"Epochs", testEpochs},
		{"JoinArgs", testJoinArgs},
		{"LiveOwnerKeepsTasks", testLiveOwnerKeepsTasks},
		{"RescueAfterExpiry", testRescueAfterExpiry},
		{"HeartbeatKeepsLease", testHeartbeatKeepsLease},
		{"LeaveMakesRescuable", testLeaveMakesRescuable},
		{"JoinSameNameEndsEarlier", testJoinSameName},
		{"RescueUnowned", testRescueUnowned},
		{"RescueLimit", testRescueLimit},
		{"RequeueAs", testRequeueAs},
		{"RescueRacesCommit", testRescueRacesCommit},
		{"ClaimDue", testClaimDue},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimThenRescue", testClaimThenRescue},
		{"ClaimMax", testClaimMax},
		{"InsertAs", testInsertAs},
		{"Adopt", testAdopt},
		{"AdoptAfterClaim", testAdoptAfterClaim},
		{"AdoptRacesClaim", testAdoptRacesClaim},
		{"States", testStates},
		{"RunNow", testRunNow},
		{"StartReads", testStartReads},
		{"RescueCountsStarted", testRescueCountsStarted},
		{"StartFenced", testStartFenced},
		{"StartRejoin", testStartRejoin},
		{"StartsMany", testStartsMany},
		{"StartClaimed", testStartClaimed},
		{"GroupKey", testSharedGroupKey},
		{"Headers", testSharedHeaders},
		{"NamedLeases", testNamedLeases},
		{"NamedLeaseExpiry", testNamedLeaseExpiry},
	}
	for _, tt := range tests {
		t.Run("Shared/"+tt.name, func(t *testing.T) {
			tt.run(t, newStore(t).(store.SharedStore))
		})
	}
}

func join(t *testing.T, s store.SharedStore, name string, lease time.Duration) store.Owner {
	t.Helper()
	o, err := s.Join(context.Background(), name, lease)
	if err != nil {
		t.Fatalf("Join(%q, %v) error = %v", name, lease, err)
	}
	if o.Name != name || o.Lease != lease || o.Epoch == 0 {
		t.Fatalf("Join(%q, %v) = %+v, want that name and lease and an epoch > 0", name, lease, o)
	}
	return o
}

// commitAs commits changes as o and fails the test unless every change applied.
func commitAs(t *testing.T, s store.SharedStore, o store.Owner, changes ...store.Change) {
	t.Helper()
	res, err := s.CommitAs(context.Background(), o, changes)
	if err != nil {
		t.Fatalf("CommitAs(%s/%d, %d changes) error = %v", o.Name, o.Epoch, len(changes), err)
	}
	for i, r := range res {
		if r != nil {
			t.Fatalf("CommitAs: results[%d] (%s %q) = %v, want nil", i, changes[i].Op, changes[i].Task.ID, r)
		}
	}
}

func rescue(t *testing.T, s store.SharedStore, o store.Owner, limit int) []store.StoredTask {
	t.Helper()
	ts, err := s.Rescue(context.Background(), o, limit)
	if err != nil {
		t.Fatalf("Rescue(%s/%d) error = %v", o.Name, o.Epoch, err)
	}
	return ts
}

// rescueWithin rescues as o until it returns want tasks, failing after leaseWait. o's
// lease is renewed on the way.
func rescueWithin(t *testing.T, s store.SharedStore, o store.Owner, want int) []store.StoredTask {
	t.Helper()
	deadline := time.Now().Add(leaseWait)
	var got []store.StoredTask
	for {
		got = append(got, rescue(t, s, o, 0)...)
		if len(got) >= want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("Rescue(%s/%d) gave %d tasks within %v, want %d", o.Name, o.Epoch, len(got), leaseWait, want)
		}
		commitAs(t, s, o) // renew
		pause(5 * time.Millisecond)
	}
}

// pause waits d: the cases poll a store whose clock they do not control.
func pause(d time.Duration) {
	tm := time.NewTimer(d)
	<-tm.C
}

func testEpochs(t *testing.T, s store.SharedStore) {
	tk := task("e1")
	tk.Fence = store.FenceOfEpoch(7) + 3
	mustCommit(t, s, ins(tk))
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	if a.Epoch <= 7 || b.Epoch <= a.Epoch {
		t.Fatalf("epochs %d then %d, want increasing and above the stored fence's epoch 7", a.Epoch, b.Epoch)
	}
	owners, err := s.Owners(context.Background())
	if err != nil {
		t.Fatalf("Owners() error = %v", err)
	}
	live := 0
	for _, o := range owners {
		if o.Live && (o.Epoch == a.Epoch || o.Epoch == b.Epoch) {
			live++
		}
	}
	if live != 2 {
		t.Fatalf("Owners() = %+v, want %d and %d live", owners, a.Epoch, b.Epoch)
	}
}

func testJoinArgs(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	long := string(make([]byte, store.OwnerNameMax+1))
	for _, tt := range []struct {
		name  string
		lease time.Duration
	}{{"", time.Second}, {long, time.Second}, {"a", 0}, {"a", store.LeaseMin - 1}} {
		if _, err := s.Join(ctx, tt.name, tt.lease); !errors.Is(err, store.ErrInvalidChange) {
			t.Errorf("Join(%d-byte name, %v) = %v, want ErrInvalidChange", len(tt.name), tt.lease, err)
		}
	}
	o := join(t, s, "a", longLease)
	if _, err := s.AcquireLease(ctx, "", "a", time.Second); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("AcquireLease(\"\") = %v, want ErrInvalidChange", err)
	}
	if _, err := s.AcquireLease(ctx, "n", "", time.Second); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("AcquireLease(holder \"\") = %v, want ErrInvalidChange", err)
	}
	if _, err := s.AcquireLease(ctx, "n", "a", 0); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("AcquireLease(ttl 0) = %v, want ErrInvalidChange", err)
	}
	commitAs(t, s, o)
}

func testLiveOwnerKeepsTasks(t *testing.T, s store.SharedStore) {
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, ins(task("k1")), ins(task("k2")), start("k2", 1, 2, 1))
	if got := rescue(t, s, b, 0); len(got) != 0 {
		t.Fatalf("Rescue by b of a live owner's tasks = %v, want none", ids(got))
	}
	owners, err := s.Owners(context.Background())
	if err != nil {
		t.Fatalf("Owners() error = %v", err)
	}
	for _, o := range owners {
		if o.Epoch == a.Epoch && o.Tasks != 2 {
			t.Fatalf("Owners(): a holds %d tasks, want 2", o.Tasks)
		}
	}
	// a keeps writing its tasks.
	commitAs(t, s, a, succeed("k2", 2))
	if st := get(t, s, "k2").State; st != store.Succeeded {
		t.Fatalf("k2 state = %v, want succeeded", st)
	}
}

func testRescueAfterExpiry(t *testing.T, s store.SharedStore) {
	a := join(t, s, "a", shortLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, ins(task("r1")), ins(task("r2")), start("r2", 1, 2, 1), ins(task("r3")), succeed("r3", 1))
	got := rescueWithin(t, s, b, 2)
	if len(got) != 2 || got[0].ID != "r1" && got[1].ID != "r1" {
		t.Fatalf("Rescue() = %v, want r1 and r2 (live), not r3 (ended)", ids(got))
	}
	for _, tk := range got {
		if tk.Fence>>32 <= a.Epoch || tk.Fence>>32 <= b.Epoch {
			t.Errorf("rescued %q has fence %#x, want the fence of an epoch above %d", tk.ID, tk.Fence, b.Epoch)
		}
		if tk.ID == "r2" && (tk.State != store.Running || tk.Attempt != 1) {
			t.Errorf("rescued r2 = %v attempt %d, want running attempt 1 (the caller decides)", tk.State, tk.Attempt)
		}
		if stored := get(t, s, tk.ID); stored.Fence != tk.Fence {
			t.Errorf("rescued %q: returned fence %#x, stored %#x", tk.ID, tk.Fence, stored.Fence)
		}
	}
	// The ended owner can write nothing: not with its lease, not with its fences.
	if _, err := s.CommitAs(context.Background(), a, []store.Change{succeed("r2", 2)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CommitAs by the ended owner = %v, want ErrLeaseLost", err)
	}
	res := commit(t, s, succeed("r2", 2), cancel("r1", 1))
	wantResults(t, []store.Change{succeed("r2", 2), cancel("r1", 1)}, res, store.ErrStaleFence, store.ErrStaleFence)
	// The rescuer owns them now: a second rescue finds nothing, and its writes apply.
	if again := rescue(t, s, b, 0); len(again) != 0 {
		t.Fatalf("second Rescue() = %v, want none", ids(again))
	}
	var f2 uint64
	for _, tk := range got {
		if tk.ID == "r2" {
			f2 = tk.Fence
		}
	}
	commitAs(t, s, b, start("r2", f2, f2+1, 2), succeed("r2", f2+1))
	if _, err := s.Rescue(context.Background(), a, 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Rescue by the ended owner = %v, want ErrLeaseLost", err)
	}
}

func testHeartbeatKeepsLease(t *testing.T, s store.SharedStore) {
	a := join(t, s, "a", heartbeatLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, ins(task("h1")))
	// Renew a every fifth of its lease for three leases: b rescues nothing.
	for end := time.Now().Add(3 * heartbeatLease); time.Now().Before(end); {
		commitAs(t, s, a)
		if got := rescue(t, s, b, 0); len(got) != 0 {
			t.Fatalf("Rescue() of a renewing owner's task = %v, want none", ids(got))
		}
		pause(heartbeatLease / 5)
	}
	rescueWithin(t, s, b, 1)
}

func testLeaveMakesRescuable(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, ins(task("l1")))
	if err := s.Leave(ctx, a); err != nil {
		t.Fatalf("Leave() error = %v", err)
	}
	if err := s.Leave(ctx, a); err != nil {
		t.Fatalf("second Leave() error = %v, want nil", err)
	}
	if got := rescue(t, s, b, 0); len(got) != 1 || got[0].ID != "l1" {
		t.Fatalf("Rescue() after Leave = %v, want l1 at once", ids(got))
	}
	if _, err := s.CommitAs(ctx, a, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CommitAs after Leave = %v, want ErrLeaseLost", err)
	}
}

func testJoinSameName(t *testing.T, s store.SharedStore) {
	a := join(t, s, "svc-1", longLease)
	commitAs(t, s, a, ins(task("j1")))
	a2 := join(t, s, "svc-1", longLease)
	if _, err := s.CommitAs(context.Background(), a, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CommitAs by the earlier epoch of a name joined again = %v, want ErrLeaseLost", err)
	}
	if got := rescue(t, s, a2, 0); len(got) != 1 || got[0].ID != "j1" {
		t.Fatalf("Rescue() by the new epoch = %v, want j1 at once", ids(got))
	}
}

func testRescueUnowned(t *testing.T, s store.SharedStore) {
	// u1 waits in the pool; u3 is a running row a store without owners left.
	mustCommit(t, s, ins(task("u1")), ins(task("u2")), succeed("u2", 1), ins(task("u3")), start("u3", 1, 2, 1))
	a := join(t, s, "a", longLease)
	got := rescue(t, s, a, 0)
	if len(got) != 1 || got[0].ID != "u3" {
		t.Fatalf("Rescue() = %v, want the unowned running task u3 only (u1 is the pool's)", ids(got))
	}
	if res := commit(t, s, succeed("u3", 2)); !errors.Is(res[0], store.ErrStaleFence) {
		t.Fatalf("a write with the fence before the rescue = %v, want ErrStaleFence", res[0])
	}
}

func testRescueLimit(t *testing.T, s store.SharedStore) {
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	var cs []store.Change
	for i := range 5 {
		tk := task(fmt.Sprintf("m%d", i))
		tk.RunAt = at(i)
		cs = append(cs, ins(tk))
	}
	commitAs(t, s, a, cs...)
	if err := s.Leave(context.Background(), a); err != nil {
		t.Fatalf("Leave() error = %v", err)
	}
	first := rescue(t, s, b, 2)
	if len(first) != 2 || first[0].ID != "m0" || first[1].ID != "m1" {
		t.Fatalf("Rescue(limit 2) = %v, want [m0 m1] (recovery order)", ids(first))
	}
	if rest := rescue(t, s, b, 0); len(rest) != 3 {
		t.Fatalf("Rescue() after = %v, want the 3 others", ids(rest))
	}
}

func testRequeueAs(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	mustCommit(t, s, ins(task("q1")), fail("q1", 1, store.Failed, "boom"))
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	got, err := s.RequeueAs(ctx, a, at(10), "q1")
	if err != nil || len(got) != 1 {
		t.Fatalf("RequeueAs() = %v, %v; want q1", ids(got), err)
	}
	if res := rescue(t, s, b, 0); len(res) != 0 {
		t.Fatalf("Rescue() of a live owner's requeued task = %v, want none", ids(res))
	}
	commitAs(t, s, a, start("q1", got[0].Fence, got[0].Fence+1, 1))
}

// testRescueRacesCommit races an owner committing completions near the end of its
// lease against a rescuer: each task ends either completed by its owner (and never
// rescued) or rescued (and the owner's completion refused), never both.
func testRescueRacesCommit(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	const rounds, perRound = 5, 12
	b := join(t, s, "b", longLease)
	for r := range rounds {
		var cs []store.Change
		for i := range perRound {
			id := fmt.Sprintf("race-%d-%d", r, i)
			cs = append(cs, ins(task(id)), start(id, 1, 2, 1))
		}
		// The owner's first commit must land within its short lease: on a busy machine
		// the lease may end first (nothing is applied then), and the owner joins again.
		var a store.Owner
		for try := 1; ; try++ {
			a = join(t, s, fmt.Sprintf("racer-%d", r), racerLease)
			res, err := s.CommitAs(ctx, a, cs)
			if errors.Is(err, store.ErrLeaseLost) && try < 10 {
				t.Logf("round %d: the racer's lease ended before its first commit (try %d): joining again", r, try)
				continue
			}
			if err != nil || errors.Join(res...) != nil {
				t.Fatalf("CommitAs(%s/%d, %d changes) = %v, %v", a.Name, a.Epoch, len(cs), res, err)
			}
			break
		}
		completed := make(map[string]bool)
		rescued := make(map[string]bool)
		var wg sync.WaitGroup
		wg.Go(func() { // the owner completes its tasks one by one, without renewing otherwise
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for i := range perRound {
				pause(time.Duration(rng.IntN(int(racerLease/time.Millisecond)*5/4)) * time.Millisecond)
				id := fmt.Sprintf("race-%d-%d", r, i)
				res, err := s.CommitAs(ctx, a, []store.Change{succeed(id, 2)})
				if err == nil && res[0] == nil {
					completed[id] = true
				}
			}
		})
		wg.Go(func() {
			for end := time.Now().Add(leaseWait); time.Now().Before(end); {
				ts, err := s.Rescue(ctx, b, 0)
				if err != nil {
					t.Errorf("Rescue() error = %v", err)
					return
				}
				for _, tk := range ts {
					rescued[tk.ID] = true
				}
				if _, err := s.CommitAs(ctx, b, nil); err != nil {
					t.Errorf("CommitAs(b) error = %v", err)
					return
				}
				live := 0
				for i := range perRound {
					st, err := s.Get(ctx, fmt.Sprintf("race-%d-%d", r, i))
					if err != nil {
						t.Errorf("Get() error = %v", err)
						return
					}
					if st.State.Live() {
						live++
					}
				}
				if live == len(rescued) { // every live row is the rescuer's
					return
				}
				pause(time.Millisecond)
			}
		})
		wg.Wait()
		t.Logf("round %d: %d completed by the owner, %d rescued", r, len(completed), len(rescued))
		for i := range perRound {
			id := fmt.Sprintf("race-%d-%d", r, i)
			st := get(t, s, id)
			switch {
			case completed[id] && rescued[id]:
				t.Fatalf("%s was completed by its owner and rescued too", id)
			case completed[id] && st.State != store.Succeeded:
				t.Fatalf("%s: the owner's completion was acknowledged, the row is %v", id, st.State)
			case rescued[id] && st.State != store.Running:
				t.Fatalf("%s was rescued, the row is %v, want running", id, st.State)
			case !completed[id] && !rescued[id]:
				t.Fatalf("%s was neither completed nor rescued (row %v)", id, st.State)
			}
		}
	}
}

// pooled returns a pool task of kind and priority p due at runAt.
func pooled(id, kind string, p store.Priority, runAt time.Time) store.Change {
	tk := task(id)
	tk.Kind, tk.Priority, tk.RunAt = kind, p, runAt
	if runAt.After(t0) {
		tk.State = store.Delayed
	}
	return store.Change{Op: store.OpInsert, Task: tk, Pool: true}
}

func claim(t *testing.T, s store.SharedStore, o store.Owner, req store.ClaimRequest) ([]store.StoredTask, time.Time) {
	t.Helper()
	got, next, err := s.Claim(context.Background(), o, req)
	if err != nil {
		t.Fatalf("Claim(%+v) error = %v", req.Want, err)
	}
	return got, next
}

func testClaimDue(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	// Pool tasks: inserted by a with Pool, and by a plain Commit.
	commitAs(t, s, a,
		pooled("h1", "k", store.High, at(2)),
		pooled("h2", "k", store.High, at(1)),
		pooled("n1", "k", store.Normal, at(0)),
		pooled("n2", "k", store.Normal, at(3)),
		pooled("late", "k", store.High, at(50)),
		pooled("other", "k2", store.High, at(0)),
		ins(task("mine")), // a's own, not the pool's
	)
	mustCommit(t, s, pooled("l1", "k", store.Low, at(0)))
	got, next := claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 1, Normal: 5, Low: 0}, Kinds: []string{"k"}})
	if strings.Join(ids(got), " ") != "h2 n1 n2" {
		t.Fatalf("Claim() = %v, want [h2 n1 n2] (one High, due, by RunAt; the Normal ones; no Low)", ids(got))
	}
	if !next.Equal(at(0)) {
		t.Fatalf("Claim() next = %v, want %v (l1, due and left; h1 too)", next, at(0))
	}
	for _, tk := range got {
		if tk.State != store.Running || tk.Attempt != 1 || tk.Fence>>32 <= b.Epoch || !tk.UpdatedAt.Equal(at(10)) {
			t.Errorf("claimed %s = %v attempt %d fence %#x updated %v; want running, attempt 1, a new epoch's fence, updated at %v",
				tk.ID, tk.State, tk.Attempt, tk.Fence, tk.UpdatedAt, at(10))
		}
		if st := get(t, s, tk.ID); st.State != store.Running || st.Fence != tk.Fence {
			t.Errorf("stored %s = %v fence %#x, want running with the returned fence", tk.ID, st.State, st.Fence)
		}
	}
	// b owns them now: its writes apply, a's do not; Rescue by a takes none of them.
	commitAs(t, s, b, succeed("h2", got[0].Fence))
	if res, err := s.CommitAs(ctx, a, []store.Change{succeed("n1", 1)}); err != nil || !errors.Is(res[0], store.ErrStaleFence) {
		t.Fatalf("a's write of a task b claimed = %v, %v; want ErrStaleFence", res, err)
	}
	if res := rescue(t, s, a, 0); len(res) != 0 {
		t.Fatalf("Rescue() by a = %v, want none (b is live; l1, h1 are the pool's)", ids(res))
	}
	// The rest: h1, l1 and, once due, late; never other (kind k2) nor mine.
	got, next = claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Kinds: []string{"k"}})
	if strings.Join(ids(got), " ") != "h1 l1" || !next.Equal(at(50)) {
		t.Fatalf("Claim() = %v next %v, want [h1 l1] next %v", ids(got), next, at(50))
	}
	got, next = claim(t, s, b, store.ClaimRequest{Now: at(60), Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Kinds: []string{"k", "k2"}})
	if strings.Join(ids(got), " ") != "other late" || !next.IsZero() {
		t.Fatalf("Claim() = %v next %v, want [other late] (by RunAt) and no next", ids(got), next)
	}
	// Errors.
	if _, _, err := s.Claim(ctx, b, store.ClaimRequest{Want: store.ByPriority[int]{High: 1}}); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("Claim(zero Now) = %v, want ErrInvalidChange", err)
	}
	if _, _, err := s.Claim(ctx, b, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{Low: -1}}); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("Claim(negative Want) = %v, want ErrInvalidChange", err)
	}
	if err := s.Leave(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Claim(ctx, b, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{High: 1}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Claim() by an owner that left = %v, want ErrLeaseLost", err)
	}
}

// testClaimConcurrent: owners claiming at once never claim one task twice, and
// together claim them all.
func testClaimConcurrent(t *testing.T, s store.SharedStore) {
	const tasks, claimers = 200, 4
	var cs []store.Change
	for i := range tasks {
		cs = append(cs, pooled(fmt.Sprintf("c%03d", i), "k", store.Priority(i%3+1), t0))
	}
	mustCommit(t, s, cs...)
	var (
		mu  sync.Mutex
		all = make(map[string]int)
		wg  sync.WaitGroup
	)
	for c := range claimers {
		o := join(t, s, fmt.Sprintf("claimer-%d", c), longLease)
		wg.Go(func() {
			for {
				got, _, err := s.Claim(context.Background(), o, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{High: 3, Normal: 3, Low: 3}, Kinds: []string{"k"}})
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
	wg.Wait()
	if len(all) != tasks {
		t.Fatalf("%d tasks claimed, want %d", len(all), tasks)
	}
	for id, n := range all {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
}

// testClaimThenRescue: a task claimed by an owner whose lease then ends is rescued as
// running, with a fence above the claim's.
func testClaimThenRescue(t *testing.T, s store.SharedStore) {
	mustCommit(t, s, pooled("x", "k", store.Normal, t0))
	a := join(t, s, "a", shortLease)
	b := join(t, s, "b", longLease)
	got, _ := claim(t, s, a, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{Normal: 1}, Kinds: []string{"k"}})
	if len(got) != 1 {
		t.Fatalf("Claim() = %v, want x", ids(got))
	}
	res := rescueWithin(t, s, b, 1)
	if res[0].ID != "x" || res[0].State != store.Running || res[0].Attempt != 1 || res[0].Fence <= got[0].Fence {
		t.Fatalf("rescued %+v, want x running attempt 1 with a fence above %#x", res[0], got[0].Fence)
	}
}

func testStates(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	mustCommit(t, s, ins(task("s1")), ins(task("s2")), fail("s2", 1, store.Failed, "boom"))
	got, err := s.States(ctx, []string{"s2", "nope", "s1"})
	if err != nil {
		t.Fatalf("States() error = %v", err)
	}
	byID := map[string]store.StoredTask{}
	for _, tk := range got {
		byID[tk.ID] = tk
		if len(tk.Payload) != 0 {
			t.Errorf("States(): %s has a payload, want none", tk.ID)
		}
	}
	if len(got) != 2 || byID["s1"].State != store.Queued || byID["s2"].State != store.Failed || byID["s2"].LastError != "boom" {
		t.Fatalf("States() = %+v, want s1 queued and s2 failed with its error", got)
	}
	if _, err := s.States(ctx, make([]string, store.StatesMax+1)); !errors.Is(err, store.ErrInvalidChange) {
		t.Fatalf("States(StatesMax+1 IDs) = %v, want ErrInvalidChange", err)
	}
}
