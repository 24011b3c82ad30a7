package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// exerciseLister runs the cases of [store.TaskLister]. Exercise calls it when the store
// implements TaskLister.
func exerciseLister(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.TaskLister)
	}{
		{"ListFilters", testListFilters},
		{"ListSparse", testListSparse},
		{"ListBackward", testListBackward},
		{"ListInvalid", testListInvalid},
		{"LookupTask", testLookupTask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newStore(t).(store.TaskLister))
		})
	}
	if _, ok := newStore(t).(store.SharedStore); ok {
		t.Run("ListOwners", func(t *testing.T) {
			testListOwners(t, newStore(t).(store.TaskLister))
		})
	}
}

// listAll walks q's pages forward from the first and returns every task, failing the
// test when a page is larger than its limit or a task comes twice. It bounds the pages.
func listAll(t *testing.T, s store.TaskLister, q store.TaskQuery) []store.TaskInfo {
	t.Helper()
	var out []store.TaskInfo
	seen := map[string]bool{}
	for range 10_000 {
		p, err := s.ListTasks(context.Background(), q)
		if err != nil {
			t.Fatalf("ListTasks(%+v) error = %v", q, err)
		}
		if len(p.Tasks) > q.PageSize() {
			t.Fatalf("ListTasks(%+v): %d tasks, want at most %d", q, len(p.Tasks), q.PageSize())
		}
		if len(p.Next) > store.TaskCursorMax || len(p.Prev) > store.TaskCursorMax {
			t.Fatalf("ListTasks(%+v): cursors of %d and %d bytes, want at most TaskCursorMax", q, len(p.Next), len(p.Prev))
		}
		for _, ti := range p.Tasks {
			if seen[ti.ID] {
				t.Fatalf("ListTasks(%+v): %q listed twice in one walk", q, ti.ID)
			}
			seen[ti.ID] = true
			if ti.Payload != nil {
				t.Errorf("ListTasks: %q has a payload, want nil", ti.ID)
			}
		}
		out = append(out, p.Tasks...)
		if p.Next == "" {
			return out
		}
		q.After = p.Next
	}
	t.Fatalf("ListTasks(%+v): no last page after 10,000 pages", q)
	return nil
}

func infoIDs(ts []store.TaskInfo) []string {
	out := make([]string, len(ts))
	for i := range ts {
		out[i] = ts[i].ID
	}
	return out
}

// wantListed checks that got holds exactly the IDs of want, in any order.
func wantListed(t *testing.T, q store.TaskQuery, got []store.TaskInfo, want []string) {
	t.Helper()
	g := slices.Sorted(slices.Values(infoIDs(got)))
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Errorf("ListTasks(%+v) walk = %v, want %v", q, g, w)
	}
}

func testListFilters(t *testing.T, s store.TaskLister) {
	type spec struct {
		id, kind, group, key string
		state                store.State
		prio                 store.Priority
		runAt                int
	}
	var specs []spec
	kinds := []string{"k.a", "k.b"}
	groups := [][2]string{{"", ""}, {"g1", "x"}, {"g1", "y"}, {"g2", "x"}}
	states := []store.State{store.Queued, store.Delayed, store.Retrying, store.Succeeded, store.Failed, store.Canceled, store.TimedOut}
	for i := range 40 {
		g := groups[i%len(groups)]
		specs = append(specs, spec{
			id: fmt.Sprintf("list-%02d", i), kind: kinds[i%3%2], group: g[0], key: g[1],
			state: states[i%len(states)], prio: store.Priority(1 + i%3), runAt: (i * 37) % 11,
		})
	}
	var ch []store.Change
	byID := map[string]store.StoredTask{}
	for _, sp := range specs {
		tk := task(sp.id)
		tk.Kind, tk.Group, tk.Key, tk.State, tk.Priority, tk.RunAt = sp.kind, sp.group, sp.key, sp.state, sp.prio, at(sp.runAt)
		tk.LastError = "error of " + sp.id
		ch = append(ch, ins(tk))
		byID[sp.id] = tk
	}
	mustCommit(t, s.(store.Store), ch...)
	queries := []store.TaskQuery{
		{},
		{Limit: 1},
		{Limit: 7},
		{State: store.Queued, Limit: 2},
		{State: store.Failed},
		{State: store.Running},
		{Kind: "k.b", Limit: 3},
		{Kind: "k.none"},
		{Group: "g1", Limit: 2},
		{Group: "g1", Key: "y", Limit: 2},
		{Group: "g2", Key: "y"},
		{State: store.Succeeded, Kind: "k.a", Limit: 1},
		{State: store.Retrying, Group: "g1", Limit: 2},
		{Kind: "k.a", Group: "g2", Key: "x", Limit: 2},
		{Pool: true, Limit: 9},
	}
	for _, q := range queries {
		var want []string
		for _, sp := range specs {
			if tk := byID[sp.id]; q.Matches(&tk, 0) {
				want = append(want, sp.id)
			}
		}
		got := listAll(t, s, q)
		wantListed(t, q, got, want)
		for _, ti := range got {
			if d := diffTask(ti.StoredTask, withoutPayload(byID[ti.ID])); d != "" {
				t.Errorf("ListTasks(%+v): %s: %s", q, ti.ID, d)
			}
			if ti.PayloadSize != len(byID[ti.ID].Payload) {
				t.Errorf("ListTasks: %s: PayloadSize = %d, want %d", ti.ID, ti.PayloadSize, len(byID[ti.ID].Payload))
			}
		}
	}
}

