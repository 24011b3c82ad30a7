package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// exerciseSchedules runs the cases of [store.ScheduleStore]. Exercise calls it when
// the store implements ScheduleStore.
func exerciseSchedules(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.ScheduleStore)
	}{
		{"UpsertKeepsStored", testUpsertKeepsStored},
		{"FireFollows", testFireFollows},
		{"StaleExpectRefused", testStaleExpectRefused},
		{"ConcurrentFireOnce", testConcurrentFireOnce},
		{"OccurrenceStoredOnce", testOccurrenceStoredOnce},
		{"PauseAndDelete", testPauseAndDelete},
		{"UnknownSchedule", testUnknownSchedule},
		{"FireValidation", testFireValidation},
		{"FireEnds", testFireEnds},
		{"FireByOwner", testFireByOwner},
		{"Closed", testSchedulesClosed},
	}
	for _, tt := range tests {
		t.Run("Schedules/"+tt.name, func(t *testing.T) {
			tt.run(t, newStore(t).(store.ScheduleStore))
		})
	}
}

// occurrence returns the insert of the occurrence of schedule name due at target.
func occurrence(name string, target time.Time) store.Change {
	tk := task(store.OccurrenceID(name, target))
	tk.RunAt = target
	return store.Change{Op: store.OpInsert, Task: tk}
}

func upsert(t *testing.T, s store.ScheduleStore, name string, next time.Time) (store.StoredSchedule, bool) {
	t.Helper()
	got, created, err := s.UpsertSchedule(context.Background(), store.StoredSchedule{Name: name, Spec: "@every 1s", Next: next})
	if err != nil {
		t.Fatalf("UpsertSchedule(%q, %v) error = %v", name, next, err)
	}
	return got, created
}

func fire(t *testing.T, s store.ScheduleStore, f store.ScheduleFire) (store.StoredSchedule, bool) {
	t.Helper()
	got, fired, err := s.FireSchedule(context.Background(), f)
	if err != nil {
		t.Fatalf("FireSchedule(%q, %v → %v) error = %v", f.Name, f.Expect, f.Next, err)
	}
	return got, fired
}

// fireNext fires the occurrence at expect and moves the schedule to next.
func fireNext(name string, expect, next time.Time) store.ScheduleFire {
	return store.ScheduleFire{Name: name, Expect: expect, Next: next, Occurrences: []store.Change{occurrence(name, expect)}}
}

// occurrences returns the live tasks of schedule name.
func occurrences(t *testing.T, s store.Store, name string) []store.StoredTask {
	t.Helper()
	var out []store.StoredTask
	for _, tk := range recoverAll(t, s) {
		if strings.HasPrefix(tk.ID, "sched/"+name+"/") {
			out = append(out, tk)
		}
	}
	return out
}

func testUpsertKeepsStored(t *testing.T, s store.ScheduleStore) {
	got, created := upsert(t, s, "report", at(1000))
	if !created || got.Name != "report" || got.Spec != "@every 1s" || !got.Next.Equal(at(1000)) || got.Paused {
		t.Fatalf("UpsertSchedule() = %+v, %v; want created with next %v", got, created, at(1000))
	}
	// A restarted process computes another next time: the stored one stays.
	got, created = upsert(t, s, "report", at(5000))
	if created || !got.Next.Equal(at(1000)) {
		t.Fatalf("UpsertSchedule() again = %+v, %v; want not created, next %v", got, created, at(1000))
	}
	fire(t, s, fireNext("report", at(1000), at(2000)))
	got, created = upsert(t, s, "report", at(5000))
	if created || !got.Next.Equal(at(2000)) || got.Version != 1 {
		t.Fatalf("UpsertSchedule() after a fire = %+v, %v; want next %v, version 1", got, created, at(2000))
	}
	if g, err := s.GetSchedule(context.Background(), "report"); err != nil || !g.Next.Equal(at(2000)) {
		t.Fatalf("GetSchedule() = %+v, %v; want next %v", g, err, at(2000))
	}
	// Sub-millisecond parts are dropped, as for tasks.
	got, _ = upsert(t, s, "precise", at(7).Add(400*time.Microsecond))
	if !got.Next.Equal(at(7)) {
		t.Fatalf("UpsertSchedule(precise).Next = %v, want %v", got.Next, at(7))
	}
}

