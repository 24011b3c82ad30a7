package kernel

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/internal/recur"
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/timewheel"
)

// Scheduled is a schedule added by [Kernel.Schedule]. Its methods are safe for
// concurrent use; those that change it block until the kernel's loop applied the
// change and return at once, doing nothing, once the kernel stopped.
type Scheduled struct {
	o    *schedOpts                        // immutable
	run  func(context.Context, Fire) error // immutable
	seq  uint64                            // immutable: the generated name's number; 0 when o.Name is set
	pub  schedPub                          // written by the loop, read by Stats
	ls   schedLoopFields                   // loop-owned
	cold atomic.Pointer[schedCold]         // set once by the loop, at its first rare event (coldOf)
}

// schedOpts are a schedule's options, validated. The schedules of a kernel whose
// options are all zero (Name too) share one.
type schedOpts struct {
	k   *Kernel
	dur *schedDur // nil for a schedule in memory (ScheduleDurable)
	ScheduleOptions
}

// schedPub is what the loop publishes of a schedule.
type schedPub struct {
	// next is the unix ns of the first target not fired; what Next returns unless a
	// flag of schedNoNext is set. The loop rebuilds the target from it (schedNext).
	next  atomic.Int64
	last  atomic.Int64 // unix ns of the last fire's target; 0: none
	fires atomic.Uint64
}

// schedLoopFields is a schedule's loop state.
type schedLoopFields struct {
	s     Schedule
	timer timewheel.Handle[timerEntry]
	// live1 is the one occurrence not yet ended, when cold.live is empty: set by the
	// loop, cleared by the loop or by the executor that settles its success
	// (finishSelfSettled). A terminal one still here ended without the loop.
	live1 atomic.Pointer[Handle]
	slot  uint32 // index in schedLoop.slots; 0: none
	// flags are the sched* bits: written by the loop only, read by Stats and Next.
	flags atomic.Uint32
}

// The bits of schedLoopFields.flags.
const (
	schedPaused      = 1 << iota // Pause
	schedEnded                   // the Schedule's Next returned the zero Time
	schedRemoved                 // Remove
	schedStopped                 // Shutdown or Close began while it was armed, or it was resumed after
	schedQueued                  // OverlapQueueOne: an occurrence waits behind the live ones (cold.queuedF)
	schedNextMono                // pub.next rebuilds as k.epoch plus an offset
	schedNextWall                // pub.next rebuilds as a wall time in the cron schedule's location
	schedStorePaused             // a durable schedule paused in its store (by any kernel): shown as Paused

	schedNoNext = schedPaused | schedEnded | schedRemoved | schedStopped
)

// schedCold is the state of a schedule that only some schedules need: made by the
// loop at the first misfire, skip, refusal, jitter, queued or second live
// occurrence, or target without a compact form.
type schedCold struct {
	misfires, skipped, refused atomic.Uint64 // published: read by Stats

	// Loop-owned.
	next    time.Time     // the first target not fired, when neither schedNextMono nor schedNextWall is set
	jitter  time.Duration // the jitter of the armed fire
	carried int           // missed targets no fire reported yet
	live    []*Handle     // occurrences not yet ended, oldest first, when more than live1
	queuedF Fire          // the occurrence waiting under OverlapQueueOne (schedQueued)
}

// schedLoop is the loop's table of schedules: the targets of their wheel entries.
type schedLoop struct {
	slots []*Scheduled // by the entry's slot; slot 0 means none
	free  []uint32
	ready []*Scheduled // schedules whose queued occurrence may go (schedRunQueued)
}

// schedEntryBit marks the wheel entry of a schedule among the gate's (isGateEntry):
// its lazyTask.meta is schedEntryBit | the schedule's slot.
const schedEntryBit = 1 << 63

// isSchedEntry reports whether a gate wheel entry is a schedule's.
func isSchedEntry(e *timerEntry) bool { return e.t.meta&schedEntryBit != 0 }

