package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/axsched/ax/store"
)

func testRecover(t *testing.T, s store.Store) {
	type spec struct {
		id    string
		prio  store.Priority
		runAt int
		state store.State
	}
	specs := []spec{
		{"n-late", store.Normal, 900, store.Queued},
		{"h-late", store.High, 500, store.Delayed},
		{"l-early", store.Low, -100, store.Queued},
		{"h-early", store.High, 10, store.Queued},
		{"n-early", store.Normal, 5, store.Retrying},
		{"n-tie-b", store.Normal, 700, store.Running},
		{"n-tie-a", store.PriorityDefault, 700, store.Queued},
		{"h-done", store.High, 0, store.Succeeded},
		{"h-failed", store.High, 0, store.Failed},
		{"n-canceled", store.Normal, 0, store.Canceled},
		{"l-timedout", store.Low, 0, store.TimedOut},
		{"l-evicted", store.Low, 0, store.Evicted},
		{"l-abandoned", store.Low, 0, store.Abandoned},
		{"l-late", store.Low, 100_000, store.Delayed},
	}
	byID := map[string]store.StoredTask{}
	var ch []store.Change
	for _, sp := range specs {
		tk := task(sp.id)
		tk.Priority, tk.RunAt, tk.State = sp.prio, at(sp.runAt), sp.state
		byID[sp.id] = tk
		ch = append(ch, ins(tk))
	}
	mustCommit(t, s, ch...)
	got := recoverAll(t, s)
	want := []string{"h-early", "h-late", "n-early", "n-tie-a", "n-tie-b", "n-late", "l-early", "l-late"}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("Recover() = %v, want %v", ids(got), want)
	}
	for _, tk := range got {
		if d := diffTask(tk, byID[tk.ID]); d != "" {
			t.Errorf("Recover(): %s: %s", tk.ID, d)
		}
	}
	// Recover changes nothing.
	if again := recoverAll(t, s); !slices.Equal(ids(again), want) {
		t.Errorf("second Recover() = %v, want %v", ids(again), want)
	}
}

func testRecoverRunning(t *testing.T, s store.Store) {
	mustCommit(t, s, ins(task("a")), start("a", 1, 2, 1))
	// The process dies here. At restart, the running attempt comes back as it was …
	got := recoverAll(t, s)
	if len(got) != 1 || got[0].State != store.Running || got[0].Attempt != 1 || got[0].Fence != 2 {
		t.Fatalf("Recover() = %+v, want a running at attempt 1, fence 2", got)
	}
	// … and the kernel runs it again as a new attempt with a new fence.
	mustCommit(t, s, start("a", 2, 3, 2))
	// A write of the dead attempt (a lagging batch) is refused.
	ch := []store.Change{succeed("a", 2)}
	wantResults(t, ch, commit(t, s, ch...), store.ErrStaleFence)
	// A task out of attempts is dead-lettered instead.
	mustCommit(t, s, fail("a", 3, store.Failed, "process died during the last attempt"))
	if n, err := s.CountDeadLetters(context.Background()); n != 1 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 1", n, err)
	}
	if got := recoverAll(t, s); len(got) != 0 {
		t.Errorf("Recover() = %v, want none", ids(got))
	}
}

// deadLetters makes n dead letters "dNN" and a few tasks that are not.
func deadLetters(t *testing.T, s store.Store, n int) {
	t.Helper()
	states := []store.State{store.Failed, store.TimedOut, store.Evicted, store.Abandoned}
	var ch []store.Change
	for i := range n {
		id := fmt.Sprintf("d%02d", i)
		ch = append(ch, ins(task(id)), start(id, 1, 2, 1), fail(id, 2, states[i%len(states)], "error "+id))
	}
	ch = append(ch, ins(task("live")), ins(task("done")), cancel("done", 1), ins(task("ok")), start("ok", 1, 2, 1), succeed("ok", 2))
	mustCommit(t, s, ch...)
}

