package schedule

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// fireLog records the fires a schedule's function received, and when each ran.
type fireLog struct {
	mu       sync.Mutex
	fires    []Fire
	at       []time.Time
	canceled int
	hold     time.Duration // how long each run lasts (virtual time), unless cancelled
}

func (l *fireLog) run(ctx context.Context, f Fire) error {
	l.mu.Lock()
	l.fires = append(l.fires, f)
	l.at = append(l.at, time.Now())
	hold := l.hold
	l.mu.Unlock()
	if hold > 0 {
		tm := time.NewTimer(hold)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			l.mu.Lock()
			l.canceled++
			l.mu.Unlock()
			return ctx.Err()
		}
	}
	return nil
}

func (l *fireLog) get() []Fire {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fires)
}

// offsets returns each fire's Scheduled as an offset from t0, and its Missed.
func offsets(fs []Fire, t0 time.Time) (sched []time.Duration, missed []int) {
	for _, f := range fs {
		sched = append(sched, f.Scheduled.Sub(t0))
		missed = append(missed, f.Missed)
	}
	return sched, missed
}

func mustSchedule(t testing.TB, s *Scheduler, sp Spec, run func(context.Context, Fire) error, o *Options) *Entry {
	t.Helper()
	sc, err := s.Add(sp, run, o)
	if err != nil {
		t.Fatalf("Add() = %v", err)
	}
	return sc
}

func TestScheduleEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		t0 := time.Now()
		sc := mustSchedule(t, sch, Every(time.Second), l.run, &Options{Name: "tick"})
		if got, want := sc.Next(), t0.Add(time.Second); !got.Equal(want) {
			t.Fatalf("Next() = %v, want %v", got, want)
		}
		advance(3500 * time.Millisecond)
		sched, missed := offsets(l.get(), t0)
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(sched, want) {
			t.Fatalf("fires at %v, want %v", sched, want)
		}
		if !slices.Equal(missed, []int{0, 0, 0}) {
			t.Fatalf("Missed = %v, want zeros", missed)
		}
		st := sch.Stats()["tick"]
		if st.Fires != 3 || !st.Last.Equal(t0.Add(3*time.Second)) || !st.Next.Equal(t0.Add(4*time.Second)) {
			t.Fatalf("Stats().Schedules[tick] = %+v", st)
		}
		if sc.Name() != "tick" {
			t.Fatalf("Name() = %q", sc.Name())
		}
	})
}

func TestScheduleMisfire(t *testing.T) {
	s := time.Second
	tests := []struct {
		name       string
		o          Options
		wantSched  []time.Duration // fires after the pause, as offsets
		wantMissed []int
		misfires   uint64
	}{
		// Paused after the fire at 1s, resumed at 11.5s: targets 2s..11s are late.
		{"once", Options{Misfire: MisfireOnce}, []time.Duration{11 * s, 12 * s}, []int{9, 0}, 9},
		{"default is once", Options{}, []time.Duration{11 * s, 12 * s}, []int{9, 0}, 9},
		{"skip", Options{Misfire: MisfireSkip}, []time.Duration{12 * s}, []int{10}, 10},
		{"all", Options{Misfire: MisfireAll, MaxCatchUp: 3, Overlap: OverlapAllow}, []time.Duration{9 * s, 10 * s, 11 * s, 12 * s}, []int{7, 0, 0, 0}, 7},
		{"all default cap", Options{Misfire: MisfireAll, Overlap: OverlapAllow}, []time.Duration{2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s, 8 * s, 9 * s, 10 * s, 11 * s, 12 * s}, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, sch := setup(t, kernel.Config{}, Config{})
				var l fireLog
				t0 := time.Now()
				o := tt.o
				o.Grace = 100 * time.Millisecond
				sc := mustSchedule(t, sch, Every(s), l.run, &o)
				advance(1500 * time.Millisecond)
				if err := sc.Pause(); err != nil {
					t.Fatalf("Pause() = %v", err)
				}
				if !sc.Next().IsZero() || !sc.Stats().Paused {
					t.Fatalf("paused: Stats() = %+v", sc.Stats())
				}
				advance(10 * s)
				if n := len(l.get()); n != 1 {
					t.Fatalf("%d fires while paused, want only the one before", n)
				}
				if err := sc.Resume(); err != nil {
					t.Fatalf("Resume() = %v", err)
				}
				advance(s) // now 12.5s
				// A catch-up's occurrences run side by side, in any order.
				after := l.get()[1:]
				slices.SortStableFunc(after, func(a, b Fire) int { return a.Scheduled.Compare(b.Scheduled) })
				sched, missed := offsets(after, t0)
				if !slices.Equal(sched, tt.wantSched) || !slices.Equal(missed, tt.wantMissed) {
					t.Fatalf("fires at %v missing %v, want at %v missing %v", sched, missed, tt.wantSched, tt.wantMissed)
				}
				if got := sc.Stats().Misfires; got != tt.misfires {
					t.Fatalf("Stats().Misfires = %d, want %d", got, tt.misfires)
				}
			})
		})
	}
}