func testFireFollows(t *testing.T, s store.ScheduleStore) {
	if got, _ := upsert(t, s, "tick", at(0)); !got.Last.IsZero() {
		t.Fatalf("UpsertSchedule(tick).Last = %v, want the zero time", got.Last)
	}
	for i := range 20 {
		got, fired := fire(t, s, fireNext("tick", at(i*100), at((i+1)*100)))
		if !fired || !got.Next.Equal(at((i+1)*100)) || got.Version != uint64(i+1) || !got.Last.Equal(at(i*100)) {
			t.Fatalf("FireSchedule #%d = %+v, %v; want fired, next %v, last %v, version %d", i, got, fired, at((i+1)*100), at(i*100), i+1)
		}
	}
	occ := occurrences(t, s, "tick")
	if len(occ) != 20 {
		t.Fatalf("%d occurrences stored, want 20", len(occ))
	}
	tk := get(t, s, store.OccurrenceID("tick", at(300)))
	if !tk.RunAt.Equal(at(300)) || tk.State != store.Queued || tk.Kind != "storetest.kind" {
		t.Fatalf("occurrence at %v = %+v", at(300), tk)
	}
	// Several occurrences at once (a catch-up), and one that moves the next time only.
	got, fired := fire(t, s, store.ScheduleFire{
		Name: "tick", Expect: at(2000), Next: at(2300), Spec: "@every 100ms",
		Occurrences: []store.Change{occurrence("tick", at(2000)), occurrence("tick", at(2100)), occurrence("tick", at(2200))},
	})
	if !fired || !got.Next.Equal(at(2300)) || got.Spec != "@every 100ms" || !got.Last.Equal(at(2200)) {
		t.Fatalf("FireSchedule(catch-up) = %+v, %v; want fired, next %v, last %v, the new spec", got, fired, at(2300), at(2200))
	}
	// A fire with no occurrences keeps Last.
	if got, fired = fire(t, s, store.ScheduleFire{Name: "tick", Expect: at(2300), Next: at(9000)}); !fired || !got.Next.Equal(at(9000)) || !got.Last.Equal(at(2200)) {
		t.Fatalf("FireSchedule(no occurrences) = %+v, %v; want fired, next %v, last %v", got, fired, at(9000), at(2200))
	}
	if n := len(occurrences(t, s, "tick")); n != 23 {
		t.Fatalf("%d occurrences stored, want 23", n)
	}
}

func testStaleExpectRefused(t *testing.T, s store.ScheduleStore) {
	upsert(t, s, "s", at(0))
	fire(t, s, fireNext("s", at(0), at(100)))
	// A process that read the schedule before that fire tries the same occurrence, and
	// one from further back tries another.
	for _, expect := range []time.Time{at(0), at(-100), at(200)} {
		f := fireNext("s", expect, expect.Add(time.Second))
		f.Occurrences = []store.Change{occurrence("s", expect.Add(time.Millisecond))}
		got, fired := fire(t, s, f)
		if fired || !got.Next.Equal(at(100)) || got.Version != 1 {
			t.Fatalf("FireSchedule(expect %v) = %+v, %v; want not fired, the stored next %v", expect, got, fired, at(100))
		}
		wantUnknown(t, s, store.OccurrenceID("s", expect.Add(time.Millisecond)))
	}
	// The stored time, even given with sub-millisecond parts, matches.
	if _, fired := fire(t, s, fireNext("s", at(100).Add(300*time.Microsecond), at(200))); !fired {
		t.Fatal("FireSchedule(the stored next + 300µs) did not fire, want fired")
	}
}

