package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/axsched/ax/store"
)

// The cases of starts committed by an owner apart from their tasks' inserts: what
// every read reports of a task that runs, what a rescue returns of the tasks that
// began and of those that never did, and who may record a start. A store may record
// such starts anywhere (mysqlstore keeps them in the owner's row): these cases check
// only what a caller sees.

// wantRun fails unless tk is Running with that attempt and fence.
func wantRun(t *testing.T, what string, tk store.StoredTask, attempt int, fence uint64) {
	t.Helper()
	if tk.State != store.Running || tk.Attempt != attempt || tk.Fence != fence {
		t.Errorf("%s %q = %v attempt %d fence %#x, want running attempt %d fence %#x", what, tk.ID, tk.State, tk.Attempt, tk.Fence, attempt, fence)
	}
}

// wantWaiting fails unless tk waits (state st) with that attempt: it never began.
func wantWaiting(t *testing.T, what string, tk store.StoredTask, st store.State, attempt int) {
	t.Helper()
	if tk.State != st || tk.Attempt != attempt {
		t.Errorf("%s %q = %v attempt %d, want %v attempt %d (never started)", what, tk.ID, tk.State, tk.Attempt, st, attempt)
	}
}

func byID(ts []store.StoredTask) map[string]store.StoredTask {
	m := make(map[string]store.StoredTask, len(ts))
	for _, tk := range ts {
		m[tk.ID] = tk
	}
	return m
}

// testStartReads: a task started in a commit of its own reads Running, with the start's
// attempt, fence and UpdatedAt, through Get, Recover and States, until it ends; a change
// with the fence before the start is refused and changes nothing.
func testStartReads(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	commitAs(t, s, a, ins(task("g1")), ins(task("g2")))
	commitAs(t, s, a, withTime(start("g1", 1, 2, 1), at(10)))
	tk := get(t, s, "g1")
	wantRun(t, "Get", tk, 1, 2)
	if !tk.UpdatedAt.Equal(at(10)) || tk.Kind != "storetest.kind" || string(tk.Payload) != "payload of g1" {
		t.Errorf("Get(g1) = UpdatedAt %v kind %q payload %q, want the start's time and the inserted kind and payload", tk.UpdatedAt, tk.Kind, tk.Payload)
	}
	wantWaiting(t, "Get", get(t, s, "g2"), store.Queued, 0)
	live := byID(recoverAll(t, s))
	wantRun(t, "Recover", live["g1"], 1, 2)
	wantWaiting(t, "Recover", live["g2"], store.Queued, 0)
	states, err := s.States(ctx, []string{"g1", "g2"})
	if err != nil {
		t.Fatalf("States() error = %v", err)
	}
	wantRun(t, "States", byID(states)["g1"], 1, 2)
	// The fence before the start is stale, for the owner as for anyone.
	changes := []store.Change{cancel("g1", 1)}
	res, err := s.CommitAs(ctx, a, changes)
	if err != nil {
		t.Fatalf("CommitAs(cancel with the fence before the start) error = %v", err)
	}
	wantResults(t, changes, res, store.ErrStaleFence)
	wantResults(t, changes, commit(t, s, changes...), store.ErrStaleFence)
	wantRun(t, "Get after stale writes", get(t, s, "g1"), 1, 2)
	// A start of a running task with its fence: a new attempt.
	commitAs(t, s, a, start("g1", 2, 3, 2), start("g2", 1, 2, 1))
	wantRun(t, "Get", get(t, s, "g1"), 2, 3)
	wantRun(t, "Get", get(t, s, "g2"), 1, 2)
	// A retry and a new start in one commit.
	commitAs(t, s, a, retry("g2", 2, at(50), "boom"), start("g2", 2, 3, 2))
	tk = get(t, s, "g2")
	wantRun(t, "Get after retry and start", tk, 2, 3)
	if tk.LastError != "boom" || !tk.RunAt.Equal(at(50)) {
		t.Errorf("Get(g2) after retry and start: LastError %q RunAt %v, want boom at %v", tk.LastError, tk.RunAt, at(50))
	}
	// Ends.
	commitAs(t, s, a, succeed("g1", 3), fail("g2", 3, store.Failed, "dead"))
	tk = get(t, s, "g1")
	if tk.State != store.Succeeded || tk.Attempt != 2 || tk.Fence != 3 {
		t.Errorf("Get(g1) after success = %v attempt %d fence %d, want succeeded attempt 2 fence 3", tk.State, tk.Attempt, tk.Fence)
	}
	tk = get(t, s, "g2")
	if tk.State != store.Failed || tk.Attempt != 2 || tk.LastError != "dead" {
		t.Errorf("Get(g2) after fail = %v attempt %d %q, want failed attempt 2 dead", tk.State, tk.Attempt, tk.LastError)
	}
	if dl, err := s.DeadLetters(ctx, 0, ""); err != nil || len(dl) != 1 || dl[0].ID != "g2" || dl[0].Attempt != 2 {
		t.Errorf("DeadLetters() = %v, %v; want g2 at attempt 2", dl, err)
	}
	if len(recoverAll(t, s)) != 0 {
		t.Errorf("Recover() after the ends = %v, want none", ids(recoverAll(t, s)))
	}
}