// blocker is a Schedule with one target, at t0 + at, whose Next blocks the loop that
// computes the target after it until release is closed.
type blocker struct {
	t0      time.Time
	at      time.Duration
	release chan struct{}
}

func (b blocker) Next(after time.Time) time.Time {
	if t := b.t0.Add(b.at); after.Before(t) {
		return t
	}
	<-b.release
	return time.Time{}
}

// TestScheduleMisfireLoopBlocked: the loop is held (here by a Schedule's Next) while
// the clock passes several targets of another schedule: the loop finds them late.
func TestScheduleMisfireLoopBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		t0 := time.Now()
		mustSchedule(t, sch, Every(time.Second), l.run, &Options{Grace: 100 * time.Millisecond})
		release := make(chan struct{})
		mustSchedule(t, sch, blocker{t0: t0, at: 1500 * time.Millisecond, release: release}, func(context.Context, Fire) error { return nil }, nil)
		<-time.After(11500 * time.Millisecond) // the loop is blocked from 1.5 s on
		close(release)
		synctest.Wait()
		sched, missed := offsets(l.get(), t0)
		if !slices.Equal(sched, []time.Duration{time.Second, 11 * time.Second}) || !slices.Equal(missed, []int{0, 9}) {
			t.Fatalf("fires at %v missing %v, want at [1s 11s] missing [0 9]", sched, missed)
		}
	})
}

func TestScheduleOverlap(t *testing.T) {
	s := time.Second
	tests := []struct {
		name       string
		overlap    Overlap
		wantSched  []time.Duration
		wantMissed []int
		skipped    uint64
		canceled   int
	}{
		// Every second, each run lasting 2.5 s, watched for 5.5 s.
		{"skip", OverlapSkip, []time.Duration{s, 4 * s}, []int{0, 2}, 3, 0},
		{"queue one", OverlapQueueOne, []time.Duration{s, 2 * s}, []int{0, 0}, 2, 0},
		{"allow", OverlapAllow, []time.Duration{s, 2 * s, 3 * s, 4 * s, 5 * s}, []int{0, 0, 0, 0, 0}, 0, 0},
		{"replace", OverlapReplace, []time.Duration{s, 2 * s, 3 * s, 4 * s, 5 * s}, []int{0, 0, 0, 0, 0}, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, sch := setup(t, kernel.Config{}, Config{})
				l := fireLog{hold: 2500 * time.Millisecond}
				t0 := time.Now()
				sc := mustSchedule(t, sch, Every(s), l.run, &Options{Overlap: tt.overlap})
				advance(5500 * time.Millisecond)
				sched, missed := offsets(l.get(), t0)
				if !slices.Equal(sched, tt.wantSched) || !slices.Equal(missed, tt.wantMissed) {
					t.Fatalf("fires at %v missing %v, want at %v missing %v", sched, missed, tt.wantSched, tt.wantMissed)
				}
				if got := sc.Stats().Skipped; got != tt.skipped {
					t.Fatalf("Stats().Skipped = %d, want %d", got, tt.skipped)
				}
				l.mu.Lock()
				canceled := l.canceled
				l.mu.Unlock()
				if canceled != tt.canceled {
					t.Fatalf("%d runs cancelled, want %d", canceled, tt.canceled)
				}
			})
		})
	}
}

func TestScheduleJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const jitter = 300 * time.Millisecond
		tick := tickDefault
		_, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		mustSchedule(t, sch, Every(time.Second), l.run, &Options{Jitter: jitter})
		advance(50 * time.Second)
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.fires) != 49 && len(l.fires) != 50 {
			t.Fatalf("%d fires in 50 s, want 49 or 50", len(l.fires))
		}
		delays := map[time.Duration]bool{}
		for i, f := range l.fires {
			d := l.at[i].Sub(f.Scheduled)
			// The wheel rounds a deadline up to its tick.
			if d < 0 || d >= jitter+tick {
				t.Fatalf("fire %d ran %v after its target, want in [0, %v)", i, d, jitter+tick)
			}
			if f.Missed != 0 {
				t.Fatalf("fire %d: Missed = %d: the jitter must not make a target late", i, f.Missed)
			}
			delays[d] = true
		}
		if len(delays) < 5 {
			t.Fatalf("%d distinct delays over %d fires: not random", len(delays), len(l.fires))
		}
	})
}

func TestScheduleRunOnStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		t0 := time.Now()
		mustSchedule(t, sch, Every(time.Minute), l.run, &Options{RunOnStart: true})
		synctest.Wait()
		sched, _ := offsets(l.get(), t0)
		if !slices.Equal(sched, []time.Duration{0}) {
			t.Fatalf("fires at %v, want one at 0", sched)
		}
		advance(time.Minute)
		if sched, _ := offsets(l.get(), t0); !slices.Equal(sched, []time.Duration{0, time.Minute}) {
			t.Fatalf("fires at %v, want 0 and 1m", sched)
		}
	})
}

func TestScheduleTriggerRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		t0 := time.Now()
		sc := mustSchedule(t, sch, Every(time.Minute), l.run, &Options{Name: "job"})
		if err := sc.Pause(); err != nil {
			t.Fatalf("Pause() = %v", err)
		}
		advance(time.Second)
		if err := sc.Trigger(); err != nil {
			t.Fatalf("Trigger() = %v", err)
		}
		synctest.Wait()
		if sched, missed := offsets(l.get(), t0); !slices.Equal(sched, []time.Duration{time.Second}) || missed[0] != 0 {
			t.Fatalf("fires at %v missing %v, want one at 1s (Trigger while paused)", sched, missed)
		}
		if err := sc.Resume(); err != nil {
			t.Fatalf("Resume() = %v", err)
		}
		if got := sc.Next(); !got.Equal(t0.Add(time.Minute)) {
			t.Fatalf("Next() after Trigger = %v, want the schedule's target", got)
		}
		// Remove while an occurrence runs: it continues.
		l.mu.Lock()
		l.hold = 10 * time.Second
		l.mu.Unlock()
		advance(time.Minute)
		sc.Remove()
		sc.Remove() // idempotent
		if !sc.Next().IsZero() {
			t.Fatalf("Next() after Remove = %v, want zero", sc.Next())
		}
		if err := sc.Trigger(); !errors.Is(err, ErrRemoved) {
			t.Fatalf("Trigger() after Remove = %v, want ErrRemoved", err)
		}
		if err := sc.Pause(); !errors.Is(err, ErrRemoved) {
			t.Fatalf("Pause() after Remove = %v, want ErrRemoved", err)
		}
		if _, ok := sch.Stats()["job"]; ok {
			t.Fatal("Stats().Schedules holds a removed schedule")
		}
		advance(5 * time.Minute)
		l.mu.Lock()
		n, canceled := len(l.fires), l.canceled
		l.mu.Unlock()
		if n != 2 || canceled != 0 {
			t.Fatalf("%d fires, %d cancelled after Remove, want 2 and 0", n, canceled)
		}
		if st := k.Stats().ByPriority.Normal; st.Succeeded != 2 {
			t.Fatalf("Succeeded = %d, want 2: the occurrence running at Remove completes", st.Succeeded)
		}
		// The name is free again.
		sc2 := mustSchedule(t, sch, Every(time.Minute), l.run, &Options{Name: "job"})
		sc2.Remove()
	})
}

func TestScheduleUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		t0 := time.Now()
		sc := mustSchedule(t, sch, Every(time.Second), l.run, nil)
		advance(2500 * time.Millisecond)
		if err := sc.Update(Every(10 * time.Second)); err != nil {
			t.Fatalf("Update() = %v", err)
		}
		if got, want := sc.Next(), t0.Add(12500*time.Millisecond); !got.Equal(want) {
			t.Fatalf("Next() after Update = %v, want %v", got.Sub(t0), want.Sub(t0))
		}
		advance(20 * time.Second)
		sched, _ := offsets(l.get(), t0)
		want := []time.Duration{time.Second, 2 * time.Second, 12500 * time.Millisecond, 22500 * time.Millisecond}
		if !slices.Equal(sched, want) {
			t.Fatalf("fires at %v, want %v", sched, want)
		}
		var ce *kernel.ConfigError
		if err := sc.Update(nil); !errors.As(err, &ce) {
			t.Fatalf("Update(nil) = %v, want a *kernel.ConfigError", err)
		}
	})
}

// limited is a Schedule with n targets, a second apart.
type limited struct {
	t0 time.Time
	n  int
}

func (s limited) Next(after time.Time) time.Time {
	for i := 1; i <= s.n; i++ {
		if t := s.t0.Add(time.Duration(i) * time.Second); t.After(after) {
			return t
		}
	}
	return time.Time{}
}

func TestScheduleEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		sc := mustSchedule(t, sch, limited{t0: time.Now(), n: 2}, l.run, nil)
		advance(time.Minute)
		if n := len(l.get()); n != 2 {
			t.Fatalf("%d fires, want 2", n)
		}
		if st := sc.Stats(); !st.Ended || !st.Next.IsZero() {
			t.Fatalf("Stats() = %+v, want ended", st)
		}
		if err := sc.Trigger(); err != nil {
			t.Fatalf("Trigger() of an ended schedule = %v", err)
		}
		synctest.Wait()
		if n := len(l.get()); n != 3 {
			t.Fatalf("%d fires, want 3", n)
		}
	})
}

func TestScheduleStop(t *testing.T) {
	for _, stop := range []string{"Shutdown", "Close", "Stop"} {
		t.Run(stop, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k, sch := setup(t, kernel.Config{}, Config{})
				l := fireLog{hold: 1500 * time.Millisecond}
				var scs []*Entry
				for range 10 {
					scs = append(scs, mustSchedule(t, sch, Every(time.Second), l.run, &Options{Overlap: OverlapQueueOne}))
				}
				advance(2500 * time.Millisecond)
				before := len(l.get())
				var err error
				switch stop {
				case "Shutdown":
					err = k.Shutdown(context.Background())
				case "Close":
					err = k.Close()
				default:
					sch.Stop()
				}
				if err != nil {
					t.Fatalf("%s() = %v", stop, err)
				}
				advance(time.Minute)
				if n := len(l.get()); n != before {
					t.Fatalf("%d fires after %s, want none", n-before, stop)
				}
				for _, sc := range scs {
					if !sc.Next().IsZero() {
						t.Fatalf("Next() after %s = %v, want zero", stop, sc.Next())
					}
					if err := sc.Trigger(); !errors.Is(err, ErrStopped) {
						t.Fatalf("Trigger() after %s = %v, want ErrStopped", stop, err)
					}
					sc.Remove()
				}
				if _, err := sch.Add(Every(time.Second), l.run, nil); !errors.Is(err, ErrStopped) {
					t.Fatalf("Add() after %s = %v, want ErrStopped", stop, err)
				}
				st := k.Stats()
				if stop == "Shutdown" && st.ByPriority.Normal.Succeeded != uint64(before) {
					t.Fatalf("Succeeded = %d, want %d: Shutdown drains the running occurrences", st.ByPriority.Normal.Succeeded, before)
				}
			})
		})
	}
}

func TestScheduleRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var notes []Note
		k, sch := setup(t, kernel.Config{MaxConcurrency: 1, Capacity: kernel.ByPriority[int]{High: 1, Normal: 1, Low: 1}}, Config{OnEvent: func(e Event) {
			mu.Lock()
			notes = append(notes, e.Note)
			mu.Unlock()
		}})
		g := make(gate)
		mustSubmit(t, k, kernel.Task{Run: g.run}) // runs
		synctest.Wait()
		mustSubmit(t, k, kernel.Task{Run: g.run}) // fills Normal's capacity
		var l fireLog
		sc := mustSchedule(t, sch, Every(time.Second), l.run, &Options{Name: "r"})
		advance(2500 * time.Millisecond)
		if st := sc.Stats(); st.Refused != 2 || st.Fires != 0 {
			t.Fatalf("Stats() = %+v, want 2 refused", st)
		}
		g.open()
		advance(time.Second)
		fs := l.get()
		if len(fs) != 1 || fs[0].Missed != 2 {
			t.Fatalf("fires %+v, want one missing 2", fs)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []Note{NoteRefused, NoteRefused, NoteFired}; !slices.Equal(notes, want) {
			t.Fatalf("notes %v, want %v", notes, want)
		}
	})
}

func TestScheduleGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, sch := setup(t, kernel.Config{Groups: map[string]kernel.GroupConfig{"g": {PerKey: kernel.Limits{Concurrency: 1}}}}, Config{})
		l := fireLog{hold: 1500 * time.Millisecond}
		mustSchedule(t, sch, Every(time.Second), l.run, &Options{Group: "g", Key: "a", Overlap: OverlapAllow})
		advance(3500 * time.Millisecond)
		// Three fires; the key's limit runs them one at a time.
		if n := len(l.get()); n != 2 {
			t.Fatalf("%d runs started, want 2 under the key's concurrency of 1", n)
		}
		if gs := k.Stats().Groups["g"]; gs.Waiting+gs.Running != 2 {
			t.Fatalf("group figures %+v, want 2 occurrences in the group", gs)
		}
	})
}

func TestScheduleValidate(t *testing.T) {
	_, sch := setup(t, kernel.Config{Groups: map[string]kernel.GroupConfig{"g": {}}}, Config{})
	run := func(context.Context, Fire) error { return nil }
	long := string(make([]byte, store.ScheduleNameMax+1))
	tests := []struct {
		name  string
		s     Spec
		run   func(context.Context, Fire) error
		o     Options
		field string
	}{
		{"nil schedule", nil, run, Options{}, "schedule.Scheduler.Add: sp"},
		{"nil run", Every(time.Second), nil, Options{}, "schedule.Scheduler.Add: run"},
		{"name", Every(time.Second), run, Options{Name: long}, "schedule.Options.Name"},
		{"misfire", Every(time.Second), run, Options{Misfire: 9}, "schedule.Options.Misfire"},
		{"max catch-up", Every(time.Second), run, Options{MaxCatchUp: MaxCatchUpMax + 1}, "schedule.Options.MaxCatchUp"},
		{"negative max catch-up", Every(time.Second), run, Options{MaxCatchUp: -1}, "schedule.Options.MaxCatchUp"},
		{"grace", Every(time.Second), run, Options{Grace: -1}, "schedule.Options.Grace"},
		{"overlap", Every(time.Second), run, Options{Overlap: 9}, "schedule.Options.Overlap"},
		{"jitter", Every(time.Second), run, Options{Jitter: -1}, "schedule.Options.Jitter"},
		{"priority", Every(time.Second), run, Options{Priority: 9}, "schedule.Options.Priority"},
		{"timeout", Every(time.Second), run, Options{Timeout: -1}, "schedule.Options.Timeout"},
		{"key without group", Every(time.Second), run, Options{Key: "a"}, "schedule.Options.Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			_, err := sch.Add(tt.s, tt.run, &o)
			var ce *kernel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Add() = %v, want a *kernel.ConfigError for %s", err, tt.field)
			}
		})
	}
	sc, err := sch.Add(Every(time.Hour), run, &Options{Name: "x"})
	if err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	defer sc.Remove()
	if _, err := sch.Add(Every(time.Hour), run, &Options{Name: "x"}); !errors.Is(err, ErrExists) {
		t.Fatalf("Schedule() with a taken name = %v, want ErrExists", err)
	}
}

