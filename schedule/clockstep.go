package schedule

import (
	"time"

	"github.com/axsched/ax/internal/recur"
	"github.com/axsched/ax/timewheel"
)

// Wall-clock steps
//
// The wheel runs on the clock's monotonic readings, while a cron schedule's targets
// are wall-clock times. The scheduler keeps skew, how far the wall clock has moved
// from the monotonic clock since the wheel started, and places a wall target W on
// the wheel at W - skew. At each pass it compares the wall-clock and the monotonic
// time elapsed since the previous pass (both read at once by the clock): their
// difference, the step, is added to skew. The scheduler sleeps at most stepMin
// between passes, so it sees a step (an NTP step, a suspend and resume, a manual
// change) that soon; a step of at least stepMin re-arms every
// wall-clock schedule (clockStepped).
//
// No target is fired twice, or lost outside the misfire policy, because of a step: a
// forward step leaves the targets it skipped to the misfire policy, as any late
// target, and a backward step leaves each schedule's next target, the first not
// fired, in place. Where a step
// goes unseen (below stepMin), targets armed before it fire off by less than
// stepMin, never not at all. Where a duplicate and a miss were the only choices,
// the design would take the duplicate; a step forces neither.

// testWallHook, if set before New, gives the wall-clock reading of the clock's time
// t in place of t itself: tests step the wall clock with it apart from the
// monotonic one.
var testWallHook func(t time.Time) time.Time

// stepMinFloor is the smallest step that re-arms the schedules: steps below it (the
// clock's slewing, a late pass) only adjust skew.
const stepMinFloor = time.Second

// wallFlag returns flagWall for a Spec whose targets are wall-clock times: any but an
// Every, which is monotonic.
func wallFlag(sp Spec) uint32 {
	if _, ok := sp.(recur.Every); ok {
		return 0
	}
	return flagWall
}

// wallTarget reports whether e's next target is a wall-clock time: e's Spec gives
// wall-clock times and the target carries no monotonic reading (a custom Spec may
// add to its argument, which keeps the clock's monotonic reading: such a target is
// on the monotonic clock already). mu held.
func (e *Entry) wallTarget() bool {
	return e.flags&flagWall != 0 && e.next == e.next.Round(0) //nolint:staticcheck // comparing representations, not instants
}

// stepMin is the smallest wall-clock step the scheduler reacts to, and the longest
// it sleeps: max(1 s, 2 ticks).
func (s *Scheduler) stepMin() time.Duration { return max(stepMinFloor, 2*s.cfg.Tick) }

// wall returns the wall-clock reading of the clock's time now.
func (s *Scheduler) wall(now time.Time) time.Time {
	if s.wallHook != nil {
		return s.wallHook(now)
	}
	return now
}

// frame returns the time now as e's targets read it: the wall clock's for a
// wall-clock schedule, the clock's own (its monotonic reading kept) for an Every.
func (s *Scheduler) frame(e *Entry, now time.Time) time.Time {
	if e.flags&flagWall != 0 {
		return s.wall(now)
	}
	return now
}

// clockStepped measures the wall-clock step since the previous pass, adds it to
// skew and, when it is at least stepMin, re-arms every armed wall-clock schedule on
// the moved wall clock and notes NoteClockStep for each. A forward step makes the
// targets it skipped due at once: the pass fires them by the misfire policy. After a
// backward step each target stays the first not fired, so no target fires twice.
// mu held.
func (s *Scheduler) clockStepped(now time.Time) {
	wall := s.wall(now).Round(0)
	step := wall.Sub(s.seenWall) - now.Sub(s.seen)
	s.seen, s.seenWall = now, wall
	if step == 0 {
		return
	}
	s.skew += step
	if step.Abs() < s.stepMin() {
		return
	}
	replan := func(e *Entry) {
		if e.flags&flagRemoved != 0 || e.timer == (timewheel.Handle[*Entry]{}) || !e.wallTarget() {
			return
		}
		s.arm(e)
		if s.cfg.OnEvent != nil {
			s.events = append(s.events, Event{Time: now, Schedule: e.Name(), Note: NoteClockStep, Step: step})
		}
	}
	for _, e := range s.named {
		replan(e)
	}
	for _, e := range s.unnamed {
		replan(e)
	}
}