// testRescueCountsStarted: a rescue returns the tasks whose start the ended owner
// committed Running with that attempt, and the others as they waited, attempt
// unchanged: only work that could have begun counts an attempt.
func testRescueCountsStarted(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, ins(task("c1")), ins(task("c2")), ins(task("c3")), ins(task("c4")))
	commitAs(t, s, a, start("c1", 1, 2, 1), start("c2", 1, 2, 1))
	commitAs(t, s, a, succeed("c2", 2), retry("c3", 1, at(20), "later"))
	if err := s.Leave(ctx, a); err != nil {
		t.Fatalf("Leave() error = %v", err)
	}
	got := byID(rescue(t, s, b, 0))
	if len(got) != 3 {
		t.Fatalf("Rescue() = %d tasks, want c1, c3 and c4", len(got))
	}
	wantRun(t, "rescued", got["c1"], 1, got["c1"].Fence)
	wantWaiting(t, "rescued", got["c3"], store.Retrying, 0)
	wantWaiting(t, "rescued", got["c4"], store.Queued, 0)
	for id, tk := range got {
		if tk.Fence>>32 <= b.Epoch {
			t.Errorf("rescued %q fence %#x, want one of an epoch above %d", id, tk.Fence, b.Epoch)
		}
		stored := get(t, s, id)
		if stored.State != tk.State || stored.Attempt != tk.Attempt || stored.Fence != tk.Fence {
			t.Errorf("Get(%q) after rescue = %v attempt %d fence %#x, want what Rescue returned: %v attempt %d fence %#x",
				id, stored.State, stored.Attempt, stored.Fence, tk.State, tk.Attempt, tk.Fence)
		}
	}
	// The ended owner's start set no longer speaks for c1: b's writes apply.
	f := got["c1"].Fence
	commitAs(t, s, b, start("c1", f, f+1, 2))
	wantRun(t, "Get", get(t, s, "c1"), 2, f+1)
	commitAs(t, s, b, succeed("c1", f+1))
	if tk := get(t, s, "c1"); tk.State != store.Succeeded || tk.Attempt != 2 {
		t.Errorf("Get(c1) = %v attempt %d, want succeeded attempt 2", tk.State, tk.Attempt)
	}
	if again := rescue(t, s, b, 0); len(again) != 0 {
		t.Errorf("second Rescue() = %v, want none", ids(again))
	}
}