// ScheduleStats are the figures of one schedule (Stats.Schedules, [Scheduled.Stats]).
type ScheduleStats struct {
	Next     time.Time // the next target; zero when the schedule ended, is paused or was removed, or the kernel stopped
	Last     time.Time // the target of the last fire; zero before the first
	Fires    uint64    // occurrences submitted (Trigger's and RunOnStart's included)
	Misfires uint64    // targets that did not fire because they were late (the misfire policy)
	Skipped  uint64    // occurrences not submitted because of the overlap policy
	Refused  uint64    // occurrences the kernel had no room for (Capacity, MaxWaiting)
	Paused   bool
	Ended    bool // the schedule's Next returned the zero Time
}

// Schedule adds a schedule: at each target of s (see [Schedule]), the kernel submits
// a task whose function calls run with the occurrence's [Fire]. The task travels as
// any other (o's Priority, Timeout, Group, Key and Retry; Capacity, retries,
// timeouts, groups and pauses apply); an occurrence the kernel has no room for is
// refused and counted (ScheduleStats.Refused), never waited for.
//
// Each target is computed from the previous target, never from when a run started
// or ended. The kernel's loop calls s.Next: it must return quickly and never block
// (those of [ParseCron] and [Every] do); a panic in it ends the schedule, and is
// logged, and so does a target not after the one it was computed from (the
// schedule's due target fires last; the event carries [ErrScheduleStuck]). Targets that could not fire in time follow o.Misfire; occurrences due
// while an earlier one is live follow o.Overlap. A schedule costs one timer of the
// kernel's wheel and no goroutine. It ends when s.Next returns the zero Time; it stops
// firing when Shutdown or Close begins, or on [Scheduled.Remove].
//
// Schedule blocks until the loop added it. It returns a *ConfigError (joined)
// naming each bad field of o, or the nil s or run; an error wrapping
// [ErrScheduleExists] when o.Name is taken; and [ErrClosed] after Shutdown or Close
// began. Safe for concurrent use.
func (k *Kernel) Schedule(s Schedule, run func(ctx context.Context, f Fire) error, o *ScheduleOptions) (*Scheduled, error) {
	var opts ScheduleOptions
	if o != nil {
		opts = *o
	}
	var errs []error
	if s == nil {
		errs = append(errs, &ConfigError{Field: "Schedule: s", Reason: "must not be nil"})
	}
	if run == nil {
		errs = append(errs, &ConfigError{Field: "Schedule: run", Reason: "must not be nil"})
	}
	if err := k.scheduleReady(errs, &opts); err != nil {
		return nil, err
	}
	sc := &Scheduled{run: run}
	sc.ls.s = s
	if err := k.register(sc, &opts, nil); err != nil {
		return nil, err
	}
	k.m.schedUsed.Store(true)
	if err := k.schedCtrl(sc, schedAdd, nil); err != nil {
		k.unregister(sc)
		return nil, err
	}
	return sc, nil
}

// schedOp is what a control message does to a schedule.
type schedOp uint8

const (
	schedAdd schedOp = iota + 1
	schedRemove
	schedPause
	schedResume
	schedTrigger
	schedUpdate
)

// schedMsg is the schedule part of a ctrlSchedule message.
type schedMsg struct {
	sc *Scheduled
	op schedOp
	s  Schedule // schedUpdate
}

// schedCtrl hands op on sc to the loop and waits for its answer; ErrClosed when the
// loop stopped.
func (k *Kernel) schedCtrl(sc *Scheduled, op schedOp, s Schedule) error {
	ack := make(chan error, 1)
	k.control(ctrlMsg{kind: ctrlSchedule, sched: &schedMsg{sc: sc, op: op, s: s}, ack: ack})
	select {
	case err := <-ack:
		return err
	case <-k.loopDone:
		select {
		case err := <-ack:
			return err
		default:
			return ErrClosed
		}
	}
}

// Name returns the schedule's name (ScheduleOptions.Name, or the generated one).
func (sc *Scheduled) Name() string {
	if sc.seq == 0 {
		return sc.o.Name
	}
	return generatedName(sc.seq)
}

