package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// BenchmarkCommitAs measures group commits by an owner ([mysqlstore.Store.CommitAs]),
// the shared-store counterpart of BenchmarkCommit: the same inserts and completions, each
// transaction renewing the owner's lease first. heartbeat is a CommitAs of no changes.
//
//	cd mysqlstore && go test -run '^$' -bench CommitAs -benchtime 3s
func BenchmarkCommitAs(b *testing.B) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	payload := make([]byte, 200)
	newTask := func(id string) store.StoredTask {
		return store.StoredTask{
			ID: id, Kind: "bench.kind", Payload: payload, Priority: store.Normal, RunAt: now,
			Timeout: time.Second, MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
		}
	}
	ctx := context.Background()
	setupOwner := func(b *testing.B) (*mysqlstore.Store, store.Owner) {
		s, _ := setup(b, mysqlstore.Options{})
		o, err := s.Join(ctx, "bench", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		return s, o
	}
	mustAs := func(b *testing.B, s *mysqlstore.Store, o store.Owner, changes []store.Change) {
		b.Helper()
		res, err := s.CommitAs(ctx, o, changes)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r != nil {
				b.Fatalf("results[%d] = %v", i, r)
			}
		}
	}
	b.Run("heartbeat", func(b *testing.B) {
		s, o := setupOwner(b)
		b.ReportAllocs()
		for b.Loop() {
			mustAs(b, s, o, nil)
		}
	})
	for _, size := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("insert/batch=%d", size), func(b *testing.B) {
			s, o := setupOwner(b)
			changes := make([]store.Change, size)
			seq := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range changes {
					seq++
					changes[i] = store.Change{Op: store.OpInsert, Task: newTask(fmt.Sprintf("task-%09d", seq))}
				}
				mustAs(b, s, o, changes)
			}
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("complete/batch=%d", size), func(b *testing.B) {
			s, o := setupOwner(b)
			ins := make([]store.Change, size)
			var changes []store.Change
			seq, rows := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				changes = changes[:0]
				for i := range ins {
					seq++
					id := fmt.Sprintf("task-%09d", seq)
					ins[i] = store.Change{Op: store.OpInsert, Task: newTask(id)}
					changes = append(changes,
						store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}},
						store.Change{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: now.Add(time.Millisecond)}})
				}
				mustAs(b, s, o, ins)
				b.StartTimer()
				mustAs(b, s, o, changes)
				rows += size
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
