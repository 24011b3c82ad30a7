package schedule

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// Durable schedules on a MemoryStore shared by several kernels in one process, on a
// synctest bubble's virtual clock.

// occLog records the runs of occurrences, by target, and which kernel ran them.
type occLog struct {
	mu   sync.Mutex
	runs map[time.Time][]string
	bad  []string
}

func newOccLog() *occLog { return &occLog{runs: map[time.Time][]string{}} }

func (l *occLog) fn(who string, block <-chan struct{}) kernel.DurableFunc {
	return func(ctx context.Context, _ []byte) error {
		name, at, ok := OccurrenceOf(ctx)
		l.mu.Lock()
		if !ok || name != "tick" {
			info, _ := kernel.TaskInfo(ctx)
			l.bad = append(l.bad, info.ID)
		} else {
			l.runs[at] = append(l.runs[at], who)
		}
		l.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

// targets returns the targets that ran, in order, and fails on any that ran twice.
func (l *occLog) targets(t *testing.T) []time.Time {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Fatalf("tasks that are no occurrence of tick ran: %v", l.bad)
	}
	var out []time.Time
	for at, by := range l.runs {
		if len(by) != 1 {
			t.Errorf("occurrence %v ran %d times (%v), want once", at.Format("15:04:05.000"), len(by), by)
		}
		out = append(out, at)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// sharedLease is the kernels' Config.Lease: short, so that a rescue comes soon.
const sharedLease = time.Second

// durKernel starts a kernel on s, owner owner, that runs the occurrences of kind
// "occ" into l, and a scheduler on it keeping its schedules in s; both stop at the
// end of the test.
func durKernel(t *testing.T, s store.ScheduleStore, owner string, l *occLog, block <-chan struct{}) *Scheduler {
	t.Helper()
	k, sch := setup(t, kernel.Config{Store: s, Owner: owner, Lease: sharedLease, MaxConcurrency: 4}, Config{Store: s})
	if err := k.Register("occ", l.fn(owner, block)); err != nil {
		t.Fatal(err)
	}
	return sch
}

func mustScheduleDurable(t *testing.T, sch *Scheduler, sp Spec, o Options) *Entry {
	t.Helper()
	if o.Name == "" {
		o.Name = "tick"
	}
	sc, err := sch.AddDurable(sp, "occ", []byte("p"), &o)
	if err != nil {
		t.Fatalf("AddDurable() = %v", err)
	}
	return sc
}

// TestScheduleDurableFiresOnce: three kernels follow one schedule every 100 ms; each
// target fires once, in one of them, and runs once.
func TestScheduleDurableFiresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		l := newOccLog()
		start := time.Now()
		var scs []*Entry
		for _, name := range []string{"a", "b", "c"} {
			k := durKernel(t, s, name, l, nil)
			scs = append(scs, mustScheduleDurable(t, k, Every(100*time.Millisecond), Options{}))
		}
		advance(3*time.Second + 50*time.Millisecond)
		for _, sc := range scs {
			sc.Remove()
		}
		advance(3 * time.Second) // the last occurrences run
		got := l.targets(t)
		if len(got) != 30 {
			t.Fatalf("%d occurrences ran, want 30 (every 100 ms for 3 s): %v", len(got), got)
		}
		for i, at := range got {
			if want := start.Add(time.Duration(i+1) * 100 * time.Millisecond).Truncate(time.Millisecond); !at.Equal(want) {
				t.Fatalf("occurrence %d at %v, want %v", i, at, want)
			}
		}
		var fires uint64
		firing := 0
		for _, sc := range scs {
			st := sc.Stats()
			fires += st.Fires
			if st.Fires > 0 {
				firing++
			}
			if st.Misfires != 0 || st.Skipped != 0 {
				t.Errorf("%s: %+v, want no misfire or skip", sc.Name(), st)
			}
		}
		if fires != 30 {
			t.Errorf("the kernels report %d fires in all, want 30", fires)
		}
		stored, err := s.GetSchedule(context.Background(), "tick")
		if err != nil || !stored.Last.Equal(got[len(got)-1]) {
			t.Errorf("GetSchedule() = %+v, %v; want Last %v", stored, err, got[len(got)-1])
		}
		t.Logf("fires by kernel: %d, %d, %d (%d kernels fired)", scs[0].Stats().Fires, scs[1].Stats().Fires, scs[2].Stats().Fires, firing)
	})
}

