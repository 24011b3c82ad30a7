package mysqlstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// BenchmarkInsertAs measures an owner's inserts of new tasks on a store made by Open:
// through CommitAs (the renewal, the INSERT and COMMIT in one query, which locks the
// owner row) and through InsertAs (one query, COMMIT included, no renewal). In beside/…, a goroutine
// runs group commits of the same owner meanwhile (CommitAs of 100 inserts each, one
// after the other, as a journal's commits hold the owner row back to back), and the
// benchmark reports its commits/s beside the inserts' rows/s.
//
//	cd mysqlstore && go test -run '^$' -bench InsertAs -benchtime 3s
func BenchmarkInsertAs(b *testing.B) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	payload := make([]byte, 200)
	ctx := context.Background()
	for _, mode := range []string{"alone", "beside"} {
		for _, via := range []string{"CommitAs", "InsertAs"} {
			for _, size := range []int{1, 100, 1000} {
				if mode == "beside" && size != 1000 {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/batch=%d", mode, via, size), func(b *testing.B) {
					s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: tableName(b), Retention: -1})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() {
						if err := s.Drop(ctx); err != nil {
							b.Error(err)
						}
						_ = s.Close()
					})
					if err := s.Migrate(ctx); err != nil {
						b.Fatal(err)
					}
					o, err := s.Join(ctx, "bench", time.Hour)
					if err != nil {
						b.Fatal(err)
					}
					commit := s.CommitAs
					if via == "InsertAs" {
						commit = s.InsertAs
					}
					var group atomic.Int64
					if mode == "beside" {
						stop, done := make(chan struct{}), make(chan struct{})
						go func() {
							defer close(done)
							cs := make([]store.Change, 100)
							for n := 0; ; n++ {
								select {
								case <-stop:
									return
								default:
								}
								for i := range cs {
									cs[i] = store.Change{Op: store.OpInsert, Task: store.StoredTask{
										ID: fmt.Sprintf("group-%07d-%03d", n, i), Kind: "bench.kind", Payload: payload, Priority: store.Normal,
										RunAt: now, Timeout: time.Second, MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
									}}
								}
								if _, err := s.CommitAs(ctx, o, cs); err != nil {
									b.Error(err)
									return
								}
								group.Add(1)
							}
						}()
						defer func() { close(stop); <-done }()
					}
					changes := make([]store.Change, size)
					seq := 0
					b.ReportAllocs()
					for b.Loop() {
						for i := range changes {
							seq++
							changes[i] = store.Change{Op: store.OpInsert, Task: store.StoredTask{
								ID: fmt.Sprintf("task-%09d", seq), Kind: "bench.kind", Payload: payload, Priority: store.Normal,
								RunAt: now, Timeout: time.Second, MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
							}}
						}
						res, err := commit(ctx, o, changes)
						if err != nil {
							b.Fatal(err)
						}
						for i, r := range res {
							if r != nil {
								b.Fatalf("results[%d] = %v", i, r)
							}
						}
					}
					b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "rows/s")
					if mode == "beside" {
						b.ReportMetric(float64(group.Load())/b.Elapsed().Seconds(), "group-commits/s")
					}
				})
			}
		}
	}
}