func testDeadLetters(t *testing.T, s store.Store) {
	ctx := context.Background()
	if n, err := s.CountDeadLetters(ctx); n != 0 || err != nil {
		t.Fatalf("CountDeadLetters() = %d, %v; want 0", n, err)
	}
	if dl, err := s.DeadLetters(ctx, 10, ""); len(dl) != 0 || err != nil {
		t.Fatalf("DeadLetters() = %v, %v; want none", ids(dl), err)
	}
	deadLetters(t, s, 25)
	if n, err := s.CountDeadLetters(ctx); n != 25 || err != nil {
		t.Fatalf("CountDeadLetters() = %d, %v; want 25", n, err)
	}
	var all []string
	after := ""
	for page := 0; ; page++ {
		dl, err := s.DeadLetters(ctx, 10, after)
		if err != nil {
			t.Fatalf("DeadLetters(10, %q) error = %v", after, err)
		}
		if len(dl) == 0 {
			break
		}
		if page > 3 || len(dl) > 10 {
			t.Fatalf("DeadLetters(10, %q) = %v: too many", after, ids(dl))
		}
		for _, tk := range dl {
			if !tk.State.DeadLetter() || tk.LastError != "error "+tk.ID || tk.Attempt != 1 || tk.Fence != 2 {
				t.Errorf("dead letter %q: state %v, error %q, attempt %d, fence %d", tk.ID, tk.State, tk.LastError, tk.Attempt, tk.Fence)
			}
			if !bytes.Equal(tk.Payload, []byte("payload of "+tk.ID)) {
				t.Errorf("dead letter %q: payload %q", tk.ID, tk.Payload)
			}
		}
		all = append(all, ids(dl)...)
		after = dl[len(dl)-1].ID
	}
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("d%02d", i))
	}
	if !slices.Equal(all, want) {
		t.Errorf("DeadLetters pages = %v, want %v", all, want)
	}
	dl, err := s.DeadLetters(ctx, 0, "") // limit <= 0: the default page
	if err != nil || len(dl) != min(25, store.DeadLettersLimitDefault) {
		t.Errorf("DeadLetters(0, \"\") = %d tasks, %v; want 25", len(dl), err)
	}
	dl, err = s.DeadLetters(ctx, 3, "d10")
	if err != nil || !slices.Equal(ids(dl), []string{"d11", "d12", "d13"}) {
		t.Errorf("DeadLetters(3, d10) = %v, %v; want [d11 d12 d13]", ids(dl), err)
	}
}

func testRequeue(t *testing.T, s store.Store) {
	ctx := context.Background()
	deadLetters(t, s, 5)
	before := get(t, s, "d01")
	got, err := s.Requeue(ctx, at(1000), "d01", "d03", "live", "done", "ok", "unknown", "d03")
	if err != nil {
		t.Fatalf("Requeue() error = %v", err)
	}
	slices.SortFunc(got, func(a, b store.StoredTask) int { return strings.Compare(a.ID, b.ID) })
	if !slices.Equal(ids(got), []string{"d01", "d03"}) {
		t.Fatalf("Requeue() = %v, want [d01 d03]", ids(got))
	}
	for _, tk := range got {
		stored := get(t, s, tk.ID)
		if d := diffTask(tk, stored); d != "" {
			t.Errorf("Requeue() returned %q unlike Get: %s", tk.ID, d)
		}
		if tk.State != store.Queued || tk.Attempt != 0 || tk.Fence <= 2 || !tk.RunAt.Equal(at(1000)) ||
			!tk.UpdatedAt.Equal(at(1000)) || tk.LastError != "error "+tk.ID {
			t.Errorf("requeued %q: state %v, attempt %d, fence %d, run at %v, updated %v, error %q",
				tk.ID, tk.State, tk.Attempt, tk.Fence, tk.RunAt, tk.UpdatedAt, tk.LastError)
		}
	}
	if got[0].Kind != before.Kind || !bytes.Equal(got[0].Payload, before.Payload) || got[0].MaxAttempts != before.MaxAttempts {
		t.Errorf("requeued d01 lost its kind, payload or max attempts: %+v", got[0])
	}
	if n, err := s.CountDeadLetters(ctx); n != 3 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 3", n, err)
	}
	if live := ids(recoverAll(t, s)); !slices.Equal(live, []string{"live", "d01", "d03"}) {
		t.Errorf("Recover() = %v, want [live d01 d03]", live)
	}
	// The new life runs under the returned fence; the old attempt's fence is stale.
	f := got[0].Fence
	ch := []store.Change{succeed("d01", 2), start("d01", f, f+1, 1), succeed("d01", f+1)}
	wantResults(t, ch, commit(t, s, ch...), store.ErrStaleFence, nil, nil)
	// Requeued tasks are no longer dead letters.
	if again, err := s.Requeue(ctx, at(2000), "d01", "d03"); len(again) != 0 || err != nil {
		t.Errorf("second Requeue() = %v, %v; want none", ids(again), err)
	}
	if none, err := s.Requeue(ctx, at(2000)); len(none) != 0 || err != nil {
		t.Errorf("Requeue() of no IDs = %v, %v", ids(none), err)
	}
}

