package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/axsched/ax/store"
)

// grouped returns a valid queued task of group g and key key.
func grouped(id, g, key string) store.StoredTask {
	tk := task(id)
	tk.Group, tk.Key = g, key
	return tk
}

// wantGroupKey checks that every task of ts carries the group and key it was
// inserted with (by ID, from want).
func wantGroupKey(t *testing.T, op string, ts []store.StoredTask, want map[string]store.StoredTask) {
	t.Helper()
	for _, tk := range ts {
		w, ok := want[tk.ID]
		if !ok {
			continue
		}
		if tk.Group != w.Group || tk.Key != w.Key {
			t.Errorf("%s: %s has group %q key %q, want %q %q", op, tk.ID, tk.Group, tk.Key, w.Group, w.Key)
		}
	}
}

// testGroupKey: a task's Group and Key, set by its insert, come back from Get,
// Recover, DeadLetters and Requeue, and survive its changes.
func testGroupKey(t *testing.T, s store.Store) {
	ctx := context.Background()
	want := map[string]store.StoredTask{}
	add := func(tk store.StoredTask) store.StoredTask { want[tk.ID] = tk; return tk }
	q := add(grouped("g-queued", "hosts", "a.example"))
	r := add(grouped("g-running", "hosts", "b.example"))
	e := add(grouped("g-empty-key", "hosts", ""))
	n := add(task("g-none"))
	b := add(grouped("g-bytes", "hosts", "\x00\xff'\"\\ key"))
	l := add(grouped("g-long", strings.Repeat("G", store.GroupNameMax), strings.Repeat("k", store.GroupKeyMax)))
	d := add(grouped("g-dead", "hosts", "c.example"))
	mustCommit(t, s, ins(q), ins(r), start(r.ID, 1, 2, 1), ins(e), ins(n), ins(b), ins(l),
		ins(d), start(d.ID, 1, 2, 1), fail(d.ID, 2, store.Failed, "boom"))
	for id, w := range want {
		if got := get(t, s, id); got.Group != w.Group || got.Key != w.Key {
			t.Errorf("Get(%q) group %q key %q, want %q %q", id, got.Group, got.Key, w.Group, w.Key)
		}
	}
	live := recoverAll(t, s)
	if len(live) != 6 {
		t.Errorf("Recover() = %v, want the 6 live tasks", ids(live))
	}
	wantGroupKey(t, "Recover", live, want)
	dl, err := s.DeadLetters(ctx, 10, "")
	if err != nil || len(dl) != 1 {
		t.Fatalf("DeadLetters() = %v, %v; want g-dead", ids(dl), err)
	}
	wantGroupKey(t, "DeadLetters", dl, want)
	rq, err := s.Requeue(ctx, at(100), d.ID)
	if err != nil || len(rq) != 1 {
		t.Fatalf("Requeue() = %v, %v; want g-dead", ids(rq), err)
	}
	wantGroupKey(t, "Requeue", rq, want)
	wantGroupKey(t, "Get after Requeue", []store.StoredTask{get(t, s, d.ID)}, want)
	// Changes after the insert keep them.
	mustCommit(t, s, retry(r.ID, 2, at(50), "again"), succeed(q.ID, 1))
	wantGroupKey(t, "Get after changes", []store.StoredTask{get(t, s, r.ID), get(t, s, q.ID)}, want)
}

// testSharedGroupKey: Group and Key come back from Rescue and Claim too.
func testSharedGroupKey(t *testing.T, s store.SharedStore) {
	want := map[string]store.StoredTask{}
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	own := grouped("gs-own", "hosts", "a.example")
	want[own.ID] = own
	commitAs(t, s, a, ins(own))
	p := grouped("gs-pool", "hosts", "p.example")
	want[p.ID] = p
	commitAs(t, s, a, store.Change{Op: store.OpInsert, Task: p, Pool: true})
	got, _ := claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Kinds: []string{p.Kind}})
	if len(got) != 1 || got[0].ID != p.ID {
		t.Fatalf("Claim() = %v, want [gs-pool]", ids(got))
	}
	wantGroupKey(t, "Claim", got, want)
	if err := s.Leave(context.Background(), a); err != nil {
		t.Fatalf("Leave() error = %v", err)
	}
	res := rescue(t, s, b, 0)
	if len(res) != 1 || res[0].ID != own.ID {
		t.Fatalf("Rescue() = %v, want [gs-own]", ids(res))
	}
	wantGroupKey(t, "Rescue", res, want)
}
