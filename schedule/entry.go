package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/timewheel"
)

// Entry is a schedule added by [Scheduler.Add] or [Scheduler.AddDurable]. Its
// methods are safe for concurrent use; they take the scheduler's lock and never
// wait for a task. Pause, Resume and Delete of a durable schedule wait for the
// store (Config.StoreTimeout at most; Delete until its ctx ends).
type Entry struct {
	o     *opts                             // immutable
	run   func(context.Context, Fire) error // immutable; nil for a durable schedule
	seq   uint64                            // immutable: the generated name's number; 0 when o.Name is set
	spec  Spec                              // guarded by the scheduler's mu, as every field below
	next  time.Time                         // the first target not fired; zero: the schedule ended
	timer timewheel.Handle[*Entry]          // the armed fire; zero: none
	flags uint32                            // flag* bits
	out   Outcome                           // the last outcome (Last); its time and error text are in cold when it has them
	last  int64                             // unix ns of the last fire's target; 0: none
	fires uint64
	live1 *occurrence // the one live occurrence, when cold.live is empty
	cold  *cold       // made at the first rare event (coldOf)
}

// opts are a schedule's options, validated. The schedules of a scheduler whose
// options are all zero (Name too) share one.
type opts struct {
	s   *Scheduler
	dur *durable // nil for a schedule in memory
	Options
}

// cold is the state that only some schedules need: made at the first misfire,
// skip, refusal, failed occurrence, jitter, queued or second live occurrence.
type cold struct {
	misfires, skipped, refused uint64
	jitter                     time.Duration // the jitter of the armed fire
	carried                    int           // missed targets no fire reported yet
	live                       []*occurrence // live occurrences, oldest first, when more than live1
	queuedF                    Fire          // the occurrence waiting under OverlapQueueOne (flagQueued)
	outAt                      int64         // unix ns of the last misfire, skip or refusal (Entry.out)
	outErr                     string        // the last outcome's error text; empty when it has none
}

// The bits of Entry.flags.
const (
	flagPaused      = 1 << iota // Pause
	flagRemoved                 // Remove
	flagQueued                  // OverlapQueueOne: an occurrence waits behind the live ones (cold.queuedF)
	flagStorePaused             // a durable schedule paused in its store (by any scheduler)
	flagWall                    // the targets are wall-clock times (not an Every): the scheduler follows the clock's steps (clockstep.go)
	flagEnded                   // the end of the last occurrence submitted is recorded (Entry.out; outcome.go)
)

// Stats are the figures of one schedule.
type Stats struct {
	Next     time.Time // the next target; zero when the schedule ended, is paused or was removed, or the scheduler stopped
	Last     time.Time // the target of the last fire; zero before the first
	Fires    uint64    // occurrences submitted (Trigger's and RunOnStart's included)
	Misfires uint64    // targets that did not fire because they were late (the misfire policy)
	Skipped  uint64    // occurrences not submitted because of the overlap policy
	Refused  uint64    // occurrences the kernel had no room for (Capacity, MaxWaiting)
	Paused   bool
	Ended    bool        // the schedule's Spec returned the zero Time
	Outcome  LastOutcome // the last outcome, as [Entry.Last] returns it
}

// Add adds a schedule: at each target of sp, the scheduler submits a task to its
// kernel whose function calls run with the occurrence's [Fire]. The task travels
// as any other (o's Priority, Timeout, Group, Key and Retry; the kernel's
// Capacity, retries, timeouts, groups and pauses apply); an occurrence the kernel
// has no room for is refused and counted (Stats.Refused), never waited for.
//
// Each target is computed from the previous target. The scheduler's goroutine
// calls sp.Next: a panic in it ends the schedule, and so does a target not after
// the one it was computed from (the due target fires last; the event carries
// [ErrStuck]). Targets that could not fire in time follow o.Misfire; occurrences
// due while an earlier one is live follow o.Overlap. A schedule costs one timer of
// the scheduler's wheel and no goroutine. It ends when sp.Next returns the zero
// Time; it stops firing on [Entry.Remove] and when the scheduler stops.
//
// Add returns a *kernel.ConfigError (joined) naming each bad field of o, or the
// nil sp or run; an error wrapping [ErrExists] when o.Name is taken; and
// [ErrStopped] once the scheduler stopped. It never blocks on the kernel.
func (s *Scheduler) Add(sp Spec, run func(ctx context.Context, f Fire) error, o *Options) (*Entry, error) {
	var op Options
	if o != nil {
		op = *o
	}
	var errs []error
	if sp == nil {
		errs = append(errs, &kernel.ConfigError{Field: "schedule.Scheduler.Add: sp", Reason: "must not be nil"})
	}
	if run == nil {
		errs = append(errs, &kernel.ConfigError{Field: "schedule.Scheduler.Add: run", Reason: "must not be nil"})
	}
	if err := op.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := s.checkGroup(op.Group); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	e := &Entry{run: run, spec: sp, flags: wallFlag(sp)}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, ErrStopped
	}
	if err := s.register(e, &op, nil); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	now := s.frame(e, s.clk.Now())
	if op.RunOnStart {
		s.fire(e, Fire{Scheduled: now})
	}
	if s.guard(e, func() { e.next = sp.Next(now) }) {
		s.arm(e)
	}
	s.unlockEmit()
	s.poke()
	return e, nil
}

// Name returns the schedule's name (Options.Name, or the generated one).
func (e *Entry) Name() string {
	if e.seq == 0 {
		return e.o.Name
	}
	return generatedName(e.seq)
}

