package mysqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestClaimTwoStores claims 2,000 pool tasks with two stores on one table, each with its
// own connection pool and two claiming owners: no task is claimed twice, all of them
// are claimed, and the tasks of a kind nobody claims stay in the pool.
func TestClaimTwoStores(t *testing.T) {
	const (
		tasks   = 2000
		others  = 200 // of a kind nobody claims
		perSide = 2   // claiming owners per store
	)
	ctx := context.Background()
	table := tableName(t)
	s1, _ := setup(t, mysqlstore.Options{Table: table})
	s2, err := mysqlstore.New(openDB(t), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	var cs []store.Change
	for i := range tasks + others {
		c := insertChange(fmt.Sprintf("c%05d", i), []byte("payload"))
		c.Task.Priority = store.Priority(i%3 + 1)
		c.Task.RunAt = testNow.Add(time.Duration(i%100) * time.Millisecond)
		if i >= tasks {
			c.Task.Kind = "nobody.kind"
		}
		cs = append(cs, c)
	}
	if res, err := s1.Commit(ctx, cs); err != nil || res[0] != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	now := testNow.Add(time.Second)
	req := store.ClaimRequest{Now: now, Want: store.ByPriority[int]{High: 8, Normal: 8, Low: 8}, Kinds: []string{"test.kind"}}
	var (
		mu     sync.Mutex
		all    = make(map[string]int)
		calls  int
		empty  int
		wg     sync.WaitGroup
		owners []store.Owner
	)
	start := time.Now()
	for i, s := range []*mysqlstore.Store{s1, s2, s1, s2}[:2*perSide] {
		o, err := s.Join(ctx, fmt.Sprintf("claimer-%d", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
		wg.Go(func() {
			for {
				got, next, err := s.Claim(ctx, o, req)
				if err != nil {
					t.Errorf("Claim() error = %v", err)
					return
				}
				mu.Lock()
				calls++
				if len(got) == 0 {
					empty++
				}
				for _, tk := range got {
					all[tk.ID]++
					if tk.Kind != "test.kind" || tk.State != store.Running || tk.Attempt != 1 {
						t.Errorf("claimed %s: kind %q, %v, attempt %d", tk.ID, tk.Kind, tk.State, tk.Attempt)
					}
				}
				mu.Unlock()
				// Done when nothing was claimed and no pool task is due (or locked by a
				// claim that has not committed yet, which next still counts).
				if len(got) == 0 && (next.IsZero() || next.After(now)) {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(all) != tasks {
		t.Fatalf("%d tasks claimed, want %d", len(all), tasks)
	}
	for id, n := range all {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
	infos, err := s1.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, info := range infos {
		held += info.Tasks
	}
	if held != tasks {
		t.Fatalf("the owners hold %d tasks, want %d", held, tasks)
	}
	if got, next, err := s2.Claim(ctx, owners[1], store.ClaimRequest{Now: now, Want: req.Want, Kinds: []string{"nobody.kind"}}); err != nil ||
		len(got) != 3*8 || next.IsZero() || next.After(now) {
		t.Fatalf("Claim(nobody.kind) = %d tasks, next %v, %v; want 24 left in the pool, and more due", len(got), next, err)
	}
	t.Logf("%d tasks claimed by %d owners on 2 stores in %v: %.0f claims/s, %d Claim calls (%d empty)",
		tasks, len(owners), elapsed.Round(time.Millisecond), float64(tasks)/elapsed.Seconds(), calls, empty)
}
