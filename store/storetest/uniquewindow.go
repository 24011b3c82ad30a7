package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// windowed returns a task holding key with the window until and for, inserted at when.
func windowed(id, key string, until time.Time, dur time.Duration, when time.Time) store.StoredTask {
	tk := keyed(id, key)
	tk.UniqueUntil, tk.UniqueFor = until, dur
	tk.CreatedAt, tk.UpdatedAt = when, when
	return tk
}

// wantHolder checks that err is a refusal of a duplicate key held by holder.
func wantHolder(t *testing.T, err error, holder string) {
	t.Helper()
	var dk *store.DuplicateKeyError
	if !errors.As(err, &dk) || !errors.Is(err, store.ErrDuplicateKey) {
		t.Errorf("insert error = %v, want a *store.DuplicateKeyError naming %q", err, holder)
		return
	}
	if dk.Holder != holder {
		t.Errorf("DuplicateKeyError.Holder = %q, want %q (%v)", dk.Holder, holder, err)
	}
}

func testUniqueWindow(t *testing.T, s store.Store) {
	// UniqueFor: held while live, then for 10 ms after the end.
	mustCommit(t, s, ins(windowed("f1", "F", time.Time{}, 10*time.Millisecond, at(0))))
	if got := get(t, s, "f1"); got.UniqueFor != 10*time.Millisecond || !got.UniqueUntil.IsZero() {
		t.Errorf("Get(f1) window = %v, %v; want 10ms, zero", got.UniqueUntil, got.UniqueFor)
	}
	res := commit(t, s, ins(windowed("f2", "F", time.Time{}, 0, at(1))))
	wantHolder(t, res[0], "f1")
	mustCommit(t, s, withTime(cancel("f1", 1), at(20))) // the window runs to at(30)
	res = commit(t, s, ins(windowed("f2", "F", time.Time{}, 0, at(29))))
	wantHolder(t, res[0], "f1")
	wantUnknown(t, s, "f2")
	mustCommit(t, s, ins(windowed("f3", "F", time.Time{}, 0, at(30)))) // the window is over
	res = commit(t, s, ins(windowed("f4", "F", time.Time{}, 0, at(31))))
	wantHolder(t, res[0], "f3")

	// UniqueUntil: held until a given time, whenever the task ended.
	mustCommit(t, s, ins(windowed("u1", "U", at(100), 0, at(0))),
		start("u1", 1, 2, 1), withTime(succeed("u1", 2), at(10)))
	res = commit(t, s, ins(windowed("u2", "U", time.Time{}, 0, at(99))))
	wantHolder(t, res[0], "u1")
	mustCommit(t, s, ins(windowed("u3", "U", time.Time{}, 0, at(100))))

	// Both: the later end counts.
	mustCommit(t, s, ins(windowed("b1", "B", at(50), 100*time.Millisecond, at(0))), withTime(cancel("b1", 1), at(10)))
	res = commit(t, s, ins(windowed("b2", "B", time.Time{}, 0, at(109))))
	wantHolder(t, res[0], "b1")
	mustCommit(t, s, ins(windowed("b3", "B", time.Time{}, 0, at(110))))

	// In one batch: the ended holder keeps the key for its window, and frees it after.
	ch := []store.Change{
		ins(windowed("i1", "I", time.Time{}, 10*time.Millisecond, at(0))), withTime(cancel("i1", 1), at(5)),
		ins(windowed("i2", "I", time.Time{}, 0, at(6))),
		ins(windowed("i3", "I", time.Time{}, 0, at(15))),
	}
	res = commit(t, s, ch...)
	wantResults(t, ch, res, nil, nil, store.ErrDuplicateKey, nil)
	wantHolder(t, res[2], "i1")
	wantUnknown(t, s, "i2")
	res = commit(t, s, ins(windowed("i4", "I", time.Time{}, 0, at(500))))
	wantHolder(t, res[0], "i3")

	// A task inserted terminal holds no key, window or not.
	done := windowed("t1", "T", time.Time{}, time.Hour, at(0))
	done.State = store.Succeeded
	mustCommit(t, s, ins(done), ins(windowed("t2", "T", time.Time{}, 0, at(1))))
}

