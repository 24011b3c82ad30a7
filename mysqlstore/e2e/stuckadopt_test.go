package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestStuckClaimKeepsAdoptersLease freezes one owner's connection inside a claim that
// locked a pool row, and checks that the owner who put that row in the pool, and
// adopts it meanwhile (an OpStart with Change.Adopt), keeps its lease: its commit
// waits for the frozen claim's lock once at most (Options.LockWait), the adopt is
// refused (another owner holds the row), and its renewals go on.
func TestStuckClaimKeepsAdoptersLease(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "stuckadopt")
	direct, proxied, p := proxyStores(t, table, mysqlstore.Options{Retention: -1, LockWait: time.Second})
	const lease = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()

	adopter, err := direct.Join(ctx, "adopter", lease)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := proxied.Join(ctx, "frozen", lease)
	if err != nil {
		t.Fatal(err)
	}
	commitAs(t, direct, adopter, insertChange("p1", now, true)) // the adopter's overflow

	defer freezeClaim(t, ctx, p, proxied, frozen, store.ClaimRequest{Now: now, Want: store.ByPriority[int]{Normal: 1}, Kinds: []string{"k"}})()

	// The adopter renews every lease/6 from now on, and must keep its lease.
	stopRenew := renewEvery(ctx, direct, adopter, lease/6, lease)
	defer stopRenew()
	adopt := store.Change{Op: store.OpStart, Adopt: true, Fence: 1, Task: store.StoredTask{ID: "p1", Attempt: 1, Fence: 2, UpdatedAt: time.Now()}}
	t0 := time.Now()
	c, cc := context.WithTimeout(ctx, 2*lease)
	res, err := direct.CommitAs(c, adopter, []store.Change{adopt})
	cc()
	took := time.Since(t0)
	if err != nil {
		t.Errorf("CommitAs(adopt of a row a frozen claim locked) = %v after %v; want the adopt refused, the commit applied", err, took)
	} else if res[0] == nil {
		t.Errorf("the adopt of a row a frozen claim locked applied")
	}
	// It may wait for the row once, Options.LockWait (1 s), before it plans from the
	// locked rows, which skip it.
	if took > 2*time.Second {
		t.Errorf("the adopting commit took %v, more than one LockWait (1 s) and a margin: it waited for the frozen claim", took)
	}
	<-time.After(lease) // a lease more: the adopter must still hold its own
	if renewErrs := stopRenew(); len(renewErrs) > 0 {
		t.Errorf("the adopter's renewals failed while a claim of its pool row was frozen: %v", renewErrs)
	}
}