// testStartFenced: an owner that lost its lease cannot record a start, nor can a
// live owner with a stale fence; either leaves the task as it was.
func testStartFenced(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "svc", longLease)
	commitAs(t, s, a, ins(task("f1")), ins(task("f2")))
	// A stale fence: refused, nothing recorded.
	changes := []store.Change{start("f1", 7, 8, 1)}
	res, err := s.CommitAs(ctx, a, changes)
	if err != nil {
		t.Fatalf("CommitAs(start with a stale fence) error = %v", err)
	}
	wantResults(t, changes, res, store.ErrStaleFence)
	wantWaiting(t, "Get after a stale start", get(t, s, "f1"), store.Queued, 0)
	// The same name joins again: a is fenced off.
	a2 := join(t, s, "svc", longLease)
	if _, err := s.CommitAs(ctx, a, []store.Change{start("f1", 1, 2, 1)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CommitAs(start) by a replaced owner = %v, want ErrLeaseLost", err)
	}
	wantWaiting(t, "Get after a fenced start", get(t, s, "f1"), store.Queued, 0)
	got := byID(rescue(t, s, a2, 0))
	wantWaiting(t, "rescued", got["f1"], store.Queued, 0)
	wantWaiting(t, "rescued", got["f2"], store.Queued, 0)
	// Another owner cannot start a's tasks: they are not its own.
	b := join(t, s, "b", longLease)
	f := got["f1"].Fence
	changes = []store.Change{start("f1", 1, 2, 1)}
	res, err = s.CommitAs(ctx, b, changes)
	if err != nil {
		t.Fatalf("CommitAs(start of another's task with its old fence) error = %v", err)
	}
	wantResults(t, changes, res, store.ErrStaleFence)
	wantWaiting(t, "Get", get(t, s, "f1"), store.Queued, 0)
	commitAs(t, s, a2, start("f1", f, f+1, 1))
	wantRun(t, "Get", get(t, s, "f1"), 1, f+1)
}

// testStartRejoin: a process that restarts under its name takes back the tasks of its
// earlier epoch: the ones it had started come back Running at their attempt, the
// others waiting, and its new starts count from there.
func testStartRejoin(t *testing.T, s store.SharedStore) {
	a := join(t, s, "svc-r", longLease)
	commitAs(t, s, a, ins(task("r1")), ins(task("r2")), ins(task("r3")))
	commitAs(t, s, a, start("r1", 1, 2, 1), start("r2", 1, 2, 1))
	commitAs(t, s, a, retry("r2", 2, at(30), "again"))
	commitAs(t, s, a, start("r2", 2, 3, 2))
	a2 := join(t, s, "svc-r", longLease)
	got := byID(rescue(t, s, a2, 0))
	if len(got) != 3 {
		t.Fatalf("Rescue() by the new epoch = %d tasks, want 3", len(got))
	}
	wantRun(t, "rescued", got["r1"], 1, got["r1"].Fence)
	wantRun(t, "rescued", got["r2"], 2, got["r2"].Fence)
	wantWaiting(t, "rescued", got["r3"], store.Queued, 0)
	var changes []store.Change
	for _, id := range []string{"r1", "r2", "r3"} {
		tk := got[id]
		changes = append(changes, start(id, tk.Fence, tk.Fence+1, tk.Attempt+1))
	}
	commitAs(t, s, a2, changes...)
	for _, id := range []string{"r1", "r2", "r3"} {
		wantRun(t, "Get", get(t, s, id), got[id].Attempt+1, got[id].Fence+1)
	}
	a3 := join(t, s, "svc-r", longLease)
	again := byID(rescue(t, s, a3, 0))
	for _, id := range []string{"r1", "r2", "r3"} {
		wantRun(t, "rescued again", again[id], got[id].Attempt+1, again[id].Fence)
	}
}