// TestScheduleManyOneEntryEach: 10,000 schedules cost one wheel entry each and no
// goroutine.
func TestScheduleManyOneEntryEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		synctest.Wait()
		g0 := runtime.NumGoroutine()
		run := func(context.Context, Fire) error { return nil }
		const n = 10_000
		for i := range n {
			mustSchedule(t, sch, Every(time.Duration(1+i%60)*time.Second), run, nil)
		}
		synctest.Wait()
		sch.mu.Lock()
		got := sch.wheel.Len()
		sch.mu.Unlock()
		if got != n {
			t.Fatalf("wheel.Len() = %d, want %d", got, n)
		}
		if g := runtime.NumGoroutine(); g > g0 {
			t.Fatalf("NumGoroutine() = %d, want at most %d: no goroutine per schedule", g, g0)
		}
		if got := len(sch.Stats()); got != n {
			t.Fatalf("len(Stats().Schedules) = %d, want %d", got, n)
		}
	})
}

// panicky is a Schedule whose Next panics after its first target.
type panicky struct{ t0 time.Time }

func (p panicky) Next(after time.Time) time.Time {
	if first := p.t0.Add(time.Second); after.Before(first) {
		return first
	}
	panic("panicky: no more")
}

func TestSchedulePanickyNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, sch := setup(t, kernel.Config{}, Config{})
		var l fireLog
		sc := mustSchedule(t, sch, panicky{t0: time.Now()}, l.run, nil)
		advance(time.Minute)
		if st := sc.Stats(); !st.Ended || st.Fires != 0 {
			t.Fatalf("Stats() = %+v, want ended without a fire", st)
		}
		// The kernel goes on.
		if err := mustSubmit(t, k, kernel.Task{Run: noop}).Wait(context.Background()); err != nil {
			t.Fatalf("Wait() = %v", err)
		}
	})
}

// TestScheduleReplaceQueued: OverlapReplace cancels an occurrence still queued (one
// slot, taken by another task), which ends at once, and submits the new one.
func TestScheduleReplaceQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, sch := setup(t, kernel.Config{MaxConcurrency: 1}, Config{})
		g := make(gate)
		mustSubmit(t, k, kernel.Task{Run: g.run})
		var l fireLog
		t0 := time.Now()
		sc := mustSchedule(t, sch, Every(time.Second), l.run, &Options{Overlap: OverlapReplace})
		advance(2500 * time.Millisecond)
		if st := k.Stats().ByPriority.Normal; st.Canceled != 1 || st.Queued != 1 {
			t.Fatalf("Canceled = %d, Queued = %d, want 1 and 1", st.Canceled, st.Queued)
		}
		g.open()
		synctest.Wait()
		if sched, _ := offsets(l.get(), t0); !slices.Equal(sched, []time.Duration{2 * time.Second}) {
			t.Fatalf("fires at %v, want the replacing one at 2s", sched)
		}
		if st := sc.Stats(); st.Fires != 2 {
			t.Fatalf("Stats().Fires = %d, want 2", st.Fires)
		}
	})
}