func testPurge(t *testing.T, s store.Store) {
	ctx := context.Background()
	deadLetters(t, s, 4)
	n, err := s.Purge(ctx, "d00", "d02", "live", "done", "ok", "unknown", "d00")
	if n != 2 || err != nil {
		t.Fatalf("Purge() = %d, %v; want 2", n, err)
	}
	wantUnknown(t, s, "d00")
	wantUnknown(t, s, "d02")
	for _, id := range []string{"d01", "d03", "live", "done", "ok"} {
		get(t, s, id)
	}
	if c, err := s.CountDeadLetters(ctx); c != 2 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 2", c, err)
	}
	if n, err := s.Purge(ctx); n != 0 || err != nil {
		t.Errorf("Purge() of no IDs = %d, %v", n, err)
	}
}

func testPurgeCompleted(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ch []store.Change
	for i := range 10 {
		id := fmt.Sprintf("s%d", i)
		ch = append(ch, ins(task(id)), start(id, 1, 2, 1), withTime(succeed(id, 2), at(i*1000)))
		id = fmt.Sprintf("c%d", i)
		ch = append(ch, ins(task(id)), withTime(cancel(id, 1), at(i*1000)))
		id = fmt.Sprintf("f%d", i) // dead letters are kept however old
		ch = append(ch, ins(task(id)), withTime(fail(id, 1, store.Abandoned, ""), at(i*1000-1_000_000)))
		id = fmt.Sprintf("q%d", i) // live tasks too
		tk := task(id)
		tk.UpdatedAt = at(-1_000_000)
		ch = append(ch, ins(tk))
	}
	mustCommit(t, s, ch...)
	n, err := s.PurgeCompleted(ctx, at(5000)) // deletes those updated before 5 s: 0…4
	if n != 10 || err != nil {
		t.Fatalf("PurgeCompleted(5s) = %d, %v; want 10", n, err)
	}
	for i := range 10 {
		for _, p := range []string{"s", "c"} {
			id := fmt.Sprintf("%s%d", p, i)
			if i < 5 {
				wantUnknown(t, s, id)
			} else {
				get(t, s, id)
			}
		}
		get(t, s, fmt.Sprintf("f%d", i))
		get(t, s, fmt.Sprintf("q%d", i))
	}
	if n, err := s.PurgeCompleted(ctx, at(5000)); n != 0 || err != nil {
		t.Errorf("second PurgeCompleted(5s) = %d, %v; want 0", n, err)
	}
	if n, err := s.PurgeCompleted(ctx, at(1_000_000)); n != 10 || err != nil {
		t.Errorf("PurgeCompleted(1000s) = %d, %v; want 10", n, err)
	}
}
