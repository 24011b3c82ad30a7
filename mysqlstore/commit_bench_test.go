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
		// start: the attempt of each task begins (queued → running, fence bumped).
		b.Run(fmt.Sprintf("start/batch=%d", size), func(b *testing.B) {
			benchUpdates(b, size, newTask, func(id string) []kernel.Change {
				return []kernel.Change{{Op: kernel.OpStart, Fence: 1, Task: kernel.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}}}
			})
		})
		// complete: start and success of each task, one row write per task.
		b.Run(fmt.Sprintf("complete/batch=%d", size), func(b *testing.B) {
			benchUpdates(b, size, newTask, func(id string) []kernel.Change {
				return []kernel.Change{
					{Op: kernel.OpStart, Fence: 1, Task: kernel.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}},
					{Op: kernel.OpSucceed, Fence: 2, Task: kernel.StoredTask{ID: id, UpdatedAt: now.Add(time.Millisecond)}},
				}
			})
		})
	}
}

// benchUpdates times commits of the changes ops makes for size tasks queued beforehand
// (untimed): the state of every row changes, as it does for the kernel.
func benchUpdates(b *testing.B, size int, newTask func(string) kernel.StoredTask, ops func(id string) []kernel.Change) {
	s, _ := setup(b, mysqlstore.Options{})
	ins := make([]kernel.Change, size)
	var changes []kernel.Change
	seq, rows := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		changes = changes[:0]
		for i := range ins {
			seq++
			id := fmt.Sprintf("task-%09d", seq)
			ins[i] = kernel.Change{Op: kernel.OpInsert, Task: newTask(id)}
			changes = append(changes, ops(id)...)
		}
		mustBatch(b, s, ins)
		b.StartTimer()
		mustBatch(b, s, changes)
		rows += size
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
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
