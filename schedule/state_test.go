package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
)

// TestScheduleGeneratedNames: a schedule without a Name gets "schedule-N"; a name
// given is refused while a generated one holds it, and a generated name skips the
// names given.
func TestScheduleGeneratedNames(t *testing.T) {
	_, sch := setup(t, kernel.Config{}, Config{})
	run := func(context.Context, Fire) error { return nil }
	a := mustSchedule(t, sch, Every(time.Hour), run, nil)
	b := mustSchedule(t, sch, Every(time.Hour), run, &Options{Jitter: time.Second})
	if a.Name() != "schedule-1" || b.Name() != "schedule-2" {
		t.Fatalf("Name() = %q, %q, want schedule-1, schedule-2", a.Name(), b.Name())
	}
	if _, err := sch.Add(Every(time.Hour), run, &Options{Name: "schedule-2"}); !errors.Is(err, ErrExists) {
		t.Fatalf("Add(Name: schedule-2) while it is generated = %v, want ErrExists", err)
	}
	// Not the form the kernel generates: free.
	c := mustSchedule(t, sch, Every(time.Hour), run, &Options{Name: "schedule-02"})
	d := mustSchedule(t, sch, Every(time.Hour), run, &Options{Name: "schedule-3"})
	e := mustSchedule(t, sch, Every(time.Hour), run, nil)
	if e.Name() != "schedule-4" {
		t.Fatalf("Name() = %q, want schedule-4 (schedule-3 is taken)", e.Name())
	}
	b.Remove()
	f := mustSchedule(t, sch, Every(time.Hour), run, &Options{Name: "schedule-2"})
	got := sch.Stats()
	want := map[string]*Entry{"schedule-1": a, "schedule-02": c, "schedule-3": d, "schedule-4": e, "schedule-2": f}
	if len(got) != len(want) {
		t.Fatalf("Stats().Schedules has %d schedules, want %d", len(got), len(want))
	}
	for name, sc := range want {
		st, ok := got[name]
		if !ok || !st.Next.Equal(sc.Next()) {
			t.Fatalf("Stats().Schedules[%q] = %+v, %v, want Next %v", name, st, ok, sc.Next())
		}
	}
}

// TestScheduleRegistryCompacts: removing most generated-name schedules keeps the
// others' names, figures and uniqueness.
func TestScheduleRegistryCompacts(t *testing.T) {
	_, sch := setup(t, kernel.Config{}, Config{})
	run := func(context.Context, Fire) error { return nil }
	const n = 300
	scs := make([]*Entry, n)
	for i := range scs {
		scs[i] = mustSchedule(t, sch, Every(time.Duration(i+1)*time.Hour), run, nil)
	}
	for i, sc := range scs {
		if i%10 != 3 {
			sc.Remove()
			sc.Remove() // idempotent
		}
	}
	got := sch.Stats()
	if len(got) != n/10 {
		t.Fatalf("Stats().Schedules has %d schedules, want %d", len(got), n/10)
	}
	for i := 3; i < n; i += 10 {
		name := fmt.Sprintf("schedule-%d", i+1)
		if st, ok := got[name]; !ok || !st.Next.Equal(scs[i].Next()) {
			t.Fatalf("Stats().Schedules[%q] = %+v, %v, want Next %v", name, st, ok, scs[i].Next())
		}
		if _, err := sch.Add(Every(time.Hour), run, &Options{Name: name}); !errors.Is(err, ErrExists) {
			t.Fatalf("Add(Name: %s) = %v, want ErrExists", name, err)
		}
	}
	// A removed one's name is free.
	mustSchedule(t, sch, Every(time.Hour), run, &Options{Name: "schedule-1"})
}

// offsetZone is a Schedule whose targets are in a zone of its own, every second.
type offsetZone struct{ loc *time.Location }

func (z offsetZone) Next(after time.Time) time.Time {
	return after.Truncate(time.Second).Add(time.Second).In(z.loc)
}

// TestScheduleFireTimeKept: Fire.Scheduled is the time the schedule computed, with
// its location, and for Every the monotonic reading of the kernel's clock.
func TestScheduleFireTimeKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		cron, err := ParseCron("* * * * * *", ny)
		if err != nil {
			t.Fatal(err)
		}
		own := time.FixedZone("own", 5400)
		_, sch := setup(t, kernel.Config{}, Config{})
		var lc, lo, le fireLog
		mustSchedule(t, sch, cron, lc.run, nil)
		mustSchedule(t, sch, offsetZone{own}, lo.run, nil)
		mustSchedule(t, sch, Every(time.Second), le.run, nil)
		advance(3500 * time.Millisecond)
		for _, c := range []struct {
			name string
			l    *fireLog
			s    Spec
			loc  string
		}{{"cron", &lc, cron, "America/New_York"}, {"own zone", &lo, offsetZone{own}, "own"}} {
			fs := c.l.get()
			if len(fs) < 3 {
				t.Fatalf("%s: %d fires, want at least 3", c.name, len(fs))
			}
			for i, f := range fs {
				if got := f.Scheduled.Location().String(); got != c.loc {
					t.Fatalf("%s: fire %d: Scheduled in %q, want %q", c.name, i, got, c.loc)
				}
				if i > 0 {
					if want := c.s.Next(fs[i-1].Scheduled); !sameTime(f.Scheduled, want) {
						t.Fatalf("%s: fire %d: Scheduled = %v, want %v", c.name, i, f.Scheduled, want)
					}
				}
			}
		}
		fs := le.get()
		if len(fs) != 3 {
			t.Fatalf("Every: %d fires, want 3", len(fs))
		}
		mono := strings.Contains(time.Now().String(), " m=")
		for i, f := range fs {
			if got := strings.Contains(f.Scheduled.String(), " m="); got != mono {
				t.Fatalf("Every: fire %d: Scheduled = %v: monotonic reading %v, want %v", i, f.Scheduled, got, mono)
			}
			if i > 0 && !sameTime(f.Scheduled, fs[i-1].Scheduled.Add(time.Second)) {
				t.Fatalf("Every: fire %d: Scheduled = %v, want %v", i, f.Scheduled, fs[i-1].Scheduled.Add(time.Second))
			}
		}
	})
}