func withoutPayload(tk store.StoredTask) store.StoredTask {
	tk.Payload = nil
	return tk
}

// testListSparse lists a few matches among many rows: every walk still finds them
// all, whatever bound a store sets on one call's work.
func testListSparse(t *testing.T, s store.TaskLister) {
	var ch []store.Change
	var want []string
	for i := range 2500 {
		tk := task(fmt.Sprintf("sparse-%05d", i))
		tk.Payload = nil
		if i%600 == 599 {
			tk.Kind, tk.State = "rare", store.Failed
			want = append(want, tk.ID)
		}
		ch = append(ch, ins(tk))
	}
	mustCommit(t, s.(store.Store), ch...)
	for _, q := range []store.TaskQuery{
		{Kind: "rare", State: store.Failed, Limit: 2},
		{State: store.Failed, Limit: 3},
		{Kind: "rare"},
	} {
		wantListed(t, q, listAll(t, s, q), want)
	}
	if got := listAll(t, s, store.TaskQuery{Limit: store.TaskListLimitMax}); len(got) != 2500 {
		t.Errorf("ListTasks of every task: %d tasks, want 2500", len(got))
	}
}

// testListBackward walks forward, then back with Prev, and checks that each page
// seen backward is the page seen forward.
func testListBackward(t *testing.T, s store.TaskLister) {
	var ch []store.Change
	for i := range 23 {
		tk := task(fmt.Sprintf("back-%02d", i))
		if i%2 == 0 {
			tk.State = store.Failed
		}
		ch = append(ch, ins(tk))
	}
	mustCommit(t, s.(store.Store), ch...)
	ctx := context.Background()
	for _, q := range []store.TaskQuery{{Limit: 4}, {State: store.Failed, Limit: 3}} {
		var pages []store.TaskPage
		fq := q
		for {
			p, err := s.ListTasks(ctx, fq)
			if err != nil {
				t.Fatalf("ListTasks(%+v) error = %v", fq, err)
			}
			if len(p.Tasks) > 0 {
				pages = append(pages, p)
			}
			if p.Next == "" {
				break
			}
			fq.After = p.Next
		}
		if len(pages) < 3 {
			t.Fatalf("ListTasks(%+v): %d pages, want at least 3", q, len(pages))
		}
		if pages[0].Prev != "" {
			t.Errorf("ListTasks(%+v): first page's Prev = %q, want empty", q, pages[0].Prev)
		}
		var back []string
		prev := pages[len(pages)-1].Prev
		for prev != "" {
			bq := q
			bq.Before = prev
			p, err := s.ListTasks(ctx, bq)
			if err != nil {
				t.Fatalf("ListTasks(%+v) error = %v", bq, err)
			}
			if len(p.Tasks) > q.PageSize() {
				t.Fatalf("ListTasks(%+v): %d tasks, want at most %d", bq, len(p.Tasks), q.PageSize())
			}
			back = append(infoIDs(p.Tasks), back...)
			prev = p.Prev
		}
		var fwd []string
		for _, p := range pages[:len(pages)-1] {
			fwd = append(fwd, infoIDs(p.Tasks)...)
		}
		if !slices.Equal(back, fwd) {
			t.Errorf("ListTasks(%+v): backward walk = %v, want the forward walk's %v", q, back, fwd)
		}
	}
}

func testListInvalid(t *testing.T, s store.TaskLister) {
	mustCommit(t, s.(store.Store), ins(task("inv-1")))
	ctx := context.Background()
	for _, q := range []store.TaskQuery{
		{Limit: -1},
		{Limit: store.TaskListLimitMax + 1},
		{State: 99},
		{Key: "k"},
		{Pool: true, Owner: 3},
		{After: "a", Before: "b"},
		{After: "!not a cursor!"},
		{Before: "%%%"},
	} {
		if _, err := s.ListTasks(ctx, q); !errors.Is(err, store.ErrInvalidQuery) {
			t.Errorf("ListTasks(%+v) error = %v, want ErrInvalidQuery", q, err)
		}
	}
}

