package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// BenchmarkCallersCycle measures the group commits of a kernel that serves callers
// submitting one task at a time, without the kernel: each CommitAs (one round trip on
// a store made by Open) inserts n acknowledged tasks of its owner, starts the n the
// commit before inserted (entries of the start set) and ends the n started before
// that, with implicit attempt records, all but one of them at one time, as a
// kernel's mostly are (so the ends are an UPDATE of n-1 rows and one of one row). It
// reports tasks/s and the CPU per task of this process and of the
// database server (its /proc entry, read by @@pid_file: the server's whole work
// meanwhile, other clients' included).
//
//	cd mysqlstore && go test -run '^$' -bench CallersCycle -benchtime 400x
func BenchmarkCallersCycle(b *testing.B) {
	for _, n := range []int{16, 50} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchCallersCycle(b, n) })
	}
}

func benchCallersCycle(b *testing.B, n int) {
	ctx := context.Background()
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: tableName(b), Retention: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = s.Drop(context.Background())
		_ = s.Close()
	})
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	o, err := s.Join(ctx, "bench-callers", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"n":12345}`)
	base := time.Now().Truncate(time.Millisecond)
	seq := 0
	var inserted, started []string
	startedAt := map[string]time.Time{}
	cycle := func(c int) {
		now := base.Add(time.Duration(c) * 3 * time.Millisecond)
		changes := make([]store.Change, 0, 3*n)
		for i, id := range started {
			at := startedAt[id]
			end := now.Add(time.Millisecond)
			if i == 0 {
				end = now // one end of its own time: an UPDATE of one row
			}
			changes = append(changes, store.Change{
				Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: end},
				Attempt: store.Attempt{Number: 1, Start: at, End: end, Outcome: store.Succeeded, Owner: o.Name},
			})
			delete(startedAt, id)
		}
		for _, id := range inserted {
			at := now
			startedAt[id] = at
			changes = append(changes, store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: at}})
		}
		started, inserted = inserted, make([]string, 0, n)
		for range n {
			seq++
			id := fmt.Sprintf("ax0123456789ab-%016x", seq)
			inserted = append(inserted, id)
			changes = append(changes, store.Change{Op: store.OpInsert, Task: store.StoredTask{
				ID: id, Kind: "bench.noop", Payload: payload, Priority: store.Normal, RunAt: now,
				MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
			}})
		}
		res, err := s.CommitAs(ctx, o, changes)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r != nil {
				b.Fatalf("cycle %d: results[%d] = %v", c, i, r)
			}
		}
	}
	cycle(0)
	cycle(1)
	cpu := startCPU(b, s.DB())
	c := 2
	for b.Loop() {
		cycle(c)
		c++
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tasks/s")
	cpu.report(b, b.N*n, "task")
}