// testConcurrentFireOnce has 8 callers fire each of 30 occurrences at once, each
// following the stored next time when it loses: every occurrence fires once.
func testConcurrentFireOnce(t *testing.T, s store.ScheduleStore) {
	const callers, n = 8, 30
	upsert(t, s, "race", at(0))
	var (
		mu    sync.Mutex
		fires = make(map[int]int) // occurrence → fires
		wg    sync.WaitGroup
		errs  = make(chan error, callers)
	)
	for range callers {
		wg.Go(func() {
			next := at(0)
			for next.Before(at(n * 10)) {
				i := int(next.Sub(t0) / (10 * time.Millisecond))
				got, fired, err := s.FireSchedule(context.Background(), fireNext("race", next, next.Add(10*time.Millisecond)))
				if err != nil {
					errs <- err
					return
				}
				if fired {
					mu.Lock()
					fires[i]++
					mu.Unlock()
				}
				next = got.Next
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("FireSchedule() error = %v", err)
	}
	for i := range n {
		if fires[i] != 1 {
			t.Errorf("occurrence %d fired %d times, want 1", i, fires[i])
		}
	}
	if got := len(occurrences(t, s, "race")); got != n {
		t.Errorf("%d occurrence tasks stored, want %d", got, n)
	}
	if g, err := s.GetSchedule(context.Background(), "race"); err != nil || !g.Next.Equal(at(n*10)) || g.Version != n {
		t.Errorf("GetSchedule() = %+v, %v; want next %v, version %d", g, err, at(n*10), n)
	}
}

// testOccurrenceStoredOnce sets a schedule back and fires an occurrence again: its task
// is not stored twice, and keeps its first version.
func testOccurrenceStoredOnce(t *testing.T, s store.ScheduleStore) {
	upsert(t, s, "again", at(0))
	fire(t, s, fireNext("again", at(0), at(100)))
	fire(t, s, store.ScheduleFire{Name: "again", Expect: at(100), Next: at(0)}) // set back
	f := fireNext("again", at(0), at(100))
	f.Occurrences[0].Task.Payload = []byte("second")
	if _, fired := fire(t, s, f); !fired {
		t.Fatal("FireSchedule() after the set back did not fire")
	}
	occ := occurrences(t, s, "again")
	if len(occ) != 1 || string(occ[0].Payload) != "payload of "+store.OccurrenceID("again", at(0)) {
		t.Fatalf("occurrences = %+v, want the first one only", occ)
	}
}

func testPauseAndDelete(t *testing.T, s store.ScheduleStore) {
	ctx := context.Background()
	upsert(t, s, "p", at(0))
	got, err := s.PauseSchedule(ctx, "p", true)
	if err != nil || !got.Paused || !got.Next.Equal(at(0)) {
		t.Fatalf("PauseSchedule(true) = %+v, %v; want paused, next kept", got, err)
	}
	if got, fired := fire(t, s, fireNext("p", at(0), at(100))); fired || !got.Paused {
		t.Fatalf("FireSchedule(paused) = %+v, %v; want not fired", got, fired)
	}
	wantUnknown(t, s, store.OccurrenceID("p", at(0)))
	if got, _ := upsert(t, s, "p", at(50)); !got.Paused || !got.Next.Equal(at(0)) {
		t.Fatalf("UpsertSchedule(paused) = %+v, want it paused with its next time", got)
	}
	if got, err = s.PauseSchedule(ctx, "p", false); err != nil || got.Paused {
		t.Fatalf("PauseSchedule(false) = %+v, %v; want resumed", got, err)
	}
	if _, fired := fire(t, s, fireNext("p", at(0), at(100))); !fired {
		t.Fatal("FireSchedule(resumed) did not fire")
	}
	if ok, err := s.DeleteSchedule(ctx, "p"); !ok || err != nil {
		t.Fatalf("DeleteSchedule() = %v, %v; want true", ok, err)
	}
	if ok, err := s.DeleteSchedule(ctx, "p"); ok || err != nil {
		t.Fatalf("DeleteSchedule() again = %v, %v; want false", ok, err)
	}
	get(t, s, store.OccurrenceID("p", at(0))) // the occurrence's task stays
	if _, created := upsert(t, s, "p", at(500)); !created {
		t.Fatal("UpsertSchedule() after delete did not create")
	}
}

func testUnknownSchedule(t *testing.T, s store.ScheduleStore) {
	ctx := context.Background()
	if _, fired, err := s.FireSchedule(ctx, fireNext("nope", at(0), at(1))); fired || !errors.Is(err, store.ErrUnknownSchedule) {
		t.Errorf("FireSchedule(unknown) = %v, %v; want ErrUnknownSchedule", fired, err)
	}
	wantUnknown(t, s, store.OccurrenceID("nope", at(0)))
	if _, err := s.GetSchedule(ctx, "nope"); !errors.Is(err, store.ErrUnknownSchedule) {
		t.Errorf("GetSchedule(unknown) error = %v, want ErrUnknownSchedule", err)
	}
	if _, err := s.PauseSchedule(ctx, "nope", true); !errors.Is(err, store.ErrUnknownSchedule) {
		t.Errorf("PauseSchedule(unknown) error = %v, want ErrUnknownSchedule", err)
	}
}

func testFireValidation(t *testing.T, s store.ScheduleStore) {
	ctx := context.Background()
	upsert(t, s, "v", at(0))
	withOcc := func(c store.Change) store.ScheduleFire {
		return store.ScheduleFire{Name: "v", Expect: at(0), Next: at(100), Occurrences: []store.Change{c}}
	}
	keyedOcc := occurrence("v", at(0))
	keyedOcc.Task.UniqueKey = "k"
	otherID := occurrence("v", at(0))
	otherID.Task.ID = "v-0"
	otherSchedule := occurrence("w", at(0))
	start := occurrence("v", at(0))
	start.Op = store.OpStart
	noKind := occurrence("v", at(0))
	noKind.Task.Kind = ""
	for _, tt := range []struct {
		name, field string
		f           store.ScheduleFire
	}{
		{"empty name", "schedule name", store.ScheduleFire{Expect: at(0), Next: at(1)}},
		{"long name", "ScheduleNameMax", store.ScheduleFire{Name: strings.Repeat("a", store.ScheduleNameMax+1)}},
		{"slash in name", "schedule name", store.ScheduleFire{Name: "a/b"}},
		{"space in name", "schedule name", store.ScheduleFire{Name: "a b"}},
		{"non-ASCII name", "schedule name", store.ScheduleFire{Name: "café"}},
		{"long spec", "Spec", store.ScheduleFire{Name: "v", Spec: strings.Repeat("*", store.ScheduleSpecMax+1)}},
		{"unique key", "UniqueKey", withOcc(keyedOcc)},
		{"other ID", "Task.ID", withOcc(otherID)},
		{"other schedule's ID", "Task.ID", withOcc(otherSchedule)},
		{"not an insert", "Op", withOcc(start)},
		{"invalid task", "Task.Kind", withOcc(noKind)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, fired, err := s.FireSchedule(ctx, tt.f)
			if fired || !errors.Is(err, store.ErrInvalidChange) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("FireSchedule() = %v, %v; want ErrInvalidChange naming %s", fired, err, tt.field)
			}
		})
	}
	for _, name := range []string{"", "a/b", strings.Repeat("a", store.ScheduleNameMax+1)} {
		if _, _, err := s.UpsertSchedule(ctx, store.StoredSchedule{Name: name, Next: at(0)}); !errors.Is(err, store.ErrInvalidChange) {
			t.Errorf("UpsertSchedule(%q) error = %v, want ErrInvalidChange", name, err)
		}
	}
	if _, _, err := s.UpsertSchedule(ctx, store.StoredSchedule{Name: "long-spec", Spec: strings.Repeat("*", store.ScheduleSpecMax+1)}); !errors.Is(err, store.ErrInvalidChange) {
		t.Errorf("UpsertSchedule(long spec) error = %v, want ErrInvalidChange", err)
	}
	if g, err := s.GetSchedule(ctx, "v"); err != nil || g.Version != 0 || !g.Next.Equal(at(0)) {
		t.Fatalf("GetSchedule() = %+v, %v; want it untouched", g, err)
	}
	wantUnknown(t, s, store.OccurrenceID("v", at(0)))
	// The longest name makes IDs that fit.
	long := strings.Repeat("n", store.ScheduleNameMax)
	upsert(t, s, long, at(-1_000_000_000_000))
	if _, fired := fire(t, s, fireNext(long, at(-1_000_000_000_000), at(0))); !fired {
		t.Fatal("FireSchedule(longest name) did not fire")
	}
}

func testFireEnds(t *testing.T, s store.ScheduleStore) {
	upsert(t, s, "last", at(0))
	got, fired := fire(t, s, fireNext("last", at(0), time.Time{}))
	if !fired || !got.Next.IsZero() {
		t.Fatalf("FireSchedule(to zero) = %+v, %v; want fired, no next", got, fired)
	}
	if got, _ := upsert(t, s, "last", at(100)); !got.Next.IsZero() {
		t.Fatalf("UpsertSchedule() of an ended schedule = %+v, want its zero next kept", got)
	}
	if got, fired = fire(t, s, fireNext("last", at(0), at(100))); fired || !got.Next.IsZero() {
		t.Fatalf("FireSchedule(ended) = %+v, %v; want not fired", got, fired)
	}
	if got, fired = fire(t, s, store.ScheduleFire{Name: "last", Next: at(100)}); !fired || !got.Next.Equal(at(100)) {
		t.Fatalf("FireSchedule(from zero) = %+v, %v; want fired, next %v", got, fired, at(100))
	}
}

// testFireByOwner fires as an owner of a SharedStore: the occurrence is the owner's,
// and an owner whose lease ended fires nothing.
func testFireByOwner(t *testing.T, s store.ScheduleStore) {
	sh, ok := s.(store.SharedStore)
	if !ok {
		t.Skip("not a SharedStore")
	}
	ctx := context.Background()
	o := join(t, sh, "firer", longLease)
	upsert(t, s, "owned", at(0))
	f := fireNext("owned", at(0), at(100))
	f.Owner = &o
	if _, fired := fire(t, s, f); !fired {
		t.Fatal("FireSchedule(by owner) did not fire")
	}
	owners, err := sh.Owners(ctx)
	if err != nil || len(owners) != 1 || owners[0].Tasks != 1 {
		t.Fatalf("Owners() = %+v, %v; want the firer holding 1 task", owners, err)
	}
	if err := sh.Leave(ctx, o); err != nil {
		t.Fatal(err)
	}
	f = fireNext("owned", at(100), at(200))
	f.Owner = &o
	if _, fired, err := s.FireSchedule(ctx, f); fired || !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("FireSchedule(by an owner that left) = %v, %v; want ErrLeaseLost", fired, err)
	}
	if g, err := s.GetSchedule(ctx, "owned"); err != nil || !g.Next.Equal(at(100)) {
		t.Fatalf("GetSchedule() = %+v, %v; want next %v kept", g, err, at(100))
	}
	wantUnknown(t, s, store.OccurrenceID("owned", at(100)))
}

func testSchedulesClosed(t *testing.T, s store.ScheduleStore) {
	ctx := context.Background()
	upsert(t, s, "c", at(0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpsertSchedule(ctx, store.StoredSchedule{Name: "c"}); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("UpsertSchedule() after Close error = %v, want ErrStoreClosed", err)
	}
	if _, _, err := s.FireSchedule(ctx, fireNext("c", at(0), at(1))); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("FireSchedule() after Close error = %v, want ErrStoreClosed", err)
	}
	if _, err := s.GetSchedule(ctx, "c"); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("GetSchedule() after Close error = %v, want ErrStoreClosed", err)
	}
	if _, err := s.PauseSchedule(ctx, "c", true); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("PauseSchedule() after Close error = %v, want ErrStoreClosed", err)
	}
	if _, err := s.DeleteSchedule(ctx, "c"); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("DeleteSchedule() after Close error = %v, want ErrStoreClosed", err)
	}
}