// TestScheduleDurableMisfireAfterRestart: a schedule's targets pass while no kernel
// runs; the kernel that adds it again catches up from the stored time by the policy.
func TestScheduleDurableMisfireAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		policy Misfire
		ran    int // occurrences run after the restart, once the first on-time one ran
		missed uint64
	}{
		{MisfireOnce, 1 + 1, 9},
		{MisfireSkip, 0 + 1, 10},
		{MisfireAll, 10 + 1, 0},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore()
				l := newOccLog()
				o := Options{Misfire: tc.policy, Grace: 100 * time.Millisecond}
				a := durKernel(t, s, "a", l, nil)
				mustScheduleDurable(t, a, Every(time.Second), o)
				advance(1500 * time.Millisecond)
				if n := len(l.targets(t)); n != 1 {
					t.Fatalf("%d occurrences ran before the stop, want 1", n)
				}
				if err := a.k.Close(); err != nil {
					t.Fatal(err)
				}
				advance(10 * time.Second) // targets 2 s … 11 s pass with no kernel
				b := durKernel(t, s, "b", l, nil)
				sc := mustScheduleDurable(t, b, Every(time.Second), o)
				advance(800 * time.Millisecond) // past the next on-time target (12 s)
				if n := len(l.targets(t)) - 1; n != tc.ran {
					t.Errorf("%d occurrences ran after the restart, want %d", n, tc.ran)
				}
				if st := sc.Stats(); st.Misfires != tc.missed {
					t.Errorf("Stats() = %+v, want %d misfires", st, tc.missed)
				}
			})
		})
	}
}

// TestScheduleDurablePauseIsShared: a pause stored by one kernel stops the others;
// the resume restarts them, with the targets missed meanwhile by the policy.
func TestScheduleDurablePauseIsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		l := newOccLog()
		a := durKernel(t, s, "a", l, nil)
		b := durKernel(t, s, "b", l, nil)
		o := Options{Misfire: MisfireSkip, Grace: 50 * time.Millisecond}
		sa := mustScheduleDurable(t, a, Every(100*time.Millisecond), o)
		sb := mustScheduleDurable(t, b, Every(100*time.Millisecond), o)
		advance(550 * time.Millisecond)
		before := len(l.targets(t))
		if before != 5 {
			t.Fatalf("%d occurrences before the pause, want 5", before)
		}
		if err := sa.Pause(); err != nil {
			t.Fatal(err)
		}
		advance(3 * time.Second)
		if n := len(l.targets(t)); n != before {
			t.Fatalf("%d occurrences ran while paused (by a, b following)", n-before)
		}
		if !sb.Stats().Paused {
			t.Errorf("b's Stats().Paused = false while the store says paused")
		}
		if err := sb.Resume(); err != nil { // the other kernel resumes it
			t.Fatal(err)
		}
		advance(1050 * time.Millisecond)
		after := len(l.targets(t)) - before
		// The resuming scheduler fires at once: the target due within its grace, then
		// one every 100 ms.
		if after < 9 || after > 12 {
			t.Errorf("%d occurrences in the second after the resume, want about 11", after)
		}
		if st := sa.Stats().Misfires + sb.Stats().Misfires; st < 25 {
			t.Errorf("%d misfires counted, want the ~30 targets of the pause", st)
		}
		_ = l.targets(t)
	})
}

