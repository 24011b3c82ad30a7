package schedule

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/axsched/ax/internal/recur"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/timewheel"
)

// occurrence is one occurrence of a schedule: the task it submitted. The schedule
// holds it (e.live1, cold.live) while it is live, unless the overlap policy is
// OverlapAllow; under OverlapAllow and OverlapQueueOne its ended method is the
// task's OnEnd.
type occurrence struct {
	e *Entry
	h *kernel.Handle // set by submit before its end is handled (mu)
	n uint64         // immutable: e.fires once it was submitted
}

// arm puts e's one timer at its next target plus a fresh jitter, or takes it out
// when the schedule ended or is paused. mu held.
func (s *Scheduler) arm(e *Entry) {
	s.disarm(e)
	if e.flags&(flagPaused|flagRemoved) != 0 || s.stopped {
		return
	}
	at := e.next
	if at.IsZero() {
		return // ended
	}
	if d := e.o.dur; d != nil {
		if d.inflight > 0 {
			return // armed again with the store's answer
		}
		off := s.k.StoreOffset()
		at = d.armAt(e, s.clk.Now().Add(off)).Add(-off) // from the store's clock to the kernel's
	}
	if e.flags&flagWall != 0 && at == at.Round(0) { //nolint:staticcheck // comparing representations, not instants
		at = at.Add(-s.skew) // a wall time (no monotonic reading), on the wheel's clock
	}
	if j := e.o.Jitter; j > 0 {
		c := coldOf(e)
		c.jitter = rand.N(j) //nolint:gosec // jitter, not a secret
		at = at.Add(c.jitter)
	}
	e.timer = s.wheel.Schedule(at, e)
}

// disarm takes e's timer out. mu held.
func (s *Scheduler) disarm(e *Entry) {
	if e.timer != (timewheel.Handle[*Entry]{}) {
		s.wheel.Cancel(e.timer)
		e.timer = timewheel.Handle[*Entry]{}
	}
}

// guard runs f, which calls e's Spec, and reports whether it returned. A panic in
// the Spec ends e (its Stats show it Ended) and is noted (NoteMisfired with a
// *kernel.PanicError). mu held.
func (s *Scheduler) guard(e *Entry, f func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
			e.next = time.Time{}
			s.disarm(e)
			err := &kernel.PanicError{Value: r, Stack: debug.Stack()}
			s.outcome(e, OutcomeMisfired, err)
			s.note(e, NoteMisfired, "", err)
		}
	}()
	f()
	return true
}

// onDue handles e's timer that came due: it fires the due targets by the misfire
// policy and arms the next one. mu held.
func (s *Scheduler) onDue(e *Entry, now time.Time) {
	if d := e.o.dur; d != nil && d.refresh {
		s.fr.send(e, reqRefresh, time.Time{}, "")
		return
	}
	next := e.next
	carried := 0
	if e.o.dur != nil {
		now = now.Add(s.k.StoreOffset()) // a durable schedule's targets are on the store's clock
	}
	if c := e.cold; c != nil {
		// The jitter is the scheduler's own delay: it does not make a target late.
		now, carried = now.Add(-c.jitter), c.carried
	}
	if now.Before(next) {
		now = next
	}
	grace := cmp.Or(e.o.Grace, graceDefault)
	var res recur.Result
	one := false // next alone fires, with carried as its Missed
	if !s.guard(e, func() {
		if after, ok := recur.DueOne(e.spec, next, now, grace); ok && e.o.dur == nil {
			res, one = recur.Result{Next: after}, true
			return
		}
		res = recur.Missed(recur.Request{
			Schedule: e.spec, Next: next, Now: now, Policy: recur.Policy(e.o.Misfire),
			Grace: grace, MaxCatchUp: cmp.Or(e.o.MaxCatchUp, maxCatchUpDefault), Carried: carried,
		})
	}) {
		return
	}
	if !res.Next.IsZero() && !res.Next.After(now) {
		// Next returned a time not after its argument: the schedule would fire at
		// every pass. The due target fires, as the last, and the schedule ends.
		s.outcome(e, OutcomeMisfired, ErrStuck)
		s.note(e, NoteMisfired, "", ErrStuck)
		res = recur.Result{Fires: []recur.Fire{{Scheduled: next, Missed: carried}}}
		one = false
		if e.o.dur != nil {
			e.next = time.Time{} // ends it here; the stored schedule stays for the others
			return
		}
	}
	if e.o.dur != nil {
		s.fr.due(e, res)
		return
	}
	if res.Carried != carried {
		coldOf(e).carried = res.Carried
	}
	if res.Missed > 0 {
		coldOf(e).misfires += uint64(res.Missed)
		s.outcome(e, OutcomeMisfired, nil)
		s.note(e, NoteMisfired, "", nil)
	}
	if one {
		s.fire(e, Fire{Scheduled: next, Missed: carried})
	}
	for _, f := range res.Fires {
		s.fire(e, Fire(f))
	}
	e.next = res.Next
	s.arm(e)
}

