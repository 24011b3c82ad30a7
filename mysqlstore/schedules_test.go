package mysqlstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

func occurrenceInsert(name string, target time.Time) store.Change {
	c := insertChange(store.OccurrenceID(name, target), nil)
	c.Task.RunAt = target
	return c
}

// TestScheduleFireRaceTwoPools has two stores, each on a connection pool of its own,
// fire the 200 occurrences of one schedule from 4 goroutines each, every caller
// following the stored next time when it loses: each occurrence fires once and its task
// is stored once.
func TestScheduleFireRaceTwoPools(t *testing.T) {
	const n, perStore = 200, 4
	ctx := context.Background()
	a, _ := setup(t, mysqlstore.Options{})
	b, err := mysqlstore.New(openDB(t), mysqlstore.Options{Table: a.Table(), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	step := 10 * time.Millisecond
	if _, _, err := a.UpsertSchedule(ctx, store.StoredSchedule{Name: "race", Spec: "@every 10ms", Next: testNow}); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		fires = make(map[time.Time]int)
		wg    sync.WaitGroup
		errs  = make(chan error, 2*perStore)
	)
	for _, s := range []*mysqlstore.Store{a, b} {
		for range perStore {
			wg.Go(func() {
				next := testNow
				for next.Before(testNow.Add(n * step)) {
					got, fired, err := s.FireSchedule(ctx, store.ScheduleFire{
						Name: "race", Expect: next, Next: next.Add(step),
						Occurrences: []store.Change{occurrenceInsert("race", next)},
					})
					if err != nil {
						errs <- err
						return
					}
					if fired {
						mu.Lock()
						fires[next]++
						mu.Unlock()
					}
					next = got.Next
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("FireSchedule() error = %v", err)
	}
	for i := range n {
		if at := testNow.Add(time.Duration(i) * step); fires[at] != 1 {
			t.Errorf("occurrence %d fired %d times, want 1", i, fires[at])
		}
	}
	var rows, distinct int
	err = a.DB().QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT id) FROM `"+a.Table()+"` WHERE id LIKE 'sched/race/%'").Scan(&rows, &distinct)
	if err != nil || rows != n || distinct != n {
		t.Fatalf("occurrence rows = %d (%d distinct), %v; want %d", rows, distinct, err, n)
	}
	got, err := b.GetSchedule(ctx, "race")
	if err != nil || !got.Next.Equal(testNow.Add(n*step)) || got.Version != n {
		t.Fatalf("GetSchedule() = %+v, %v; want next %v, version %d", got, err, testNow.Add(n*step), n)
	}
}

// TestScheduleSurvivesRestart: a store opened again on the table reads back the next
// time the first one stored, and a new upsert keeps it.
func TestScheduleSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	a, _ := setup(t, mysqlstore.Options{})
	if _, _, err := a.UpsertSchedule(ctx, store.StoredSchedule{Name: "nightly", Spec: "0 3 * * *", Next: testNow}); err != nil {
		t.Fatal(err)
	}
	next := testNow.Add(24 * time.Hour)
	if _, fired, err := a.FireSchedule(ctx, store.ScheduleFire{
		Name: "nightly", Expect: testNow, Next: next,
		Occurrences: []store.Change{occurrenceInsert("nightly", testNow)},
	}); !fired || err != nil {
		t.Fatalf("FireSchedule() = %v, %v; want fired", fired, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := mysqlstore.New(openDB(t), mysqlstore.Options{Table: a.Table(), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again error = %v", err)
	}
	got, created, err := b.UpsertSchedule(ctx, store.StoredSchedule{Name: "nightly", Spec: "0 3 * * *", Next: testNow.Add(48 * time.Hour)})
	if err != nil || created || !got.Next.Equal(next) || got.Spec != "0 3 * * *" || got.Version != 1 {
		t.Fatalf("UpsertSchedule() after restart = %+v, %v, %v; want the stored next %v", got, created, err, next)
	}
	if got.UpdatedAt.IsZero() {
		t.Errorf("UpdatedAt is zero")
	}
	if tk, err := b.Get(ctx, store.OccurrenceID("nightly", testNow)); err != nil || !tk.RunAt.Equal(testNow) {
		t.Fatalf("Get(occurrence) = %+v, %v", tk, err)
	}
}