// TestScheduleDurableOverlap: under OverlapSkip no occurrence fires while the
// previous one runs, in whichever kernel; under OverlapAllow they do.
func TestScheduleDurableOverlap(t *testing.T) {
	for _, ov := range []Overlap{OverlapSkip, OverlapAllow} {
		t.Run(ov.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore()
				l := newOccLog()
				block := make(chan struct{})
				a := durKernel(t, s, "a", l, block)
				b := durKernel(t, s, "b", l, block)
				o := Options{Overlap: ov}
				sa := mustScheduleDurable(t, a, Every(100*time.Millisecond), o)
				sb := mustScheduleDurable(t, b, Every(100*time.Millisecond), o)
				advance(1050 * time.Millisecond)
				if ov == OverlapAllow {
					// An occurrence that found its kernel's slots full waits in the
					// pool for the other kernel's claim, which polls with backoff (at
					// most 2 s): give it that long; the slots stay full meanwhile.
					advance(2100 * time.Millisecond)
				}
				running := len(l.targets(t))
				skipped := sa.Stats().Skipped + sb.Stats().Skipped
				close(block)
				switch ov {
				case OverlapSkip:
					if running != 1 || skipped != 9 {
						t.Errorf("%d occurrences ran and %d were skipped while the first ran, want 1 and 9", running, skipped)
					}
				default:
					if running != 8 || skipped != 0 { // 8 slots in all
						t.Errorf("%d occurrences ran and %d were skipped, want 8 (every slot) and 0", running, skipped)
					}
				}
				sa.Remove()
				sb.Remove()
				advance(3 * time.Second)
			})
		})
	}
}

// TestScheduleDurableDeleteEndsOthers: Delete removes the stored schedule; another
// kernel following it ends it at its next target.
func TestScheduleDurableDeleteEndsOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		l := newOccLog()
		a := durKernel(t, s, "a", l, nil)
		b := durKernel(t, s, "b", l, nil)
		sa := mustScheduleDurable(t, a, Every(100*time.Millisecond), Options{})
		sb := mustScheduleDurable(t, b, Every(100*time.Millisecond), Options{})
		advance(250 * time.Millisecond)
		if err := sa.Delete(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := len(l.targets(t))
		advance(time.Second)
		if m := len(l.targets(t)); m != n {
			t.Errorf("%d occurrences ran after the delete", m-n)
		}
		if st := sb.Stats(); !st.Ended {
			t.Errorf("b's Stats() = %+v, want Ended", st)
		}
		if _, err := s.GetSchedule(context.Background(), "tick"); !errors.Is(err, store.ErrUnknownSchedule) {
			t.Errorf("GetSchedule() = %v, want ErrUnknownSchedule", err)
		}
	})
}

// TestScheduleDurableTriggerAndUpdate: Trigger fires one occurrence now; Update moves
// the stored next time, for every kernel.
func TestScheduleDurableTriggerAndUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		l := newOccLog()
		a := durKernel(t, s, "a", l, nil)
		b := durKernel(t, s, "b", l, nil)
		start := time.Now()
		sa := mustScheduleDurable(t, a, Every(time.Hour), Options{})
		sb := mustScheduleDurable(t, b, Every(time.Hour), Options{})
		advance(10 * time.Millisecond)
		if err := sa.Trigger(); err != nil {
			t.Fatal(err)
		}
		advance(100 * time.Millisecond)
		if got := l.targets(t); len(got) != 1 || !got[0].Equal(start.Add(10*time.Millisecond).Truncate(time.Millisecond)) {
			t.Fatalf("after Trigger: ran %v, want one occurrence at %v", got, start.Add(10*time.Millisecond))
		}
		if err := sb.Update(Every(time.Second)); err != nil {
			t.Fatal(err)
		}
		advance(3050 * time.Millisecond)
		if n := len(l.targets(t)); n != 4 {
			t.Errorf("%d occurrences ran, want the trigger's and 3 of the updated schedule", n)
		}
		stored, err := s.GetSchedule(context.Background(), "tick")
		if err != nil || stored.Spec != "@every 1s" {
			t.Errorf("GetSchedule() = %+v, %v; want the spec @every 1s", stored, err)
		}
		advance(5 * time.Second) // a reads the stored schedule back (the refresh)
		stored, _ = s.GetSchedule(context.Background(), "tick")
		if !sa.Next().Equal(stored.Next) {
			t.Errorf("a's Next() = %v, want the stored %v", sa.Next(), stored.Next)
		}
	})
}

func TestScheduleDurableRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := durKernel(t, s, "a", newOccLog(), nil)
		run := func(context.Context, Fire) error { return nil }
		every := Every(time.Second)
		for _, tc := range []struct {
			name  string
			s     Spec
			kind  string
			o     Options
			field string
		}{
			{"no name", every, "occ", Options{}, "schedule.Options.Name"},
			{"bad name", every, "occ", Options{Name: "a b"}, "schedule.Options.Name"},
			{"nil schedule", nil, "occ", Options{Name: "x"}, "schedule.Scheduler.AddDurable: sp"},
			{"no kind", every, "", Options{Name: "x"}, "schedule.Scheduler.AddDurable: kind"},
			{"queue-one", every, "occ", Options{Name: "x", Overlap: OverlapQueueOne}, "schedule.Options.Overlap"},
			{"replace", every, "occ", Options{Name: "x", Overlap: OverlapReplace}, "schedule.Options.Overlap"},
			{"jitter", every, "occ", Options{Name: "x", Jitter: -1}, "schedule.Options.Jitter"},
		} {
			_, err := k.AddDurable(tc.s, tc.kind, nil, &tc.o)
			var ce *kernel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("%s: AddDurable() = %v, want a *ConfigError for %s", tc.name, err, tc.field)
			}
		}
		mustScheduleDurable(t, k, every, Options{Name: "dup"})
		if _, err := k.AddDurable(every, "occ", nil, &Options{Name: "dup"}); !errors.Is(err, ErrExists) {
			t.Errorf("AddDurable(dup) = %v, want ErrExists", err)
		}
		if _, err := k.Add(every, run, &Options{Name: "dup"}); !errors.Is(err, ErrExists) {
			t.Errorf("Add(dup) = %v, want ErrExists: one name space", err)
		}
		_, mem := setup(t, kernel.Config{}, Config{})
		if _, err := mem.AddDurable(every, "occ", nil, &Options{Name: "x"}); err == nil {
			t.Errorf("AddDurable() without a store = nil, want an error")
		}
	})
}

func TestParseOccurrenceID(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	name, got, ok := store.ParseOccurrenceID(store.OccurrenceID("nightly.report", at))
	if !ok || name != "nightly.report" || !got.Equal(at) {
		t.Errorf("ParseOccurrenceID(OccurrenceID(nightly.report, %v)) = %q, %v, %v", at, name, got, ok)
	}
	for _, id := range []string{"", "sched/", "sched/x", "sched/x/", "sched/x/12a", "task/x/1", "sched/a b/1", store.OccurrenceID("a/b", at), fmt.Sprintf("sched//%d", at.UnixMilli())} {
		if _, _, ok := store.ParseOccurrenceID(id); ok {
			t.Errorf("ParseOccurrenceID(%q) ok, want not an occurrence", id)
		}
	}
}

// TestScheduleDurableChurn: kernels close and new ones start at random times, at
// least one always running: every target of the schedule is stored, none twice
// (the kernels' fires add up to no more than the targets), and runs.
func TestScheduleDurableChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		l := newOccLog()
		start := time.Now()
		type replica struct {
			k  *kernel.Kernel
			s  *Scheduler
			sc *Entry
		}
		var fires uint64
		gen := 0
		up := func() replica {
			gen++
			k, err := kernel.New(kernel.Config{Store: s, Owner: fmt.Sprintf("r%d", gen), Lease: sharedLease, MaxConcurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Register("occ", l.fn(fmt.Sprintf("r%d", gen), nil)); err != nil {
				t.Fatal(err)
			}
			sch, err := New(k, Config{Store: s})
			if err != nil {
				t.Fatal(err)
			}
			return replica{k, sch, mustScheduleDurable(t, sch, Every(100*time.Millisecond), Options{Grace: time.Second})}
		}
		down := func(r replica) {
			fires += r.sc.Stats().Fires
			r.s.Stop()
			if err := r.k.Close(); err != nil {
				t.Fatal(err)
			}
		}
		live := []replica{up(), up(), up()}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 40 {
			advance(time.Duration(rng.IntN(300)+1) * time.Millisecond)
			if len(live) > 1 && rng.IntN(2) == 0 {
				i := rng.IntN(len(live))
				down(live[i])
				live = slices.Delete(live, i, i+1)
			} else if len(live) < 3 {
				live = append(live, up())
			}
		}
		end := time.Now()
		for _, r := range live {
			r.sc.Remove()
		}
		advance(3 * time.Second) // the last occurrences run (a rescue takes a lease)
		for _, r := range live {
			down(r)
		}
		want := int(end.Sub(start) / (100 * time.Millisecond))
		// A fire whose answer came after its kernel closed is stored but not counted:
		// the count bounds the fires from above, the store shows every target.
		if int(fires) > want || int(fires) < want-gen {
			t.Errorf("the kernels counted %d fires in all, want %d (one per target; a closing kernel may miss its last)", fires, want)
		}
		for i := 1; i <= want; i++ {
			id := store.OccurrenceID("tick", start.Add(time.Duration(i)*100*time.Millisecond))
			if st, err := s.Get(context.Background(), id); err != nil || st.State != kernel.Succeeded {
				t.Errorf("occurrence %d: %+v, %v; want stored and succeeded", i, st, err)
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.runs) != want {
			t.Errorf("%d targets ran, want %d", len(l.runs), want)
		}
	})
}

