package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/axsched/ax/store"
)

func testUniqueKey(t *testing.T, s store.Store) {
	mustCommit(t, s, ins(keyed("a", "K")))
	ch := []store.Change{ins(keyed("b", "K")), ins(keyed("c", "K2"))}
	wantResults(t, ch, commit(t, s, ch...), store.ErrDuplicateKey, nil)
	wantUnknown(t, s, "b")

	// Two live inserts with one key in a batch: the first wins.
	ch = []store.Change{ins(keyed("d", "K3")), ins(keyed("e", "K3"))}
	wantResults(t, ch, commit(t, s, ch...), nil, store.ErrDuplicateKey)

	// A terminal insert does not hold the key, whatever else does.
	done := keyed("f", "K")
	done.State = store.Canceled
	mustCommit(t, s, ins(done))

	// The retry of the holder's own insert is not a conflict.
	mustCommit(t, s, ins(keyed("a", "K")))

	// Every terminal state frees the key.
	ends := []struct {
		name string
		end  func(id string) []store.Change
	}{
		{"succeed", func(id string) []store.Change { return []store.Change{start(id, 1, 2, 1), succeed(id, 2)} }},
		{"fail", func(id string) []store.Change {
			return []store.Change{start(id, 1, 2, 1), fail(id, 2, store.Failed, "x")}
		}},
		{"timed-out", func(id string) []store.Change {
			return []store.Change{start(id, 1, 2, 1), fail(id, 2, store.TimedOut, "x")}
		}},
		{"cancel", func(id string) []store.Change { return []store.Change{cancel(id, 1)} }},
		{"evicted", func(id string) []store.Change { return []store.Change{fail(id, 1, store.Evicted, "")} }},
		{"abandoned", func(id string) []store.Change { return []store.Change{fail(id, 1, store.Abandoned, "")} }},
	}
	holder := "a"
	for i, e := range ends {
		mustCommit(t, s, e.end(holder)...)
		next := fmt.Sprintf("a%d", i)
		ch := []store.Change{ins(keyed(next, "K"))}
		wantResults(t, ch, commit(t, s, ch...), nil)
		ch = []store.Change{ins(keyed(next+"-dup", "K"))}
		wantResults(t, ch, commit(t, s, ch...), store.ErrDuplicateKey)
		if t.Failed() {
			t.Fatalf("after %s", e.name)
		}
		holder = next
	}
	// Requeue of a dead letter whose key is held again is skipped.
	requeued, err := s.Requeue(context.Background(), at(10), "a1") // a1 failed; a5 holds K
	if err != nil || len(requeued) != 0 {
		t.Errorf("Requeue(a1) = %v, %v; want none while K is held", ids(requeued), err)
	}
	mustCommit(t, s, cancel(holder, 1))
	requeued, err = s.Requeue(context.Background(), at(10), "a1")
	if err != nil || len(requeued) != 1 {
		t.Fatalf("Requeue(a1) = %v, %v; want [a1] once K is free", ids(requeued), err)
	}
	ch = []store.Change{ins(keyed("z", "K"))}
	wantResults(t, ch, commit(t, s, ch...), store.ErrDuplicateKey)
}

func testUniqueKeyBytes(t *testing.T, s store.Store) {
	// Keys compare byte for byte: no case folding, no trailing-space padding, no accent folding.
	keys := []string{"key", "Key", "KEY", "key ", " key", "kéy", "key\x00", "\xff"}
	var ch []store.Change
	for i, k := range keys {
		ch = append(ch, ins(keyed(fmt.Sprintf("t%d", i), k)))
	}
	mustCommit(t, s, ch...)
	for i, k := range keys {
		got := get(t, s, fmt.Sprintf("t%d", i)).UniqueKey
		if got != k {
			t.Errorf("UniqueKey = %q, want %q", got, k)
		}
	}
	ch = []store.Change{ins(keyed("dup", "Key"))}
	wantResults(t, ch, commit(t, s, ch...), store.ErrDuplicateKey)
	// IDs are byte-exact too.
	mustCommit(t, s, ins(task("id")), ins(task("ID")), ins(task("id ")))
	for _, id := range []string{"id", "ID", "id "} {
		if got := get(t, s, id).ID; got != id {
			t.Errorf("Get(%q).ID = %q", id, got)
		}
	}
}

func testUniqueKeyFreedInBatch(t *testing.T, s store.Store) {
	mustCommit(t, s, ins(keyed("a", "K")))
	ch := []store.Change{
		cancel("a", 1), ins(keyed("b", "K")), // freed, then taken
		ins(keyed("c", "K2")), start("c", 1, 2, 1), succeed("c", 2), ins(keyed("d", "K2")),
		ins(keyed("e", "K2")), // held by d
	}
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, store.ErrDuplicateKey)
	for id, st := range map[string]store.State{"a": store.Canceled, "b": store.Queued, "c": store.Succeeded, "d": store.Queued} {
		if got := get(t, s, id).State; got != st {
			t.Errorf("Get(%q).State = %v, want %v", id, got, st)
		}
	}
	wantUnknown(t, s, "e")
	// The retry of the whole batch reports the same.
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, store.ErrDuplicateKey)
	wantUnknown(t, s, "e")
}

func testConcurrentUniqueKeys(t *testing.T, s store.Store) {
	// Workers race to insert tasks with the same keys: exactly one live task per key.
	const workers, keys = 6, 30
	var wg sync.WaitGroup
	won := make([][]bool, workers)
	errs := make(chan error, workers)
	for w := range workers {
		won[w] = make([]bool, keys)
		wg.Go(func() {
			var ch []store.Change
			for k := range keys {
				ch = append(ch, ins(keyed(fmt.Sprintf("w%d-k%02d", w, k), fmt.Sprintf("race-%02d", k))))
			}
			res, err := s.Commit(context.Background(), ch)
			if err != nil {
				errs <- err
				return
			}
			for k, r := range res {
				switch {
				case r == nil:
					won[w][k] = true
				case !errors.Is(r, store.ErrDuplicateKey):
					errs <- r
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		n := 0
		for w := range workers {
			if won[w][k] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("key race-%02d: %d inserts won, want exactly 1", k, n)
		}
	}
	if live := recoverAll(t, s); len(live) != keys {
		t.Errorf("len(Recover()) = %d, want %d", len(live), keys)
	}
}