// Next returns the schedule's next target (without jitter), or the zero Time when it
// ended, is paused, was removed or the kernel stopped. It reads what the loop
// published at its last change and never blocks.
func (sc *Scheduled) Next() time.Time {
	if sc.ls.flags.Load()&schedNoNext != 0 {
		return time.Time{}
	}
	return unixOrZero(sc.pub.next.Load())
}

// Stats returns the schedule's figures. It never blocks.
func (sc *Scheduled) Stats() ScheduleStats {
	p := &sc.pub
	f := sc.ls.flags.Load()
	st := ScheduleStats{
		Last: unixOrZero(p.last.Load()), Fires: p.fires.Load(),
		Paused: f&(schedPaused|schedStorePaused) != 0, Ended: f&schedEnded != 0,
	}
	if f&schedNoNext == 0 {
		st.Next = unixOrZero(p.next.Load())
	}
	if c := sc.cold.Load(); c != nil {
		st.Misfires, st.Skipped, st.Refused = c.misfires.Load(), c.skipped.Load(), c.refused.Load()
	}
	return st
}

func unixOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Pause stops the schedule's fires until [Scheduled.Resume]; a live occurrence
// continues. The targets that pass meanwhile follow the misfire policy on Resume.
// It returns ErrScheduleRemoved after Remove, ErrClosed once the kernel stopped.
//
// A durable schedule's pause is stored first, so that every kernel following it
// pauses; an error of the store is returned and changes nothing here.
func (sc *Scheduled) Pause() error {
	if sc.o.dur != nil {
		if err := sc.durableCheck(); err != nil {
			return err
		}
		if err := sc.setStorePaused(true); err != nil {
			return err
		}
	}
	return sc.o.k.schedCtrl(sc, schedPause, nil)
}

// Resume undoes Pause: the next fire is the schedule's first target not fired, with
// the targets missed meanwhile handled by the misfire policy. Resuming a schedule
// that is not paused does nothing. Errors as Pause.
// A durable schedule's resume is stored first, as its pause is.
func (sc *Scheduled) Resume() error {
	if sc.o.dur != nil {
		if err := sc.durableCheck(); err != nil {
			return err
		}
		if err := sc.setStorePaused(false); err != nil {
			return err
		}
	}
	return sc.o.k.schedCtrl(sc, schedResume, nil)
}

// Trigger fires one occurrence now, outside the schedule (its Fire.Scheduled is now,
// its Missed 0), under the overlap policy; the schedule's targets do not change. It
// works while the schedule is paused or ended. Errors as Pause.
func (sc *Scheduled) Trigger() error { return sc.o.k.schedCtrl(sc, schedTrigger, nil) }

// Update replaces the schedule's Schedule: its next target is s.Next(now), and the
// targets missed so far are forgotten. A live occurrence continues. It returns a
// *ConfigError for a nil s; other errors as Pause.
func (sc *Scheduled) Update(s Schedule) error {
	if s == nil {
		return &ConfigError{Field: "Scheduled.Update: s", Reason: "must not be nil"}
	}
	return sc.o.k.schedCtrl(sc, schedUpdate, s)
}

// Remove ends the schedule: it fires no more, and its name is free again. A live
// occurrence continues; one waiting under OverlapQueueOne is dropped. Remove is
// idempotent and returns once the loop applied it (at once if the kernel stopped).
func (sc *Scheduled) Remove() {
	_ = sc.o.k.schedCtrl(sc, schedRemove, nil)
	sc.o.k.unregister(sc)
}