func testUniqueWindowRequeuePurge(t *testing.T, s store.Store) {
	ctx := context.Background()
	// A dead letter in its own window may be requeued; another's window holds it back
	// until it ends.
	mustCommit(t, s, ins(windowed("d1", "D", time.Time{}, 100*time.Millisecond, at(0))),
		withTime(fail("d1", 1, store.Failed, "x"), at(10))) // window to at(110)
	got, err := s.Requeue(ctx, at(20), "d1")
	if err != nil || len(got) != 1 {
		t.Fatalf("Requeue(d1) = %v, %v; want [d1]: its own window holds no key against it", ids(got), err)
	}
	mustCommit(t, s, withTime(fail("d1", got[0].Fence, store.Failed, "y"), at(30))) // window to at(130)
	mustCommit(t, s, ins(windowed("e1", "E", time.Time{}, 100*time.Millisecond, at(0))),
		withTime(fail("e1", 1, store.Failed, "x"), at(10)))
	mustCommit(t, s, ins(windowed("e2", "E", time.Time{}, 0, at(200))), withTime(cancel("e2", 1), at(201)))
	// e2 took E from e1 (e1's window ended at 110) and freed it at its end.
	if got, err := s.Requeue(ctx, at(300), "e1"); err != nil || len(got) != 1 {
		t.Errorf("Requeue(e1) = %v, %v; want [e1] once E is free", ids(got), err)
	}
	mustCommit(t, s, ins(windowed("g1", "G", time.Time{}, 0, at(0))))
	mustCommit(t, s, ins(windowed("g2", "G2", time.Time{}, 100*time.Millisecond, at(0))), withTime(fail("g2", 1, store.Failed, "x"), at(10)))
	if got, err := s.Requeue(ctx, at(20), "g2"); err != nil || len(got) != 1 {
		t.Fatalf("Requeue(g2) = %v, %v; want [g2]", ids(got), err)
	}

	// A window that ended lets a dead letter with the key be requeued.
	mustCommit(t, s, ins(windowed("r2", "R", time.Time{}, 0, at(0))), withTime(fail("r2", 1, store.Failed, "x"), at(5)),
		ins(windowed("r1", "R", time.Time{}, 100*time.Millisecond, at(6))), withTime(cancel("r1", 1), at(10)))
	if got, err := s.Requeue(ctx, at(50), "r2"); err != nil || len(got) != 0 {
		t.Errorf("Requeue(r2) at 50 = %v, %v; want none: r1's window holds R to 110", ids(got), err)
	}
	if got, err := s.Requeue(ctx, at(110), "r2"); err != nil || len(got) != 1 {
		t.Errorf("Requeue(r2) at 110 = %v, %v; want [r2]: r1's window is over", ids(got), err)
	}
	res := commit(t, s, ins(windowed("r3", "R", time.Time{}, 0, at(120))))
	wantHolder(t, res[0], "r2")

	// PurgeCompleted keeps a completed task whose window ends after olderThan.
	mustCommit(t, s, ins(windowed("p1", "P", time.Time{}, time.Second, at(0))), withTime(cancel("p1", 1), at(10)))
	if n, err := s.PurgeCompleted(ctx, at(500)); err != nil || n != 2 { // e2 and r1 go, p1 stays
		t.Errorf("PurgeCompleted(at 500) = %d, %v; want 2 (e2, r1): p1's window ends at 1010", n, err)
	}
	res = commit(t, s, ins(windowed("p2", "P", time.Time{}, 0, at(600))))
	wantHolder(t, res[0], "p1")
	if n, err := s.PurgeCompleted(ctx, at(1010)); err != nil || n != 1 {
		t.Errorf("PurgeCompleted(at 1010) = %d, %v; want 1 (p1)", n, err)
	}
	wantUnknown(t, s, "p1")
	mustCommit(t, s, ins(windowed("p3", "P", time.Time{}, 0, at(700))))

	// Purge deletes a dead letter in its window and frees its key.
	mustCommit(t, s, ins(windowed("q1", "Q", time.Time{}, time.Hour, at(0))), withTime(fail("q1", 1, store.Failed, "x"), at(10)))
	if n, err := s.Purge(ctx, "q1"); err != nil || n != 1 {
		t.Fatalf("Purge(q1) = %d, %v", n, err)
	}
	mustCommit(t, s, ins(windowed("q2", "Q", time.Time{}, 0, at(20))))
}

func testUniqueWindowValidation(t *testing.T, s store.Store) {
	bad := []struct {
		field string
		task  store.StoredTask
	}{
		{"Task.UniqueFor", windowed("v1", "V", time.Time{}, -time.Millisecond, at(0))},
		{"Task.UniqueFor", windowed("v2", "", time.Time{}, time.Second, at(0))},
		{"Task.UniqueUntil", windowed("v3", "", at(10), 0, at(0))},
	}
	for _, b := range bad {
		ch := []store.Change{ins(b.task)}
		res := commit(t, s, ch...)
		wantResults(t, ch, res, store.ErrInvalidChange)
		if res[0] == nil || !strings.Contains(res[0].Error(), b.field) {
			t.Errorf("insert %s: error = %v, want one naming %s", b.task.ID, res[0], b.field)
		}
		wantUnknown(t, s, b.task.ID)
	}
}