// fire submits one occurrence of e under its overlap policy. mu held.
func (s *Scheduler) fire(e *Entry, f Fire) {
	if s.stopped {
		return
	}
	if e.o.Overlap != OverlapQueueOne {
		e.pruneLive()
	}
	if e.anyLive() {
		switch e.o.Overlap {
		case OverlapAllow:
		case OverlapReplace:
			// Cancel returns at once; the occurrences end later (OnEnd).
			if e.live1 != nil {
				e.live1.h.Cancel()
			} else {
				for _, oc := range e.cold.live {
					oc.h.Cancel()
				}
			}
		case OverlapQueueOne:
			if e.flags&flagQueued == 0 {
				coldOf(e).queuedF = f
				e.flags |= flagQueued
				return
			}
			s.skip(e, f)
			return
		default: // OverlapSkip
			s.skip(e, f)
			return
		}
	}
	s.submit(e, f)
}

// skip counts an occurrence the overlap policy does not submit. mu held.
func (s *Scheduler) skip(e *Entry, f Fire) {
	c := coldOf(e)
	c.carried += 1 + f.Missed
	c.skipped++
	s.outcome(e, OutcomeSkipped, nil)
	s.note(e, NoteSkipped, "", nil)
}

// submit submits the task of one occurrence, or counts it refused when the kernel
// has no room for it. It never blocks. mu held: the occurrence's OnEnd, which takes
// mu, finds it live.
//
// Only OverlapQueueOne needs to hear of an occurrence's end when it comes (to
// submit the one waiting), and OverlapAllow keeps no occurrence: only their tasks
// carry an OnEnd (occurrence.ended), which also records the last outcome. Under
// OverlapSkip and OverlapReplace the next fire asks the live occurrences' handles
// (pruneLive), and the last outcome is read from the last one's (Entry.settle):
// their tasks need no loop pass and no callback when they end.
func (s *Scheduler) submit(e *Entry, f Fire) {
	run := e.run
	oc := &occurrence{e: e, n: e.fires + 1}
	t := kernel.Task{
		Priority: e.o.Priority, Timeout: e.o.Timeout, Group: e.o.Group, Key: e.o.Key, Retry: e.o.Retry,
		Run: func(ctx context.Context) error { return run(ctx, f) },
	}
	switch e.o.Overlap {
	case OverlapQueueOne, OverlapAllow:
		t.OnEnd = oc.ended
	}
	h, err := s.k.TrySubmit(t)
	if err != nil {
		if errors.Is(err, kernel.ErrClosed) {
			s.stopLocked()
			return
		}
		c := coldOf(e)
		c.carried += 1 + f.Missed
		c.refused++
		s.outcome(e, OutcomeRefused, err)
		s.note(e, NoteRefused, "", err)
		return
	}
	oc.h = h
	if e.o.Overlap != OverlapAllow {
		e.addLive(oc)
	}
	e.fires++
	e.last = f.Scheduled.UnixNano()
	e.flags &^= flagEnded
	s.outcome(e, OutcomeRunning, nil)
	if s.cfg.OnEvent != nil {
		s.note(e, NoteFired, h.ID(), nil) // the ID is made only when an event needs it
	}
}

// ended is the occurrence's Task.OnEnd (OverlapQueueOne, OverlapAllow): it
// records the schedule's last outcome, takes the occurrence off the live ones and
// submits the one waiting under OverlapQueueOne.
func (oc *occurrence) ended(st kernel.State, err error) {
	e := oc.e
	s := e.o.s
	s.mu.Lock()
	s.ended(e, oc.n, st, err)
	e.dropLive(oc)
	if e.flags&(flagQueued|flagRemoved) == flagQueued && !e.anyLive() {
		e.flags &^= flagQueued
		s.fire(e, e.cold.queuedF)
	}
	s.unlockEmit()
}

// pruneLive takes the occurrences whose tasks ended off e's live ones (those
// without an OnEnd, see submit), the last one's end recorded first. mu held.
func (e *Entry) pruneLive() {
	e.settle()
	if oc := e.live1; oc != nil && oc.h.State().Terminal() {
		e.live1 = nil
	}
	if c := e.cold; c != nil && len(c.live) > 0 {
		c.live = slices.DeleteFunc(c.live, func(oc *occurrence) bool { return oc.h.State().Terminal() })
	}
}

// anyLive reports whether an occurrence of e has not ended. mu held.
func (e *Entry) anyLive() bool {
	return e.live1 != nil || (e.cold != nil && len(e.cold.live) > 0)
}

// addLive adds oc to e's live occurrences, the newest. mu held.
func (e *Entry) addLive(oc *occurrence) {
	if !e.anyLive() {
		e.live1 = oc
		return
	}
	c := coldOf(e)
	if e.live1 != nil {
		c.live = append(c.live, e.live1)
		e.live1 = nil
	}
	c.live = append(c.live, oc)
}

// dropLive takes oc off e's live occurrences. mu held.
func (e *Entry) dropLive(oc *occurrence) {
	if e.live1 == oc {
		e.live1 = nil
		return
	}
	if c := e.cold; c != nil {
		if i := slices.Index(c.live, oc); i >= 0 {
			c.live = slices.Delete(c.live, i, i+1)
		}
	}
}