// Next returns the schedule's next target (without jitter), or the zero Time when
// it ended, is paused, was removed or the scheduler stopped.
func (e *Entry) Next() time.Time {
	s := e.o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.nextLocked()
}

func (e *Entry) nextLocked() time.Time {
	if e.flags&(flagPaused|flagRemoved) != 0 || e.o.s.stopped {
		return time.Time{}
	}
	return e.next
}

// Spec returns the schedule's [Spec]: the one it was added with, or the last one
// [Entry.Update] gave it. A Spec of [ParseCron] or [Every] has a String method
// that returns its text.
func (e *Entry) Spec() Spec {
	s := e.o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.spec
}

// Stats returns the schedule's figures.
func (e *Entry) Stats() Stats {
	s := e.o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.statsLocked()
}

func (e *Entry) statsLocked() Stats {
	st := Stats{
		Next: e.nextLocked(), Fires: e.fires,
		Paused:  e.flags&(flagPaused|flagStorePaused) != 0,
		Ended:   e.next.IsZero() && e.flags&flagRemoved == 0,
		Outcome: e.lastLocked(),
	}
	if e.last != 0 {
		st.Last = time.Unix(0, e.last)
	}
	if c := e.cold; c != nil {
		st.Misfires, st.Skipped, st.Refused = c.misfires, c.skipped, c.refused
	}
	return st
}

// Pause stops the schedule's fires until [Entry.Resume]; a live occurrence
// continues. The targets that pass meanwhile follow the misfire policy on Resume.
// It returns ErrRemoved after Remove, ErrStopped once the scheduler stopped.
//
// A durable schedule's pause is stored first, so that every scheduler following it
// pauses; an error of the store is returned and changes nothing here.
func (e *Entry) Pause() error {
	if e.o.dur != nil {
		if err := e.storePaused(true); err != nil {
			return err
		}
	}
	s := e.o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := e.check(); err != nil {
		return err
	}
	e.flags |= flagPaused
	s.disarm(e)
	return nil
}

// Resume undoes Pause: the next fire is the schedule's first target not fired,
// with the targets missed meanwhile handled by the misfire policy. Resuming a
// schedule that is not paused does nothing. Errors as Pause; a durable schedule's
// resume is stored first, as its pause is.
func (e *Entry) Resume() error {
	if e.o.dur != nil {
		if err := e.storePaused(false); err != nil {
			return err
		}
	}
	s := e.o.s
	s.mu.Lock()
	if err := e.check(); err != nil {
		s.mu.Unlock()
		return err
	}
	if e.flags&(flagPaused|flagStorePaused) != 0 {
		e.flags &^= flagPaused | flagStorePaused
		if d := e.o.dur; d != nil {
			d.paused, d.notBefore = false, time.Time{}
		}
		s.arm(e)
	}
	s.unlockEmit()
	s.poke()
	return nil
}

// Trigger fires one occurrence now, outside the schedule (its Fire.Scheduled is
// now, its Missed 0), under the overlap policy; the schedule's targets do not
// change. It works while the schedule is paused or ended. Errors as Pause. A
// durable schedule's occurrence is fired in the store in the background.
func (e *Entry) Trigger() error {
	s := e.o.s
	s.mu.Lock()
	if err := e.check(); err != nil {
		s.mu.Unlock()
		return err
	}
	if e.o.dur != nil {
		s.fr.send(e, reqTrigger, time.Time{}, "")
		s.mu.Unlock()
		return nil
	}
	s.fire(e, Fire{Scheduled: s.clk.Now()})
	s.unlockEmit()
	return nil
}

// Update replaces the schedule's Spec: its next target is sp.Next(now), and the
// targets missed so far are forgotten. A live occurrence continues. It returns a
// *kernel.ConfigError for a nil sp; other errors as Pause.
func (e *Entry) Update(sp Spec) error {
	if sp == nil {
		return &kernel.ConfigError{Field: "schedule.Entry.Update: sp", Reason: "must not be nil"}
	}
	s := e.o.s
	s.mu.Lock()
	if err := e.check(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.disarm(e)
	e.spec = sp
	e.flags = e.flags&^flagWall | wallFlag(sp)
	if e.o.dur != nil {
		e.flags |= flagWall
	}
	if e.cold != nil {
		e.cold.carried = 0
	}
	var next time.Time
	now := s.frame(e, s.clk.Now())
	if e.o.dur != nil {
		now = s.storeNow()
	}
	if s.guard(e, func() { next = sp.Next(now) }) {
		if e.o.dur != nil {
			s.fr.send(e, reqMove, next, specOf(sp))
		} else {
			e.next = next
			s.arm(e)
		}
	}
	s.unlockEmit()
	s.poke()
	return nil
}

// Remove ends the schedule: it fires no more, and its name is free again. A live
// occurrence continues; one waiting under OverlapQueueOne is dropped. Remove is
// idempotent. A durable schedule stays in the store ([Entry.Delete] deletes it).
func (e *Entry) Remove() {
	s := e.o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.flags&flagRemoved != 0 {
		return
	}
	e.flags = e.flags&^flagQueued | flagRemoved
	s.disarm(e)
	s.unregister(e)
}

// check returns the error of a change of e. mu held.
func (e *Entry) check() error {
	switch {
	case e.flags&flagRemoved != 0:
		return ErrRemoved
	case e.o.s.stopped:
		return ErrStopped
	}
	return nil
}

// coldOf returns e's cold state, made at the first call. mu held.
func coldOf(e *Entry) *cold {
	if e.cold == nil {
		e.cold = &cold{}
	}
	return e.cold
}
