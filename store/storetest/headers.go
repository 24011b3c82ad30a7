package storetest

import (
	"maps"
	"strings"
	"testing"

	"github.com/axsched/ax/store"
)

// withHeaders returns a valid queued task carrying h.
func withHeaders(id string, h map[string]string) store.StoredTask {
	tk := task(id)
	tk.Headers = h
	return tk
}

// wantHeaders checks that every task of ts carries the headers it was inserted with
// (by ID, from want; none and empty are the same).
func wantHeaders(t *testing.T, op string, ts []store.StoredTask, want map[string]store.StoredTask) {
	t.Helper()
	for _, tk := range ts {
		if w, ok := want[tk.ID]; ok && !maps.Equal(tk.Headers, w.Headers) {
			t.Errorf("%s: %s has headers %q, want %q", op, tk.ID, tk.Headers, w.Headers)
		}
	}
}

// testHeaders: a task's Headers, set by its insert, come back from Get, Recover,
// DeadLetters and Requeue, survive its changes, and are a copy of the caller's map.
func testHeaders(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := map[string]store.StoredTask{}
	add := func(tk store.StoredTask) store.StoredTask {
		tk.Headers = maps.Clone(tk.Headers)
		want[tk.ID] = tk
		return tk
	}
	tp := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "ax=1"}
	q := add(withHeaders("h-queued", tp))
	r := add(withHeaders("h-running", map[string]string{"k": ""}))
	n := add(task("h-none"))
	e := add(withHeaders("h-empty", map[string]string{}))
	b := add(withHeaders("h-bytes", map[string]string{"\x00\xff'\"\\ \u00e9": "\"}{\\\n\x01"}))
	l := add(withHeaders("h-full", map[string]string{"k": strings.Repeat("\x01", store.HeadersMax-1)}))
	d := add(withHeaders("h-dead", tp))
	mine := maps.Clone(tp)
	q2 := withHeaders(q.ID, mine)
	mustCommit(t, s, ins(q2), ins(r), start(r.ID, 1, 2, 1), ins(n), ins(e), ins(b), ins(l),
		ins(d), start(d.ID, 1, 2, 1), fail(d.ID, 2, store.Failed, "boom"))
	mine["traceparent"] = "changed by the caller after the commit"
	for id, w := range want {
		if got := get(t, s, id); !maps.Equal(got.Headers, w.Headers) {
			t.Errorf("Get(%q) headers %q, want %q", id, got.Headers, w.Headers)
		}
	}
	live := recoverAll(t, s)
	wantHeaders(t, "Recover", live, want)
	dl, err := s.DeadLetters(ctx, 10, "")
	if err != nil || len(dl) != 1 {
		t.Fatalf("DeadLetters() = %v, %v; want h-dead", ids(dl), err)
	}
	wantHeaders(t, "DeadLetters", dl, want)
	rq, err := s.Requeue(ctx, at(100), d.ID)
	if err != nil || len(rq) != 1 {
		t.Fatalf("Requeue() = %v, %v; want h-dead", ids(rq), err)
	}
	wantHeaders(t, "Requeue", rq, want)
	mustCommit(t, s, retry(r.ID, 2, at(50), "again"), succeed(q.ID, 1))
	wantHeaders(t, "Get after changes", []store.StoredTask{get(t, s, r.ID), get(t, s, q.ID)}, want)
	// A returned map is the caller's: changing it changes nothing stored.
	got := get(t, s, q.ID)
	got.Headers["traceparent"] = "changed by a reader"
	wantHeaders(t, "Get after a reader's change", []store.StoredTask{get(t, s, q.ID)}, want)
	// Over HeadersMax: refused, nothing stored.
	over := withHeaders("h-over", map[string]string{"k": strings.Repeat("v", store.HeadersMax)})
	res, err := s.Commit(ctx, []store.Change{ins(over)})
	if err != nil || len(res) != 1 || res[0] == nil {
		t.Fatalf("Commit(insert over HeadersMax) = %v, %v; want ErrInvalidChange", res, err)
	}
	if _, err := s.Get(ctx, over.ID); err == nil {
		t.Errorf("Get(%q) found a task whose insert was refused", over.ID)
	}
}

// testSharedHeaders: Headers come back from Claim and Rescue too.
func testSharedHeaders(t *testing.T, s store.SharedStore) {
	want := map[string]store.StoredTask{}
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	own := withHeaders("hs-own", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	want[own.ID] = own
	commitAs(t, s, a, ins(own))
	p := withHeaders("hs-pool", map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	want[p.ID] = p
	commitAs(t, s, a, store.Change{Op: store.OpInsert, Task: p, Pool: true})
	got, _ := claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Kinds: []string{p.Kind}})
	if len(got) != 1 || got[0].ID != p.ID {
		t.Fatalf("Claim() = %v, want [hs-pool]", ids(got))
	}
	wantHeaders(t, "Claim", got, want)
	if err := s.Leave(t.Context(), a); err != nil {
		t.Fatalf("Leave() error = %v", err)
	}
	res := rescue(t, s, b, 0)
	if len(res) != 1 || res[0].ID != own.ID {
		t.Fatalf("Rescue() = %v, want [hs-own]", ids(res))
	}
	wantHeaders(t, "Rescue", res, want)
}
