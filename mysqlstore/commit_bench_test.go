package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// BenchmarkCommit measures group commits on the real database: rows/s is the rate of
// task rows written (inserted or updated), at batches of 1, 100 and 1,000 tasks.
//
//	cd mysqlstore && go test -run '^$' -bench Commit -benchtime 3s
func BenchmarkCommit(b *testing.B) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	payload := make([]byte, 200)
	newTask := func(id string) kernel.StoredTask {
		return kernel.StoredTask{
			ID: id, Kind: "bench.kind", Payload: payload, Priority: kernel.Normal, RunAt: now,
			Timeout: time.Second, MaxAttempts: 3, Fence: 1, State: kernel.Queued, CreatedAt: now, UpdatedAt: now,
		}
	}
	for _, size := range []int{1, 100, 1000} {
		// insert: acknowledged submits, one row per task.
		b.Run(fmt.Sprintf("insert/batch=%d", size), func(b *testing.B) {
			s, _ := setup(b, mysqlstore.Options{})
			changes := make([]kernel.Change, size)
			seq := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range changes {
					seq++
					changes[i] = kernel.Change{Op: kernel.OpInsert, Task: newTask(fmt.Sprintf("task-%09d", seq))}
				}
				mustBatch(b, s, changes)
			}
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "rows/s")
		})
		// start: one state update per task (attempt begins, fence bumped).
		b.Run(fmt.Sprintf("start/batch=%d", size), func(b *testing.B) {
			s, _ := setup(b, mysqlstore.Options{})
			changes := make([]kernel.Change, size)
			for i := range changes {
				changes[i] = kernel.Change{Op: kernel.OpInsert, Task: newTask(fmt.Sprintf("task-%09d", i))}
			}
			mustBatch(b, s, changes)
			fence, rows := uint64(1), 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range changes {
					changes[i] = kernel.Change{Op: kernel.OpStart, Fence: fence, Task: kernel.StoredTask{
						ID: fmt.Sprintf("task-%09d", i), Fence: fence + 1, Attempt: int(fence), UpdatedAt: now,
					}}
				}
				mustBatch(b, s, changes)
				fence++
				rows += size
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
		// complete: start and succeed of tasks inserted earlier, one row write per task.
		b.Run(fmt.Sprintf("complete/batch=%d", size), func(b *testing.B) {
			s, _ := setup(b, mysqlstore.Options{})
			changes := make([]kernel.Change, 0, 2*size)
			ins := make([]kernel.Change, size)
			seq, rows := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				first := seq
				for i := range ins {
					seq++
					ins[i] = kernel.Change{Op: kernel.OpInsert, Task: newTask(fmt.Sprintf("task-%09d", seq))}
				}
				mustBatch(b, s, ins)
				b.StartTimer()
				changes = changes[:0]
				for n := first + 1; n <= seq; n++ {
					id := fmt.Sprintf("task-%09d", n)
					changes = append(changes,
						kernel.Change{Op: kernel.OpStart, Fence: 1, Task: kernel.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}},
						kernel.Change{Op: kernel.OpSucceed, Fence: 2, Task: kernel.StoredTask{ID: id, UpdatedAt: now}})
				}
				mustBatch(b, s, changes)
				rows += size
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func mustBatch(b *testing.B, s kernel.Store, changes []kernel.Change) {
	b.Helper()
	res, err := s.Commit(context.Background(), changes)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if r != nil {
			b.Fatalf("results[%d] = %v", i, r)
		}
	}
}
