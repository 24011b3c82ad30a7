package mysqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// TestImplicitRecord: the ends of tasks started together whose records the rows
// reproduce (a kernel's first attempts) write started_at only, no history, in one
// UPDATE without a CASE; Get rebuilds the record; a retry's record goes to history.
func TestImplicitRecord(t *testing.T) {
	s := openStore(t, "implicit")
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	var ins, starts, ends []store.Change
	for i := range 20 {
		id := fmt.Sprintf("i%02d", i)
		ins = append(ins, store.Change{Op: store.OpInsert, Task: store.StoredTask{ID: id, Kind: "k", State: store.Queued, Fence: 1, RunAt: t0, CreatedAt: t0, UpdatedAt: t0}})
		starts = append(starts, store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Attempt: 1, Fence: 2, UpdatedAt: t0.Add(time.Millisecond)}})
		ends = append(ends, store.Change{
			Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: t0.Add(9 * time.Millisecond)},
			Attempt: store.Attempt{Number: 1, Start: t0.Add(time.Millisecond), End: t0.Add(9 * time.Millisecond), Outcome: store.Succeeded},
		})
	}
	for _, b := range [][]store.Change{ins, starts, ends} {
		if _, err := s.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var withHistory, withStart int
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(history IS NOT NULL), 0), COALESCE(SUM(started_at <> 0), 0) FROM "+s.table).Scan(&withHistory, &withStart); err != nil {
		t.Fatal(err)
	}
	if withHistory != 0 || withStart != 20 {
		t.Errorf("rows with history %d, with started_at %d; want 0, 20", withHistory, withStart)
	}
	got, err := s.Get(ctx, "i07")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 1 || got.History[0].Number != 1 || !got.History[0].Start.Equal(t0.Add(time.Millisecond)) ||
		!got.History[0].End.Equal(t0.Add(9*time.Millisecond)) || got.History[0].Outcome != store.Succeeded {
		t.Errorf("Get(i07).History = %+v, want the implicit record of attempt 1", got.History)
	}
}
