package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// exerciseKeys runs the cases of [store.KeyReader]. Exercise calls it when the store
// implements KeyReader.
func exerciseKeys(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Run("TasksByKey", func(t *testing.T) {
		testTasksByKey(t, newStore(t).(store.KeyReader))
	})
}

// byKey returns the tasks r finds for keys, by key.
func byKey(t *testing.T, r store.KeyReader, keys ...string) map[string]store.StoredTask {
	t.Helper()
	got, err := r.TasksByKey(context.Background(), keys)
	if err != nil {
		t.Fatalf("TasksByKey(%q) = %v", keys, err)
	}
	out := make(map[string]store.StoredTask, len(got))
	for _, tk := range got {
		if !slices.Contains(keys, tk.UniqueKey) {
			t.Errorf("TasksByKey(%q) returned %s of key %q", keys, tk.ID, tk.UniqueKey)
		}
		out[tk.UniqueKey] = tk
	}
	return out
}

func testTasksByKey(t *testing.T, r store.KeyReader) {
	// A live holder, with its payload; a key nobody holds is left out.
	mustCommit(t, r, ins(keyed("a", "A")), ins(windowed("w", "W", time.Time{}, time.Second, at(0))),
		ins(keyed("n", "N")))
	got := byKey(t, r, "A", "W", "N", "nobody", "")
	if len(got) != 3 || got["A"].ID != "a" || string(got["A"].Payload) != "payload of a" || got["W"].ID != "w" || got["N"].ID != "n" {
		t.Fatalf("TasksByKey(A, W, N, nobody) = %v, want a, w, n", got)
	}

	// An end without a window frees the key; one with a window keeps it, with the
	// result, past the window's end too, until another task takes the key.
	succeedWith := func(id string, fence uint64, result string, tm time.Time) store.Change {
		c := withTime(succeed(id, fence), tm)
		c.Task.Result = []byte(result)
		return c
	}
	mustCommit(t, r, start("n", 1, 2, 1), succeedWith("n", 2, "rn", at(5)),
		start("w", 1, 2, 1), succeedWith("w", 2, "rw", at(5)))
	got = byKey(t, r, "N", "W")
	if _, ok := got["N"]; ok || got["W"].ID != "w" || got["W"].State != store.Succeeded || string(got["W"].Result) != "rw" ||
		string(got["W"].Payload) != "payload of w" {
		t.Fatalf("TasksByKey(N, W) after their ends = %v, want w (succeeded, result rw) only", got)
	}
	w := byKey(t, r, "W")["W"]
	if w.HoldsKeyAt(at(2000)) {
		t.Errorf("w.HoldsKeyAt(2000) = true, want false: its window ended at 1005")
	}
	mustCommit(t, r, ins(windowed("w2", "W", time.Time{}, 0, at(2000))))
	if got := byKey(t, r, "W"); got["W"].ID != "w2" {
		t.Errorf("TasksByKey(W) after w2 took it = %v, want w2", got)
	}

	// A dead letter with a window keeps its key; a purge frees it.
	mustCommit(t, r, ins(windowed("d", "D", time.Time{}, time.Hour, at(0))), start("d", 1, 2, 1),
		withTime(fail("d", 2, store.Failed, "boom"), at(3)))
	if got := byKey(t, r, "D"); got["D"].ID != "d" || got["D"].State != store.Failed || got["D"].LastError != "boom" {
		t.Errorf("TasksByKey(D) = %v, want d failed (boom)", got)
	}
	if _, err := r.Purge(context.Background(), "d"); err != nil {
		t.Fatal(err)
	}
	if got := byKey(t, r, "D"); len(got) != 0 {
		t.Errorf("TasksByKey(D) after the purge = %v, want none", got)
	}

	// Too many keys.
	keys := make([]string, store.StatesMax+1)
	for i := range keys {
		keys[i] = "k" + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	if _, err := r.TasksByKey(context.Background(), keys); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("TasksByKey(%d keys) = %v, want ErrInvalidChange", len(keys), err)
	}
}