// testStartsMany: starts beyond what one record of a store may hold (many tasks with
// long IDs) read and rescue like a few.
func testStartsMany(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	const n = 600
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	id := func(i int) string { return fmt.Sprintf("%s-%04d", strings.Repeat("m", 100), i) }
	var changes []store.Change
	for i := range n {
		changes = append(changes, ins(task(id(i))))
	}
	commitAs(t, s, a, changes...)
	changes = changes[:0]
	for i := 0; i < n; i += 2 {
		changes = append(changes, start(id(i), 1, 2, 1))
	}
	commitAs(t, s, a, changes...)
	changes = changes[:0]
	for i := 0; i < n; i += 4 {
		changes = append(changes, succeed(id(i), 2))
	}
	commitAs(t, s, a, changes...)
	for _, i := range []int{2, 3, 4, n - 2, n - 1} {
		switch tk := get(t, s, id(i)); {
		case i%4 == 0:
			if tk.State != store.Succeeded {
				t.Errorf("Get(#%d) = %v, want succeeded", i, tk.State)
			}
		case i%2 == 0:
			wantRun(t, "Get", tk, 1, 2)
		default:
			wantWaiting(t, "Get", tk, store.Queued, 0)
		}
	}
	// A start beside a stale change: the batch is planned again from the stored
	// tasks, and the start recorded all the same.
	changes = []store.Change{start(id(1), 1, 2, 1), cancel(id(2), 1)}
	res, err := s.CommitAs(ctx, a, changes)
	if err != nil {
		t.Fatalf("CommitAs(start, stale cancel) error = %v", err)
	}
	wantResults(t, changes, res, nil, store.ErrStaleFence)
	wantRun(t, "Get", get(t, s, id(1)), 1, 2)
	wantRun(t, "Get", get(t, s, id(2)), 1, 2)
	if err := s.Leave(ctx, a); err != nil {
		t.Fatalf("Leave() error = %v", err)
	}
	// Rescued in two parts: what the first leaves behind still reads as it was.
	got := rescue(t, s, b, 100)
	if len(got) != 100 {
		t.Fatalf("Rescue(limit 100) = %d tasks, want 100", len(got))
	}
	wantRun(t, "Get after a partial rescue", get(t, s, id(n-2)), 1, 2)
	got = append(got, rescue(t, s, b, 0)...)
	if len(got) != n-n/4 {
		t.Fatalf("Rescue() = %d tasks in all, want %d", len(got), n-n/4)
	}
	running := 0
	for _, tk := range got {
		if tk.State == store.Running {
			running++
			if tk.Attempt != 1 {
				t.Errorf("rescued %q attempt %d, want 1", tk.ID, tk.Attempt)
			}
		} else if tk.Attempt != 0 {
			t.Errorf("rescued %q = %v attempt %d, want attempt 0", tk.ID, tk.State, tk.Attempt)
		}
	}
	if running != n/4+1 {
		t.Errorf("Rescue() returned %d running tasks, want %d (those started and not ended)", running, n/4+1)
	}
}

// testStartClaimed: a task claimed from the pool, then retried and started again by
// its claimer, reads Running at the new attempt, to the kernel that follows it too;
// RunNow leaves a running task alone.
func testStartClaimed(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	commitAs(t, s, a, pooled("p1", "k", store.Normal, t0))
	cl, _ := claim(t, s, b, store.ClaimRequest{Now: at(1), Want: store.ByPriority[int]{Normal: 1}, Kinds: []string{"k"}})
	if len(cl) != 1 {
		t.Fatalf("Claim() = %v, want p1", ids(cl))
	}
	f := cl[0].Fence
	commitAs(t, s, b, retry("p1", f, at(2), "x"))
	commitAs(t, s, b, start("p1", f, f+1, 2))
	states, err := s.States(ctx, []string{"p1"})
	if err != nil || len(states) != 1 {
		t.Fatalf("States(p1) = %v, %v", states, err)
	}
	wantRun(t, "States", states[0], 2, f+1)
	wantRun(t, "Get", get(t, s, "p1"), 2, f+1)
	if found, err := s.RunNow(ctx, b, at(0), "p1"); err != nil || found {
		t.Errorf("RunNow(running p1) = %v, %v; want false", found, err)
	}
	wantRun(t, "Get after RunNow", get(t, s, "p1"), 2, f+1)
	if found, err := s.RunNow(ctx, a, at(0), "p1"); err != nil || found {
		t.Errorf("RunNow(p1) by another owner = %v, %v; want false", found, err)
	}
}
