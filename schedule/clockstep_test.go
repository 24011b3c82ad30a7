package schedule

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
)

// stepBundle is a scheduler whose wall clock runs ahead of the bubble's clock by
// step (testWallHook), and the events it made.
type stepBundle struct {
	s    *Scheduler
	step atomic.Int64 // the wall clock's lead, in ns
	mu   sync.Mutex
	evs  []Event
}

// setupStep starts a kernel and a scheduler with a steppable wall clock. Only for
// use inside synctest.Test.
func setupStep(t *testing.T) *stepBundle {
	t.Helper()
	b := &stepBundle{}
	testWallHook = func(t time.Time) time.Time { return t.Round(0).Add(time.Duration(b.step.Load())) }
	defer func() { testWallHook = nil }()
	_, b.s = setup(t, kernel.Config{}, Config{OnEvent: func(ev Event) {
		b.mu.Lock()
		b.evs = append(b.evs, ev)
		b.mu.Unlock()
	}})
	return b
}

// steps returns the NoteClockStep events, as "schedule step".
func (b *stepBundle) steps() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, ev := range b.evs {
		if ev.Note == NoteClockStep {
			out = append(out, ev.Schedule+" "+ev.Step.String())
		}
	}
	return out
}

func mustCron(t *testing.T, spec string) Spec {
	t.Helper()
	sp, err := ParseCron(spec, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestClockStepForward: the wall clock jumps 90 minutes ahead. The hourly cron
// schedule's 01:00 target, skipped by the jump, fires at once (the misfire policy),
// and 02:00 fires when the wall clock shows it; the Every schedule keeps to the
// monotonic clock.
func TestClockStepForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setupStep(t)
		t0 := time.Now()
		var cron, every fireLog
		mustSchedule(t, b.s, mustCron(t, "0 * * * *"), cron.run, &Options{Name: "cron"})
		mustSchedule(t, b.s, Every(time.Hour), every.run, &Options{Name: "every"})
		b.step.Store(int64(90 * time.Minute))
		advance(time.Second) // wall 01:30:01
		if got, want := b.steps(), []string{"cron 1h30m0s"}; !slices.Equal(got, want) {
			t.Fatalf("clock-step events = %q, want %q", got, want)
		}
		if got, _ := offsets(cron.get(), t0); !slices.Equal(got, []time.Duration{time.Hour}) {
			t.Fatalf("cron fires at %v, want [1h] (the target the step skipped, at once)", got)
		}
		if n := len(every.get()); n != 0 {
			t.Fatalf("every fired %d times, want 0", n)
		}
		if got, want := b.s.Stats()["cron"].Next, t0.Add(2*time.Hour); !got.Equal(want) {
			t.Fatalf("cron Next = %v, want %v", got, want)
		}
		advance(30 * time.Minute) // wall 02:00:01, monotonic 00:30:01
		if got, _ := offsets(cron.get(), t0); !slices.Equal(got, []time.Duration{time.Hour, 2 * time.Hour}) {
			t.Fatalf("cron fires at %v, want [1h 2h]", got)
		}
		if n := len(every.get()); n != 0 {
			t.Fatalf("every fired %d times, want 0", n)
		}
		advance(30 * time.Minute) // monotonic 01:00:01
		if got, _ := offsets(every.get(), t0); !slices.Equal(got, []time.Duration{time.Hour}) {
			t.Fatalf("every fires at %v, want [1h]", got)
		}
	})
}

// TestClockStepBackward: the wall clock goes back 30 minutes after the 01:00 fire.
// The schedule fires 01:00 no second time, and 02:00 when the wall clock shows it,
// not 30 minutes early.
func TestClockStepBackward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setupStep(t)
		t0 := time.Now()
		var cron fireLog
		mustSchedule(t, b.s, mustCron(t, "0 * * * *"), cron.run, &Options{Name: "cron"})
		advance(time.Hour + time.Second) // wall 01:00:01
		b.step.Store(int64(-30 * time.Minute))
		advance(time.Second) // wall 00:30:02
		if got, want := b.steps(), []string{"cron -30m0s"}; !slices.Equal(got, want) {
			t.Fatalf("clock-step events = %q, want %q", got, want)
		}
		advance(59 * time.Minute) // wall 01:29:02, monotonic 02:00:02
		if got, _ := offsets(cron.get(), t0); !slices.Equal(got, []time.Duration{time.Hour}) {
			t.Fatalf("cron fires at %v, want [1h]: 01:00 once, 02:00 not yet", got)
		}
		advance(31 * time.Minute) // wall 02:00:02
		if got, _ := offsets(cron.get(), t0); !slices.Equal(got, []time.Duration{time.Hour, 2 * time.Hour}) {
			t.Fatalf("cron fires at %v, want [1h 2h]", got)
		}
	})
}

// TestClockStepSmall: a step below max(1 s, 2 ticks) makes no event.
func TestClockStepSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setupStep(t)
		var cron fireLog
		mustSchedule(t, b.s, mustCron(t, "0 * * * *"), cron.run, &Options{Name: "cron"})
		b.step.Store(int64(900 * time.Millisecond))
		advance(2 * time.Second)
		if got := b.steps(); len(got) != 0 {
			t.Fatalf("clock-step events = %q, want none", got)
		}
	})
}