// handleSched applies a schedule control message. Loop only.
func (k *Kernel) handleSched(m *schedMsg) error {
	sc := m.sc
	if sc.ls.flags.Load()&schedRemoved != 0 {
		if m.op == schedRemove {
			return nil
		}
		return ErrScheduleRemoved
	}
	stopped := k.ls.draining || k.ls.closing
	switch m.op {
	case schedAdd:
		if stopped {
			return ErrClosed
		}
		if sc.o.dur != nil {
			k.schedDurAdd(sc)
			return nil
		}
		now := k.ls.now
		if sc.o.RunOnStart {
			k.schedFire(sc, Fire{Scheduled: now})
		}
		if k.schedGuard(sc, func() { k.schedSetNext(sc, sc.ls.s.Next(now)) }) {
			k.schedArm(sc)
		}
	case schedRemove:
		sc.setFlags(schedRemoved, schedQueued)
		k.schedDisarm(sc)
	case schedPause:
		if sc.ls.flags.Load()&schedPaused != 0 {
			return nil
		}
		sc.setFlags(schedPaused, 0)
		k.schedDisarm(sc)
	case schedResume:
		if sc.ls.flags.Load()&schedPaused == 0 {
			return nil
		}
		if sc.o.dur != nil {
			sc.o.dur.paused, sc.o.dur.notBefore = false, time.Time{}
		}
		if stopped {
			sc.setFlags(schedStopped, schedPaused|schedStorePaused)
		} else {
			sc.setFlags(0, schedPaused|schedStorePaused)
			k.schedArm(sc)
		}
	case schedTrigger:
		if stopped {
			return ErrClosed
		}
		if sc.o.dur != nil {
			k.schedSend(sc, schedReqTrigger, store.ScheduleFire{}, recur.Result{})
			k.schedDisarm(sc) // re-armed with the result
			return nil
		}
		k.schedFire(sc, Fire{Scheduled: k.ls.now})
	case schedUpdate:
		if stopped {
			return ErrClosed
		}
		k.schedDisarm(sc)
		sc.ls.s = m.s
		if c := sc.cold.Load(); c != nil {
			c.carried = 0
		}
		if sc.o.dur != nil {
			var next time.Time
			if k.schedGuard(sc, func() { next = m.s.Next(k.ls.now) }) {
				k.schedSend(sc, schedReqMove, store.ScheduleFire{Next: next, Spec: specOf(m.s)}, recur.Result{})
			}
			return nil
		}
		if k.schedGuard(sc, func() { k.schedSetNext(sc, m.s.Next(k.ls.now)) }) {
			k.schedArm(sc)
		}
	}
	return nil
}

// schedArm puts sc's one wheel entry at its next target plus a fresh jitter, or
// takes it out when the schedule ended. Loop only.
func (k *Kernel) schedArm(sc *Scheduled) {
	f := sc.ls.flags.Load()
	if f&schedEnded != 0 {
		k.schedDisarm(sc)
		return
	}
	if f&schedPaused != 0 {
		return
	}
	var at time.Time
	if d := sc.o.dur; d != nil {
		if d.inflight > 0 {
			return // armed again with the store's answer
		}
		at = k.schedDurArmAt(sc)
	} else {
		at = k.schedNext(sc)
	}
	if sc.ls.slot == 0 {
		sl := &k.ls.sched
		if n := len(sl.free); n > 0 {
			sc.ls.slot = sl.free[n-1]
			sl.free = sl.free[:n-1]
		} else {
			if len(sl.slots) == 0 {
				sl.slots = append(sl.slots, nil) // slot 0 means none
			}
			sc.ls.slot = uint32(len(sl.slots))
			sl.slots = append(sl.slots, nil)
		}
		sl.slots[sc.ls.slot] = sc
	} else {
		k.ls.wheel.Cancel(sc.ls.timer)
	}
	if j := sc.o.Jitter; j > 0 {
		c := k.coldOf(sc)
		c.jitter = rand.N(j) //nolint:gosec // jitter, not a secret
		at = at.Add(c.jitter)
	}
	sc.ls.timer = k.ls.wheel.Schedule(at, timerEntry{t: lazyTask{meta: schedEntryBit | uint64(sc.ls.slot)}})
}

