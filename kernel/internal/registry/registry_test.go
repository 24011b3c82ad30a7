package registry

import (
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func task(id, kind, key, group string) store.StoredTask {
	return store.StoredTask{ID: id, Kind: kind, UniqueKey: key, Group: group, RunAt: time.Unix(100, 0)}
}

func ids(ts []store.StoredTask) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	slices.Sort(out)
	return out
}

func TestRegisterReleasesHeld(t *testing.T) {
	r := New[int]()
	if got := r.Sort([]store.StoredTask{task("a", "k1", "u1", ""), task("b", "k2", "", ""), task("c", "k1", "", "")}); len(got) != 0 {
		t.Fatalf("Sort() with no kind = %v, want no batch", got)
	}
	if got := r.Held(); got != 3 {
		t.Fatalf("Held() = %d, want 3", got)
	}
	held, ok := r.Register("k1", 7)
	if !ok || !slices.Equal(ids(held), []string{"a", "c"}) {
		t.Fatalf("Register(k1) = %v, %v, want [a c], true", ids(held), ok)
	}
	if _, ok := r.Register("k1", 8); ok {
		t.Fatal("Register(k1) twice = true, want false")
	}
	if fn, ok := r.Func("k1"); !ok || fn != 7 {
		t.Fatalf("Func(k1) = %d, %v, want 7, true", fn, ok)
	}
	if got := r.Held(); got != 1 {
		t.Fatalf("Held() = %d, want 1", got)
	}
	if got := r.Kinds(); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("Kinds() = %v, want [k1]", got)
	}
	// The held task's unique key stays live.
	if _, dup := r.TakeKeys([]string{"u1"}); !slices.Equal(dup, []int{0}) {
		t.Fatalf("TakeKeys(u1) dup = %v, want [0]", dup)
	}
}

func TestSortByKind(t *testing.T) {
	r := New[string]()
	r.Register("k1", "f1")
	r.Register("k2", "f2")
	got := r.Sort([]store.StoredTask{task("a", "k1", "", ""), task("b", "k2", "", ""), task("c", "k1", "", ""), task("d", "k3", "u", "")})
	if len(got) != 2 || got[0].Fn != "f1" || !slices.Equal(ids(got[0].Tasks), []string{"a", "c"}) ||
		got[1].Fn != "f2" || !slices.Equal(ids(got[1].Tasks), []string{"b"}) {
		t.Fatalf("Sort() = %+v, want f1:[a c], f2:[b]", got)
	}
	if r.Held() != 1 {
		t.Fatalf("Held() = %d, want 1 (k3)", r.Held())
	}
}

func TestTakeKeys(t *testing.T) {
	r := New[int]()
	taken, dup := r.TakeKeys([]string{"x", "", "y", "x"})
	if !slices.Equal(taken, []string{"x", "y"}) || !slices.Equal(dup, []int{3}) {
		t.Fatalf("TakeKeys() = %v, %v, want [x y], [3]", taken, dup)
	}
	_, dup = r.TakeKeys([]string{"y", "z"})
	if !slices.Equal(dup, []int{0}) {
		t.Fatalf("TakeKeys(y, z) dup = %v, want [0]", dup)
	}
	r.DropKeys("x", "y", "")
	taken, dup = r.TakeKeys([]string{"x", "y", "z"})
	if !slices.Equal(taken, []string{"x", "y"}) || !slices.Equal(dup, []int{2}) {
		t.Fatalf("after DropKeys, TakeKeys() = %v, %v, want [x y], [2]", taken, dup)
	}
	if fn := r.Claimed(&store.StoredTask{Kind: "none", UniqueKey: "w"}); fn != 0 {
		t.Fatalf("Claimed(unregistered) = %d, want 0", fn)
	}
	if _, dup := r.TakeKeys([]string{"w"}); len(dup) != 1 {
		t.Fatal("Claimed did not mark its unique key live")
	}
}

func TestHoldGroupless(t *testing.T) {
	r := New[int]()
	groups := map[string]bool{"g1": true}
	var warned []string
	ts := []store.StoredTask{task("a", "k", "", ""), task("b", "k", "", "g2"), task("c", "k", "", "g1"), task("d", "k", "", "g2")}
	keep, gs := HoldGroupless(r, ts, func() map[string]bool { return groups }, func(t *store.StoredTask) { warned = append(warned, t.ID) })
	if !slices.Equal(ids(keep), []string{"a", "c"}) || !gs["g1"] || !slices.Equal(warned, []string{"b", "d"}) {
		t.Fatalf("HoldGroupless() = %v, %v, warned %v; want [a c], g1, [b d]", ids(keep), gs, warned)
	}
	if keep, _ := HoldGroupless(r, ts[:1], func() map[string]bool { return groups }, nil); len(keep) != 1 {
		t.Fatalf("HoldGroupless(nothing held) = %v, want [a]", ids(keep))
	}
	if got := r.ReleaseGroups(func(g string) bool { return g == "g3" }); got != nil {
		t.Fatalf("ReleaseGroups(g3) = %v, want none", ids(got))
	}
	if got := r.ReleaseGroups(func(g string) bool { return g == "g2" }); !slices.Equal(ids(got), []string{"b", "d"}) {
		t.Fatalf("ReleaseGroups(g2) = %v, want [b d]", ids(got))
	}
	if r.Held() != 0 {
		t.Fatalf("Held() = %d, want 0", r.Held())
	}
}

func TestTakeHeldAndRunHeldNow(t *testing.T) {
	r := New[int]()
	r.Register("k", 1)
	r.Sort([]store.StoredTask{task("a", "x", "ua", ""), task("b", "x", "", "")})
	HoldGroupless(r, []store.StoredTask{task("c", "k", "", "g")}, func() map[string]int { return nil }, func(*store.StoredTask) {})
	if !r.RunHeldNow("b") || !r.RunHeldNow("c") || r.RunHeldNow("none") {
		t.Fatal("RunHeldNow(b, c, none) = not true, true, false")
	}
	got, ok := r.TakeHeld("a")
	if !ok || got.ID != "a" || got.RunAt.IsZero() {
		t.Fatalf("TakeHeld(a) = %+v, %v, want a with its RunAt", got, ok)
	}
	if taken, _ := r.TakeKeys([]string{"ua"}); len(taken) != 1 {
		t.Fatal("TakeHeld did not free the task's unique key")
	}
	for _, id := range []string{"b", "c"} {
		got, ok := r.TakeHeld(id)
		if !ok || !got.RunAt.IsZero() {
			t.Fatalf("TakeHeld(%s) = %+v, %v, want it with a zero RunAt", id, got, ok)
		}
	}
	if _, ok := r.TakeHeld("b"); ok || r.Held() != 0 {
		t.Fatalf("TakeHeld(b) again = %v, Held() = %d; want false, 0", ok, r.Held())
	}
}
