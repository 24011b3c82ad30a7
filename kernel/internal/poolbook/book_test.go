package poolbook

import (
	"slices"
	"testing"

	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
)

type follower struct{ ids []string }

func (f *follower) Follow(id string)   { f.ids = append(f.ids, "+"+id) }
func (f *follower) Unfollow(id string) { f.ids = append(f.ids, "-"+id) }

type handle struct{ id string }

func TestFollow(t *testing.T) {
	f := &follower{}
	b := &Book[*handle]{Owner: f}
	a, c := &handle{"a"}, &handle{"c"}
	b.Follow("a", a)
	b.Follow("c", c)
	if h, ok := b.Get("a"); !ok || h != a || b.Len() != 2 {
		t.Fatalf("Get(a) = %v, %v, Len() = %d; want a, true, 2", h, ok, b.Len())
	}
	if !b.Follows("a", a) || b.Follows("a", c) || b.Follows("x", a) {
		t.Fatal("Follows(a, a), (a, c), (x, a) = not true, false, false")
	}
	for id := range b.All() {
		b.Unfollow(id)
	}
	if b.Len() != 0 {
		t.Fatalf("Len() after Unfollow of All() = %d, want 0", b.Len())
	}
	slices.Sort(f.ids)
	if want := []string{"+a", "+c", "-a", "-c"}; !slices.Equal(f.ids, want) {
		t.Fatalf("owner was told %v, want %v", f.ids, want)
	}
}

func TestEarlyAndOrphans(t *testing.T) {
	var b Book[*handle]
	if b.ClaimedEarly("a") {
		t.Fatal("ClaimedEarly(a) on an empty book = true")
	}
	b.Early(&store.StoredTask{ID: "a", Fence: 3})
	if !b.ClaimedEarly("a") {
		t.Fatal("ClaimedEarly(a) = false after Early")
	}
	if got, ok := b.TakeEarly("a"); !ok || got.Fence != 3 {
		t.Fatalf("TakeEarly(a) = %+v, %v, want fence 3, true", got, ok)
	}
	if _, ok := b.TakeEarly("a"); ok || b.ClaimedEarly("a") {
		t.Fatal("the early claim of a stayed after TakeEarly")
	}
	h := &handle{"o"}
	b.Orphan("o", h)
	if got, ok := b.TakeOrphan("o"); !ok || got != h {
		t.Fatalf("TakeOrphan(o) = %v, %v, want o, true", got, ok)
	}
	if _, ok := b.TakeOrphan("o"); ok {
		t.Fatal("TakeOrphan(o) twice = true")
	}
}

func TestAdopt(t *testing.T) {
	var b Book[*handle]
	var hs []*handle
	for i, l := range []queue.Level{queue.High, queue.High, queue.Normal, queue.Normal, queue.Low, queue.Low} {
		h := &handle{string(rune('a' + i))}
		hs = append(hs, h)
		b.QueueAdopt(l, h)
	}
	stale := map[*handle]bool{hs[0]: true} // a left the pool
	ok := func(h *handle) bool { return !stale[h] }
	var got []string
	b.Adopt(3, [queue.NumLevels]int{1, 1, 1}, ok, func(h *handle) { got = append(got, h.id) })
	// One a level; High skips the stale a and takes b.
	if want := []string{"b", "c", "e"}; !slices.Equal(got, want) {
		t.Fatalf("Adopt(3) took %v, want %v", got, want)
	}
	if n := b.AdoptWaiting(); n != 2 {
		t.Fatalf("AdoptWaiting() = %d, want 2", n)
	}
	stale[hs[3]] = true
	b.CompactAdopt(ok)
	if n := b.AdoptWaiting(); n != 1 {
		t.Fatalf("AdoptWaiting() after CompactAdopt = %d, want 1", n)
	}
	got = nil
	b.Adopt(5, [queue.NumLevels]int{17, 2, 1}, ok, func(h *handle) { got = append(got, h.id) })
	if want := []string{"f"}; !slices.Equal(got, want) || b.AdoptWaiting() != 0 {
		t.Fatalf("Adopt(5) took %v, left %d; want %v, 0", got, b.AdoptWaiting(), want)
	}
}

func TestSplitByQuotas(t *testing.T) {
	tests := []struct {
		name          string
		n             int
		quotas, avail [queue.NumLevels]int
		want          [queue.NumLevels]int
	}{
		{"shares", 20, [3]int{17, 2, 1}, [3]int{100, 100, 100}, [3]int{17, 2, 1}},
		{"rounded down, rest to High", 10, [3]int{17, 2, 1}, [3]int{100, 100, 100}, [3]int{9, 1, 0}},
		{"capped by avail, rest down the levels", 10, [3]int{17, 2, 1}, [3]int{2, 100, 100}, [3]int{2, 8, 0}},
		{"less than n available", 10, [3]int{1, 1, 1}, [3]int{1, 2, 3}, [3]int{1, 2, 3}},
		{"none", 0, [3]int{1, 1, 1}, [3]int{5, 5, 5}, [3]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SplitByQuotas(tt.n, tt.quotas, tt.avail); got != tt.want {
				t.Fatalf("SplitByQuotas(%d, %v, %v) = %v, want %v", tt.n, tt.quotas, tt.avail, got, tt.want)
			}
		})
	}
}
