package storetest

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func testFences(t *testing.T, s store.Store) {
	a := task("a")
	mustCommit(t, s, ins(a))

	ch := []store.Change{start("a", 1, 2, 1)}
	wantResults(t, ch, commit(t, s, ch...), nil)
	a.State, a.Fence, a.Attempt, a.UpdatedAt = store.Running, 2, 1, at(1)
	wantTask(t, s, a)

	// A second start from the old fence is stale and changes nothing.
	ch = []store.Change{start("a", 1, 3, 1), succeed("a", 1), retry("a", 1, at(99), "old"), cancel("a", 1), fail("a", 1, 0, "old")}
	wantResults(t, ch, commit(t, s, ch...), store.ErrStaleFence, store.ErrStaleFence, store.ErrStaleFence,
		store.ErrStaleFence, store.ErrStaleFence)
	wantTask(t, s, a)

	// The current fence writes.
	ch = []store.Change{retry("a", 2, at(500), "boom")}
	wantResults(t, ch, commit(t, s, ch...), nil)
	a.State, a.RunAt, a.LastError, a.UpdatedAt = store.Retrying, at(500), "boom", at(2)
	wantTask(t, s, a)

	ch = []store.Change{start("a", 2, 7, 2), fail("a", 2, 0, "stale"), succeed("a", 7)}
	wantResults(t, ch, commit(t, s, ch...), nil, store.ErrStaleFence, nil)
	a.State, a.Fence, a.Attempt, a.UpdatedAt = store.Succeeded, 7, 2, at(3)
	wantTask(t, s, a)

	// A terminal task takes no more writes, whatever the fence.
	ch = []store.Change{cancel("a", 7), start("a", 7, 8, 3), retry("a", 7, t0, "x"), fail("a", 7, 0, "x")}
	wantResults(t, ch, commit(t, s, ch...), store.ErrStaleFence, store.ErrStaleFence, store.ErrStaleFence,
		store.ErrStaleFence)
	wantTask(t, s, a)

	// Fences are full uint64s.
	b := task("b")
	b.Fence = math.MaxUint64 - 2
	mustCommit(t, s, ins(b), start("b", math.MaxUint64-2, math.MaxUint64, 1))
	if got := get(t, s, "b").Fence; got != math.MaxUint64 {
		t.Errorf("Fence = %d, want %d", got, uint64(math.MaxUint64))
	}
}

func testStaleWriter(t *testing.T, s store.Store) {
	// Attempt 1 (fence 2) hangs past its timeout and becomes a zombie; attempt 2 (fence 3)
	// runs. Whatever the zombie writes later, attempt 2's writes stand.
	mustCommit(t, s, ins(task("a")), start("a", 1, 2, 1))
	mustCommit(t, s, retry("a", 2, at(10), "timed out"), start("a", 2, 3, 2))
	for _, c := range []store.Change{succeed("a", 2), fail("a", 2, 0, "zombie"), retry("a", 2, at(50), "zombie"), cancel("a", 2), start("a", 2, 9, 9)} {
		ch := []store.Change{c}
		wantResults(t, ch, commit(t, s, ch...), store.ErrStaleFence)
	}
	got := get(t, s, "a")
	if got.State != store.Running || got.Fence != 3 || got.Attempt != 2 || got.LastError != "timed out" {
		t.Fatalf("Get(a) = %v fence %d attempt %d %q; want running fence 3 attempt 2", got.State, got.Fence, got.Attempt, got.LastError)
	}
	mustCommit(t, s, succeed("a", 3))
	// The zombie's success after attempt 2's is still refused: same state, other fence.
	ch := []store.Change{succeed("a", 2)}
	wantResults(t, ch, commit(t, s, ch...), store.ErrStaleFence)
}

func testUnknownTask(t *testing.T, s store.Store) {
	ch := []store.Change{start("x", 1, 2, 1), retry("x", 1, t0, ""), succeed("x", 1), fail("x", 1, 0, ""), cancel("x", 1), ins(task("y"))}
	wantResults(t, ch, commit(t, s, ch...), store.ErrUnknownTask, store.ErrUnknownTask, store.ErrUnknownTask,
		store.ErrUnknownTask, store.ErrUnknownTask, nil)
	wantUnknown(t, s, "x")
}