// countingStore counts the FireSchedule calls on a MemoryStore.
type countingStore struct {
	*storekit.MemoryStore
	fires atomic.Int64
}

func (s *countingStore) FireSchedule(ctx context.Context, f store.ScheduleFire) (store.StoredSchedule, bool, error) {
	s.fires.Add(1)
	return s.MemoryStore.FireSchedule(ctx, f)
}

// TestScheduleDurableFollowsRecreated: the schedule is deleted and created again
// (its version starts over) with another next time while a kernel follows it; the
// kernel's fire finds another next time stored and follows it, one store call later.
func TestScheduleDurableFollowsRecreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{MemoryStore: storekit.NewMemoryStore()}
		l := newOccLog()
		a := durKernel(t, s, "a", l, nil)
		start := time.Now()
		mustScheduleDurable(t, a, Every(time.Second), Options{})
		advance(1100 * time.Millisecond) // fired at 1 s: version 1
		ctx := context.Background()
		if _, err := s.DeleteSchedule(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		later := start.Add(3500 * time.Millisecond)
		if _, _, err := s.UpsertSchedule(ctx, store.StoredSchedule{Name: "tick", Spec: "@every 1s", Next: later}); err != nil {
			t.Fatal(err)
		}
		advance(2800 * time.Millisecond)
		want := []time.Time{start.Add(time.Second).Truncate(time.Millisecond), later.Truncate(time.Millisecond)}
		if got := l.targets(t); !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("ran %v, want %v (the first target, then the recreated schedule's)", got, want)
		}
		if n := s.fires.Load(); n != 3 {
			t.Errorf("%d FireSchedule calls, want 3 (1 s, one refused at 2 s, 3.5 s)", n)
		}
	})
}

// forwardThenStuck moves by step until first, then returns its argument: its Next
// stops moving forward.
type forwardThenStuck struct {
	step  time.Duration
	first time.Time
}

func (s forwardThenStuck) Next(t time.Time) time.Time {
	if t.Before(s.first) {
		return t.Add(s.step)
	}
	return t
}

// TestScheduleDurableStuckNextEnds: a durable schedule whose Next stops moving forward
// ends in the kernel, which then leaves the store alone; the stored schedule stays.
func TestScheduleDurableStuckNextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{MemoryStore: storekit.NewMemoryStore()}
		l := newOccLog()
		a := durKernel(t, s, "a", l, nil)
		sched := forwardThenStuck{step: 100 * time.Millisecond, first: time.Now().Add(250 * time.Millisecond)}
		sc := mustScheduleDurable(t, a, sched, Options{})
		advance(2 * time.Second)
		calls := s.fires.Load()
		advance(2 * time.Second)
		if st := sc.Stats(); !st.Ended {
			t.Errorf("Stats() = %+v, want ended", st)
		}
		if n := s.fires.Load(); n != calls || n > 4 {
			t.Errorf("%d FireSchedule calls, then %d more after it ended; want at most 4, then none", calls, n-calls)
		}
		if _, err := s.GetSchedule(context.Background(), "tick"); err != nil {
			t.Errorf("GetSchedule() = %v, want the schedule still stored", err)
		}
	})
}
