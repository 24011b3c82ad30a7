package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/axsched/ax/store"
)

// testInsertAs: an owner's inserts through [store.InsertStore.InsertAs] are its own
// (and the pool's, with Pool); once its lease ends a rescue takes them; once it left,
// InsertAs applies nothing and reports ErrLeaseLost. Skipped for a store that is no
// InsertStore.
func testInsertAs(t *testing.T, s store.SharedStore) {
	is, ok := s.(store.InsertStore)
	if !ok {
		t.Skip("not an InsertStore")
	}
	ctx := context.Background()
	a := join(t, s, "a", shortLease)
	b := join(t, s, "b", longLease)
	pool := ins(task("p1"))
	pool.Pool = true
	changes := []store.Change{ins(task("i1")), ins(task("i2")), pool}
	res, err := is.InsertAs(ctx, a, changes)
	if err != nil {
		t.Fatalf("InsertAs() error = %v", err)
	}
	wantResults(t, changes, res, nil, nil, nil)
	got := rescueWithin(t, s, b, 2)
	if len(got) != 2 || got[0].ID == "p1" || got[1].ID == "p1" {
		t.Fatalf("Rescue() after a's lease ended = %v, want i1 and i2 (the pool's p1 stays)", ids(got))
	}
	if _, err := is.InsertAs(ctx, a, []store.Change{ins(task("i3"))}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("InsertAs() by the ended owner = %v, want ErrLeaseLost", err)
	}
	if err := s.Leave(ctx, b); err != nil {
		t.Fatal(err)
	}
	late := ins(task("i4"))
	late.Pool = true
	if _, err := is.InsertAs(ctx, b, []store.Change{ins(task("i5")), late}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("InsertAs() after Leave = %v, want ErrLeaseLost", err)
	}
	for _, id := range []string{"i3", "i4", "i5"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrUnknownTask) {
			t.Errorf("Get(%s) = %v, want ErrUnknownTask: a refused InsertAs stores nothing", id, err)
		}
	}
}