// TestScheduleResumeAfterStop: a schedule resumed while the kernel drains is refused
// (the scheduler stopped with the kernel), reports no next target and does not fire.
func TestScheduleResumeAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, sch := setup(t, kernel.Config{}, Config{})
		sc := mustSchedule(t, sch, Every(time.Second), func(context.Context, Fire) error { return nil }, nil)
		if err := sc.Pause(); err != nil {
			t.Fatalf("Pause() = %v", err)
		}
		if !sc.Next().IsZero() || !sc.Stats().Paused {
			t.Fatalf("after Pause: Next() = %v, Stats() = %+v", sc.Next(), sc.Stats())
		}
		g := make(gate) // keeps the loop draining
		mustSubmit(t, k, kernel.Task{Run: g.run})
		done := make(chan error, 1)
		go func() { done <- k.Shutdown(context.Background()) }()
		synctest.Wait()
		if err := sc.Resume(); !errors.Is(err, ErrStopped) {
			t.Fatalf("Resume() while draining = %v, want ErrStopped", err)
		}
		advance(5 * time.Second)
		if st := sc.Stats(); !sc.Next().IsZero() || !st.Next.IsZero() || st.Fires != 0 {
			t.Fatalf("after Shutdown and Resume: Next() = %v, Stats() = %+v, want no next, no fire", sc.Next(), st)
		}
		g.open()
		if err := <-done; err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
	})
}

func TestScheduleEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		notes := map[Note]int{}
		_, sch := setup(t, kernel.Config{}, Config{OnEvent: func(e Event) {
			if e.Schedule == "ev" {
				mu.Lock()
				notes[e.Note]++
				mu.Unlock()
			}
		}})
		l := fireLog{hold: 1500 * time.Millisecond}
		sc := mustSchedule(t, sch, Every(time.Second), l.run, &Options{Name: "ev", Grace: 100 * time.Millisecond})
		advance(2500 * time.Millisecond) // fires at 1s, skips at 2s
		_ = sc.Pause()
		advance(5 * time.Second)
		_ = sc.Resume() // misfires
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if notes[NoteFired] != 2 || notes[NoteSkipped] != 1 || notes[NoteMisfired] != 1 {
			t.Fatalf("notes %v, want 2 fired, 1 skipped, 1 misfired", notes)
		}
	})
}

// stuckSchedule's first target is first; after that its Next returns its argument
// moved by back (0: the same time), never a later one.
type stuckSchedule struct {
	first time.Time
	back  time.Duration
}

func (s stuckSchedule) Next(t time.Time) time.Time {
	if t.Before(s.first) {
		return s.first
	}
	return t.Add(-s.back)
}

// TestScheduleStuckNextEnds: a Schedule whose Next does not move forward would fire
// at every pass of the loop; it fires its due occurrence and ends, with an event.
func TestScheduleStuckNextEnds(t *testing.T) {
	for _, back := range []time.Duration{0, time.Second} {
		t.Run(back.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var stuck int
				_, sch := setup(t, kernel.Config{}, Config{OnEvent: func(e Event) {
					if e.Note == NoteMisfired && errors.Is(e.Err, ErrStuck) {
						mu.Lock()
						stuck++
						mu.Unlock()
					}
				}})
				var runs atomic.Int64
				s := stuckSchedule{first: time.Now().Add(10 * time.Millisecond), back: back}
				sc := mustSchedule(t, sch, s, func(context.Context, Fire) error { runs.Add(1); return nil }, &Options{Overlap: OverlapAllow})
				advance(time.Second)
				if st := sc.Stats(); !st.Ended || st.Fires != 1 || runs.Load() != 1 {
					t.Errorf("Stats() = %+v, %d runs; want ended after one fire", st, runs.Load())
				}
				mu.Lock()
				defer mu.Unlock()
				if stuck != 1 {
					t.Errorf("%d events with ErrStuck, want 1", stuck)
				}
			})
		})
	}
}

// sameTime reports whether a and b are the same representation: instant, location
// and monotonic reading.
func sameTime(a, b time.Time) bool { return a == b } //nolint:staticcheck // comparing representations, not instants