func testValidation(t *testing.T, s store.Store) {
	mod := func(f func(*store.StoredTask)) store.Change {
		tk := task("bad")
		f(&tk)
		return ins(tk)
	}
	bad := []struct {
		name string
		c    store.Change
	}{
		{"op zero", store.Change{Task: task("bad")}},
		{"op unknown", store.Change{Op: 200, Task: task("bad")}},
		{"empty ID", mod(func(tk *store.StoredTask) { tk.ID = "" })},
		{"long ID", mod(func(tk *store.StoredTask) { tk.ID = strings.Repeat("x", store.StoredIDMax+1) })},
		{"empty kind", mod(func(tk *store.StoredTask) { tk.Kind = "" })},
		{"long kind", mod(func(tk *store.StoredTask) { tk.Kind = strings.Repeat("x", store.KindMax+1) })},
		{"long key", mod(func(tk *store.StoredTask) { tk.UniqueKey = strings.Repeat("x", store.UniqueKeyMax+1) })},
		{"long group", mod(func(tk *store.StoredTask) { tk.Group = strings.Repeat("g", store.GroupNameMax+1) })},
		{"long group key", mod(func(tk *store.StoredTask) { tk.Group, tk.Key = "g", strings.Repeat("k", store.GroupKeyMax+1) })},
		{"key without group", mod(func(tk *store.StoredTask) { tk.Key = "k" })},
		{"long headers", mod(func(tk *store.StoredTask) { tk.Headers = map[string]string{"k": strings.Repeat("v", store.HeadersMax)} })},
		{"priority", mod(func(tk *store.StoredTask) { tk.Priority = 9 })},
		{"state zero", mod(func(tk *store.StoredTask) { tk.State = 0 })},
		{"state unknown", mod(func(tk *store.StoredTask) { tk.State = 77 })},
		{"attempt", mod(func(tk *store.StoredTask) { tk.Attempt = -1 })},
		{"max attempts", mod(func(tk *store.StoredTask) { tk.MaxAttempts = -1 })},
		{"timeout", mod(func(tk *store.StoredTask) { tk.Timeout = -1 })},
		{"updated zero", mod(func(tk *store.StoredTask) { tk.UpdatedAt = time.Time{} })},
		{"start same fence", start("ok", 1, 1, 1)},
		{"start lower fence", start("ok", 5, 4, 1)},
		{"start attempt 0", start("ok", 1, 2, 0)},
		{"fail state", fail("ok", 1, store.Succeeded, "")},
		{"fail live state", fail("ok", 1, store.Queued, "")},
		{"succeed no time", withTime(succeed("ok", 1), time.Time{})},
	}
	mustCommit(t, s, ins(task("ok")))
	for _, b := range bad {
		if err := b.c.Validate(); !errors.Is(err, store.ErrInvalidChange) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidChange", b.name, err)
		}
		ch := []store.Change{b.c, ins(task("after-" + b.name))}
		wantResults(t, ch, commit(t, s, ch...), store.ErrInvalidChange, nil)
	}
	wantUnknown(t, s, "bad")
	wantTask(t, s, task("ok")) // untouched by the invalid changes naming it
}

func testChainInOneBatch(t *testing.T, s store.Store) {
	ch := []store.Change{
		ins(task("a")), start("a", 1, 2, 1), succeed("a", 2),
		ins(task("b")), start("b", 1, 2, 1), retry("b", 2, at(100), "e1"), start("b", 2, 3, 2), retry("b", 3, at(200), "e2"),
		ins(task("c")), start("c", 1, 2, 1), fail("c", 2, store.TimedOut, "slow"), cancel("c", 2),
	}
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, store.ErrStaleFence)
	check := func() {
		t.Helper()
		a := task("a")
		a.State, a.Fence, a.Attempt, a.UpdatedAt = store.Succeeded, 2, 1, at(3)
		wantTask(t, s, a)
		b := task("b")
		b.State, b.Fence, b.Attempt, b.RunAt, b.LastError, b.UpdatedAt = store.Retrying, 3, 2, at(200), "e2", at(2)
		wantTask(t, s, b)
		c := task("c")
		c.State, c.Fence, c.Attempt, c.LastError, c.UpdatedAt = store.TimedOut, 2, 1, "slow", at(4)
		wantTask(t, s, c)
	}
	check()
	// Retried whole, the batch reports the same and changes nothing.
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, store.ErrStaleFence)
	check()
	check()
}