// schedGuard runs f, which calls sc's Schedule, and reports whether it returned. A
// panic in the Schedule ends sc (its Stats show it Ended), is logged and noted
// (NoteMisfired with a *PanicError): the loop goes on. Loop only.
func (k *Kernel) schedGuard(sc *Scheduled, f func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
			k.schedSetNext(sc, time.Time{})
			k.schedArm(sc) // ends it
			err := &PanicError{Value: r, Stack: debug.Stack()}
			k.log.warn("kernel: a schedule's Next panicked: the schedule ended", "schedule", sc.Name(), "panic", r)
			k.schedNote(sc, NoteMisfired, err)
		}
	}()
	f()
	return true
}

// schedDisarm takes sc's wheel entry out and frees its slot. Loop only.
func (k *Kernel) schedDisarm(sc *Scheduled) {
	if sc.ls.slot == 0 {
		return
	}
	k.ls.wheel.Cancel(sc.ls.timer)
	sl := &k.ls.sched
	sl.slots[sc.ls.slot] = nil
	sl.free = append(sl.free, sc.ls.slot)
	sc.ls.slot = 0
	sc.ls.timer = timewheel.Handle[timerEntry]{}
}

// onSchedTimer handles a schedule's wheel entry that came due: it fires the due
// targets by the misfire policy and arms the next one. Loop only.
func (k *Kernel) onSchedTimer(meta uint64) {
	sc := k.ls.sched.slots[meta&^schedEntryBit]
	sc.ls.timer = timewheel.Handle[timerEntry]{}
	if sc.o.dur != nil && sc.o.dur.refresh {
		k.schedSend(sc, schedReqRefresh, store.ScheduleFire{}, recur.Result{})
		return
	}
	next := k.schedNext(sc)
	now, carried := k.ls.now, 0
	if c := sc.cold.Load(); c != nil {
		// The jitter is the kernel's own delay: it does not make a target late.
		now, carried = now.Add(-c.jitter), c.carried
	}
	if now.Before(next) {
		now = next
	}
	grace := cmp.Or(sc.o.Grace, MisfireGraceDefault)
	var res recur.Result
	one := false // next alone fires, with carried as its Missed
	if !k.schedGuard(sc, func() {
		if after, ok := recur.DueOne(sc.ls.s, next, now, grace); ok && sc.o.dur == nil {
			res, one = recur.Result{Next: after}, true
			return
		}
		res = recur.Missed(recur.Request{
			Schedule: sc.ls.s, Next: next, Now: now, Policy: recur.Policy(sc.o.Misfire),
			Grace: grace, MaxCatchUp: sc.o.MaxCatchUp, Carried: carried,
		})
	}) {
		return
	}
	if !res.Next.IsZero() && !res.Next.After(now) {
		// Next returned a time not after its argument: the schedule would fire at
		// every pass of the loop. The target due fires, as the last, and it ends; the
		// "targets" computed after it are none.
		k.log.warn("kernel: a schedule's Next did not move forward: the schedule ended", "schedule", sc.Name(), "next", res.Next)
		k.schedNote(sc, NoteMisfired, ErrScheduleStuck)
		res = recur.Result{Fires: []recur.Fire{{Scheduled: next, Missed: carried}}}
		one = false
		if sc.o.dur != nil {
			k.schedSetNext(sc, res.Next)
			k.schedArm(sc) // ends it here; the stored schedule stays for the other kernels
			return
		}
	}
	if sc.o.dur != nil {
		k.schedDurDue(sc, res)
		return
	}
	if res.Carried != carried {
		k.coldOf(sc).carried = res.Carried
	}
	if res.Missed > 0 {
		k.coldOf(sc).misfires.Add(uint64(res.Missed))
		k.m.schedMisfires.AddInt64(int64(res.Missed))
		k.schedNote(sc, NoteMisfired, nil)
	}
	if one {
		k.schedFire(sc, Fire{Scheduled: next, Missed: carried})
	}
	for _, f := range res.Fires {
		k.schedFire(sc, Fire(f))
	}
	k.schedSetNext(sc, res.Next)
	k.schedArm(sc)
}

