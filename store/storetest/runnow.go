package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/axsched/ax/store"
)

// testRunNow: RunNow makes a waiting task of the pool or of the caller due now,
// changing nothing else, and leaves alone the tasks of other owners and those not
// waiting; a Claim then takes the pool task made due.
func testRunNow(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	a := join(t, s, "a", longLease)
	b := join(t, s, "b", longLease)
	delayed := func(id string) store.StoredTask {
		tk := task(id)
		tk.Kind, tk.State, tk.RunAt = "k", store.Delayed, at(50)
		return tk
	}
	commitAs(t, s, a,
		pooled("pool", "k", store.Normal, at(50)),
		pooled("due", "k", store.Normal, at(0)),
		ins(delayed("mine")),
		ins(task("retrying")), start("retrying", 1, 2, 1), retry("retrying", 2, at(60), "boom"),
		ins(task("running")), start("running", 1, 2, 1),
		ins(task("done")), succeed("done", 1),
	)
	commitAs(t, s, b, ins(delayed("theirs")))
	before := map[string]store.StoredTask{}
	for _, id := range []string{"pool", "due", "mine", "retrying", "running", "done", "theirs"} {
		before[id] = get(t, s, id)
	}
	for _, tt := range []struct {
		id    string
		found bool
		runAt int // the stored RunAt after, in ms from t0
	}{
		{"pool", true, 10},
		{"due", true, 0}, // due already: RunAt kept
		{"mine", true, 10},
		{"retrying", true, 10},
		{"mine", true, 10}, // again: nothing more to do
		{"running", false, 0},
		{"done", false, 0},
		{"theirs", false, 50},
		{"nobody", false, 0},
	} {
		found, err := s.RunNow(ctx, a, at(10), tt.id)
		if err != nil || found != tt.found {
			t.Errorf("RunNow(%s) = %v, %v; want %v, nil", tt.id, found, err, tt.found)
			continue
		}
		old, ok := before[tt.id]
		if !ok {
			continue
		}
		got := get(t, s, tt.id)
		want := old
		if tt.found && old.RunAt.After(at(10)) {
			want.RunAt, want.UpdatedAt = at(10), at(10)
		}
		if !got.RunAt.Equal(want.RunAt) || !got.UpdatedAt.Equal(want.UpdatedAt) || got.State != want.State ||
			got.Fence != want.Fence || got.Attempt != want.Attempt || got.LastError != want.LastError {
			t.Errorf("after RunNow(%s): %+v\nwant %+v", tt.id, got, want)
		}
		if tt.found && !got.RunAt.Equal(at(tt.runAt)) {
			t.Errorf("after RunNow(%s): RunAt %v, want %v", tt.id, got.RunAt, at(tt.runAt))
		}
	}
	// Made due, the pool task is claimed; the task of a stays a's.
	got, _ := claim(t, s, b, store.ClaimRequest{Now: at(10), Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Kinds: []string{"k"}})
	if len(got) != 2 || got[0].ID != "due" || got[1].ID != "pool" {
		t.Errorf("Claim() after RunNow = %v, want [due pool]", ids(got))
	}
	if err := s.Leave(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunNow(ctx, a, at(10), "mine"); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RunNow() by an owner that left = %v, want ErrLeaseLost", err)
	}
}