func testLookupTask(t *testing.T, s store.TaskLister) {
	tk := grouped("look-1", "g", "k")
	tk.Payload = bytes.Repeat([]byte{0, 0xff, 'x'}, 100)
	tk.LastError = "last <error>"
	mustCommit(t, s.(store.Store), ins(tk))
	ctx := context.Background()
	for _, payload := range []bool{false, true} {
		got, err := s.LookupTask(ctx, "look-1", payload)
		if err != nil {
			t.Fatalf("LookupTask(look-1, %v) error = %v", payload, err)
		}
		want := tk
		if !payload {
			want.Payload = nil
		}
		if d := diffTask(got.StoredTask, want); d != "" {
			t.Errorf("LookupTask(look-1, %v): %s", payload, d)
		}
		if !payload && got.Payload != nil {
			t.Errorf("LookupTask(look-1, false).Payload = %q, want nil", got.Payload)
		}
		if got.PayloadSize != 300 || got.Owner != 0 {
			t.Errorf("LookupTask(look-1, %v) = PayloadSize %d, Owner %d, want 300, 0", payload, got.PayloadSize, got.Owner)
		}
	}
	if _, err := s.LookupTask(ctx, "look-none", false); !errors.Is(err, store.ErrUnknownTask) {
		t.Errorf("LookupTask(look-none) error = %v, want ErrUnknownTask", err)
	}
}

// testListOwners lists by owner and pool on a SharedStore, with a task the owner
// started: it lists as Running, under the Running filter, and its owner.
func testListOwners(t *testing.T, s store.TaskLister) {
	ss := s.(store.SharedStore)
	o := join(t, ss, "lister", time.Minute)
	o2 := join(t, ss, "lister-2", time.Minute)
	commitAs(t, ss, o, ins(task("own-1")), ins(task("own-2")), ins(task("own-3")))
	commitAs(t, ss, o, start("own-2", 1, store.FenceOfEpoch(o.Epoch)+1, 1))
	commitAs(t, ss, o2, ins(task("other-1")))
	mustCommit(t, ss, ins(task("pool-1")), ins(task("pool-2")))
	checks := []struct {
		q    store.TaskQuery
		want []string
	}{
		{store.TaskQuery{Owner: o.Epoch, Limit: 1}, []string{"own-1", "own-2", "own-3"}},
		{store.TaskQuery{Owner: o2.Epoch}, []string{"other-1"}},
		{store.TaskQuery{Pool: true, Limit: 1}, []string{"pool-1", "pool-2"}},
		{store.TaskQuery{State: store.Running}, []string{"own-2"}},
		{store.TaskQuery{State: store.Running, Owner: o.Epoch}, []string{"own-2"}},
		{store.TaskQuery{State: store.Running, Owner: o2.Epoch}, nil},
		{store.TaskQuery{State: store.Running, Pool: true}, nil},
		{store.TaskQuery{State: store.Queued, Owner: o.Epoch}, []string{"own-1", "own-3"}},
		{store.TaskQuery{State: store.Queued}, []string{"own-1", "own-3", "other-1", "pool-1", "pool-2"}},
	}
	for _, c := range checks {
		got := listAll(t, s, c.q)
		wantListed(t, c.q, got, c.want)
		for _, ti := range got {
			switch {
			case ti.ID == "own-2" && (ti.State != store.Running || ti.Attempt != 1 || ti.Fence != store.FenceOfEpoch(o.Epoch)+1):
				t.Errorf("ListTasks(%+v): own-2 = %v attempt %d fence %d, want running, 1, %d", c.q, ti.State, ti.Attempt, ti.Fence, store.FenceOfEpoch(o.Epoch)+1)
			case ti.ID[:3] == "own" && ti.Owner != o.Epoch, ti.ID[:4] == "pool" && ti.Owner != 0:
				t.Errorf("ListTasks(%+v): %s Owner = %d", c.q, ti.ID, ti.Owner)
			}
		}
	}
	got, err := s.LookupTask(context.Background(), "own-2", false)
	if err != nil || got.State != store.Running || got.Owner != o.Epoch {
		t.Errorf("LookupTask(own-2) = %v owner %d, %v; want running, owner %d", got.State, got.Owner, err, o.Epoch)
	}
}