// schedFire submits one occurrence of sc under its overlap policy. Loop only.
func (k *Kernel) schedFire(sc *Scheduled, f Fire) {
	if k.ls.draining || k.ls.closing {
		return
	}
	if sc.anyLive() {
		switch sc.o.Overlap {
		case OverlapAllow:
		case OverlapReplace:
			// k.cancel may end an occurrence at once, which takes it off the live ones.
			if h := sc.ls.live1.Load(); h != nil {
				if !State(h.state.Load()).Terminal() {
					k.cancel(h, ErrCanceled)
				}
			} else {
				for _, h := range slices.Clone(sc.cold.Load().live) {
					if !State(h.state.Load()).Terminal() {
						k.cancel(h, ErrCanceled)
					}
				}
			}
		case OverlapQueueOne:
			if sc.ls.flags.Load()&schedQueued == 0 {
				k.coldOf(sc).queuedF = f
				sc.setFlags(schedQueued, 0)
				return
			}
			k.schedSkip(sc, f)
			return
		default: // OverlapSkip
			k.schedSkip(sc, f)
			return
		}
	}
	k.schedSubmit(sc, f)
}

// schedSkip counts an occurrence the overlap policy does not submit. Loop only.
func (k *Kernel) schedSkip(sc *Scheduled, f Fire) {
	c := k.coldOf(sc)
	c.carried += 1 + f.Missed
	c.skipped.Add(1)
	k.m.schedSkipped.Inc()
	k.schedNote(sc, NoteSkipped, nil)
}

// schedSubmit submits the task of one occurrence, or counts it refused when the
// kernel has no room for it. It never blocks. Loop only.
func (k *Kernel) schedSubmit(sc *Scheduled, f Fire) {
	rc := k.ls.rcl
	prio := normPriority(sc.o.Priority)
	lvl := levelOf(prio)
	evicts := false
	if err := k.tryAcquire(lvl, 1, rc); err != nil {
		if lvl != queue.High || !rc.cfg.EvictLow || !k.evictNewestLow() {
			k.schedRefuse(sc, f, err)
			return
		}
		evicts = true
	}
	var gd *groupDef
	if sc.o.Group != "" {
		var ok bool
		if gd, ok = rc.groups[sc.o.Group]; !ok {
			k.releaseFor(lvl, evicts)
			k.schedRefuse(sc, f, fmt.Errorf("kernel: schedule %q: group %q is not in Config.Groups", sc.Name(), sc.o.Group))
			return
		}
		if err := countWaiting(gd, sc.o.Key, 1); err != nil {
			k.releaseFor(lvl, evicts)
			k.schedRefuse(sc, f, err)
			return
		}
	}
	run := sc.run
	t := Task{
		Priority: prio, Timeout: sc.o.Timeout, Retry: sc.o.Retry,
		Run: func(ctx context.Context) error { return run(ctx, f) },
	}
	h := k.newRecord(&t, prio, rc, false)
	h.ext = &taskExt{gd: gd, key: sc.o.Key, counted: gd != nil && gd.counts != nil, sched: sc}
	h.evicts = evicts
	k.schedAddLive(sc, h)
	sc.pub.fires.Add(1)
	k.m.schedFires.Inc()
	sc.pub.last.Store(f.Scheduled.UnixNano())
	if k.events != nil {
		k.ls.evBuf = append(k.ls.evBuf, Event{Time: k.ls.now, Schedule: sc.Name(), Note: NoteFired, TaskID: h.ID(), Priority: prio})
	}
	k.accept(h)
}

// releaseFor gives back the ticket schedSubmit took: an evicted Low task's when
// evicts.
func (k *Kernel) releaseFor(lvl queue.Level, evicts bool) {
	if evicts {
		lvl = queue.Low
	}
	k.release(lvl, 1)
	k.ls.freed = true
}

// schedRefuse counts an occurrence the kernel had no room for. Loop only.
func (k *Kernel) schedRefuse(sc *Scheduled, f Fire, err error) {
	c := k.coldOf(sc)
	c.carried += 1 + f.Missed
	c.refused.Add(1)
	k.m.schedRefused.Inc()
	k.schedNote(sc, NoteRefused, err)
}
