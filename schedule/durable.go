package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/internal/recur"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// A durable schedule (Scheduler.AddDurable) lives in Config.Store:
//
//   - Its times (targets, the occurrences' RunAt, a retry's or a paused poll's
//     notBefore) are on the store's clock: the kernel's clock plus
//     kernel.Kernel.StoreOffset (storeNow), so that a scheduler whose clock is off
//     fires neither early nor late. Its timer is armed on the kernel's clock, at
//     the store's time less the offset.
//
//   - The store keeps its next target. Every scheduler that adds the schedule under
//     the same name follows that stored time with one timer, as a schedule in
//     memory does; when it comes due, the scheduler computes the occurrences by the
//     misfire policy from it and hands a fire to its firer goroutine.
//   - The firer calls FireSchedule: a compare-and-set of the stored next time and,
//     when it matched, the insert of the occurrences as pool tasks, in one
//     transaction. Of the schedulers that try an occurrence, exactly one fires it;
//     the others get the stored schedule back and follow its next time.
//   - The occurrences are durable tasks in the store's pool: any kernel on the
//     store with a free slot claims and runs them (the firing scheduler calls
//     kernel.Kernel.Poll). A crash after the fire loses nothing.
//   - Pause and Resume are stored (PauseSchedule), so they apply to every scheduler.
//   - The firer handles one request at a time and applies each result under the
//     scheduler's lock.

// Delays of a durable schedule's store calls.
const (
	// retryMin and retryMax bound the delay before a failed fire is tried again; it
	// doubles on each failure.
	retryMin = 100 * time.Millisecond
	retryMax = 30 * time.Second
	// pausedPoll is how often a scheduler asks the store whether a schedule paused
	// there (by any scheduler) was resumed.
	pausedPoll = time.Second
	// refreshEvery is how long a scheduler goes at most without reading a durable
	// schedule it follows back from the store: another scheduler's Update, Delete or
	// Trigger shows within it.
	refreshEvery = 5 * time.Second
)

// durable is the durable part of a schedule made by AddDurable. Its fields but the
// immutable ones are guarded by the scheduler's mu.
type durable struct {
	kind    string // immutable
	payload []byte // immutable
	spec    string // immutable: the spec stored with it

	last      time.Time // the stored Last
	inflight  int       // requests handed to the firer and not answered
	notBefore time.Time // the next fire waits until then (a retry, a paused poll)
	backoff   time.Duration
	paused    bool // the store says paused
	refresh   bool // the armed timer is a refresh, not a due target
}

// AddDurable adds a durable schedule: its next target is kept in Config.Store, so
// that it survives restarts and, of several schedulers on the store (in one process
// or several) that add the same schedule, exactly one fires each occurrence, with
// no leader. Each occurrence is a durable task of kind with payload in the store's
// pool (the kernels that run it must have kind registered, see
// [kernel.Kernel.Register]) whose ID is [store.OccurrenceID] of the schedule and the
// target ([OccurrenceOf] reads it in the task's function); any kernel on the store
// with a free slot claims and runs it. A task's Fire.Missed is not stored: the
// misfires show in the firing scheduler's Stats and events.
//
// o.Name is required and names the schedule in the store
// ([store.CheckScheduleName]). When the store holds no schedule of that name, the
// first target is sp.Next(now); otherwise the scheduler follows the stored next
// target, and the targets that passed while no scheduler fired them follow
// o.Misfire when it comes due. When the stored spec differs from sp's (its String
// method, else its type), the next target becomes sp.Next(now).
//
// The options are those of [Scheduler.Add], with these differences:
//   - Overlap may be OverlapSkip (the default: no occurrence fires while the
//     previous one is live in the store, whichever kernel runs it) or OverlapAllow.
//   - RunOnStart fires one occurrence when this scheduler adds the schedule.
//   - Priority, Timeout, Group, Key and Retry.MaxAttempts are those of the
//     occurrences' tasks; the other fields of Retry are not stored and the kernel
//     that runs them applies its Config.Retry.
//
// [Entry.Pause] and [Entry.Resume] change the stored schedule, so that every
// scheduler following it pauses or resumes (the others within a second of a due
// target); Trigger and Update go to the store in the background, and a failure is
// reported as an event with NoteRefused. Remove stops this scheduler following it,
// and [Entry.Delete] deletes it from the store as well.
//
// Its targets are on the store's clock when the store tells its time
// ([store.Clock]): a scheduler whose clock is off fires each occurrence when the
// store's clock reaches the target, as the kernels' claims run it.
//
// AddDurable blocks until the store answered (Config.StoreTimeout at most). It
// returns a *kernel.ConfigError (joined) naming each bad field or argument, an error
// wrapping [ErrExists] when this scheduler follows a schedule of that name, the
// store's error, and [ErrStopped] once the scheduler stopped.
func (s *Scheduler) AddDurable(sp Spec, kind string, payload []byte, o *Options) (*Entry, error) {
	var op Options
	if o != nil {
		op = *o
	}
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &kernel.ConfigError{Field: field, Value: v, Reason: reason})
	}
	if sp == nil {
		bad("schedule.Scheduler.AddDurable: sp", nil, "must not be nil")
	}
	if s.fr == nil {
		errs = append(errs, errors.New("schedule: AddDurable: Config.Store is nil; durable schedules need a store"))
	}
	if kind == "" {
		bad("schedule.Scheduler.AddDurable: kind", kind, "must not be empty")
	}
	if op.Name == "" {
		bad("schedule.Options.Name", "", "is required for a durable schedule")
	} else if err := store.CheckScheduleName(op.Name); err != nil {
		bad("schedule.Options.Name", op.Name, strings.TrimPrefix(err.Error(), "store: schedule name "+strconv.Quote(op.Name)+": "))
	}
	switch op.Overlap {
	case OverlapQueueOne, OverlapReplace:
		bad("schedule.Options.Overlap", op.Overlap, "a durable schedule takes OverlapSkip or OverlapAllow")
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
	spec := specOf(sp)
	d := &durable{kind: kind, payload: append([]byte(nil), payload...), spec: spec}
	e := &Entry{spec: sp, flags: flagWall} // stored targets are wall-clock times
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, ErrStopped
	}
	err := s.register(e, &op, d)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}

	first, err := guardedNext(sp, s.storeNow())
	var stored store.StoredSchedule
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
		stored, _, err = s.cfg.Store.UpsertSchedule(ctx, store.StoredSchedule{Name: op.Name, Spec: spec, Next: first})
		cancel()
	}
	s.mu.Lock()
	if err == nil && s.stopped {
		err = ErrStopped
	}
	if err != nil {
		e.flags |= flagRemoved
		s.unregister(e)
		s.mu.Unlock()
		return nil, fmt.Errorf("schedule: AddDurable %q: %w", op.Name, err)
	}
	s.adopt(e, stored)
	if stored.Spec != spec {
		// Another spec was stored under this name: the schedule starts afresh.
		var next time.Time
		if s.guard(e, func() { next = sp.Next(s.storeNow()) }) {
			s.fr.send(e, reqMove, next, spec)
		}
	}
	if op.RunOnStart {
		s.fr.send(e, reqTrigger, time.Time{}, "")
	}
	s.arm(e)
	s.unlockEmit()
	s.poke()
	return e, nil
}

// specOf is the spec stored with sp: its String, else its type.
func specOf(sp Spec) string {
	spec := fmt.Sprintf("%T", sp)
	if st, ok := sp.(fmt.Stringer); ok {
		func() {
			defer func() { _ = recover() }()
			spec = st.String()
		}()
	}
	if len(spec) > store.ScheduleSpecMax {
		spec = spec[:store.ScheduleSpecMax]
	}
	return spec
}

// guardedNext calls sp.Next(t), turning a panic into an error.
func guardedNext(sp Spec, t time.Time) (next time.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the schedule's Next panicked: %v", r)
		}
	}()
	return sp.Next(t), nil
}

// Delete removes the schedule as [Entry.Remove] does and, for a durable schedule,
// deletes it from the store, so that no scheduler fires it any more (the others
// stop within a few seconds). The tasks of its occurrences stay. For a schedule in
// memory it is Remove. It returns the store's error.
func (e *Entry) Delete(ctx context.Context) error {
	e.Remove()
	if e.o.dur == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	_, err := e.o.s.cfg.Store.DeleteSchedule(ctx, e.o.Name)
	return err
}

// storePaused stores the paused flag of a durable schedule.
func (e *Entry) storePaused(paused bool) error {
	s := e.o.s
	s.mu.Lock()
	err := e.check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	if _, err := s.cfg.Store.PauseSchedule(ctx, e.o.Name, paused); err != nil {
		return fmt.Errorf("schedule: %q: %w", e.o.Name, err)
	}
	return nil
}

// OccurrenceOf returns the schedule name and the target of the occurrence whose
// task ctx belongs to (the ctx a durable schedule's task function gets), and ok =
// false for any other ctx.
func OccurrenceOf(ctx context.Context) (name string, target time.Time, ok bool) {
	info, ok := kernel.TaskInfo(ctx)
	if !ok {
		return "", time.Time{}, false
	}
	return store.ParseOccurrenceID(info.ID)
}

// adopt takes the stored schedule st as the truth. The firer answers requests in
// order, so st is the latest the scheduler read. mu held.
func (s *Scheduler) adopt(e *Entry, st store.StoredSchedule) {
	d := e.o.dur
	d.last = st.Last
	d.paused = st.Paused
	e.next = st.Next
	if d.paused {
		d.notBefore = s.storeNow().Add(pausedPoll)
		e.flags |= flagStorePaused
	} else {
		e.flags &^= flagStorePaused
	}
}

// armAt returns when e's timer is due, on the store's clock (now is the store's
// time): its next target, or later while a retry or a paused poll waits, or sooner
// to read the stored schedule back. mu held.
func (d *durable) armAt(e *Entry, now time.Time) time.Time {
	at := e.next
	if d.notBefore.After(at) {
		at = d.notBefore
	}
	refresh := now.Add(refreshEvery)
	d.refresh = at.After(refresh)
	if d.refresh {
		return refresh
	}
	return at
}

// reqKind is what a request to the firer does.
type reqKind uint8

const (
	reqDue     reqKind = iota + 1 // fire the due occurrences (the timer came due)
	reqTrigger                    // fire one occurrence now, keep the next time
	reqMove                       // store a new next time and spec (Update, a changed spec)
	reqRefresh                    // read the stored schedule back
)

// request is one store call of a durable schedule, made by the firer, and its
// result, which the firer applies under the scheduler's lock (stored).
type request struct {
	e    *Entry
	kind reqKind
	f    store.ScheduleFire
	res  recur.Result // reqDue: the misfire computation the fire applies
	skip time.Time    // OverlapSkip: fire no occurrence while that occurrence is live

	stored  store.StoredSchedule
	fired   bool
	skipped bool // the previous occurrence was live: the fire moved the next time only
	err     error
}

// firer makes the durable schedules' store calls, one at a time, on a goroutine of
// its own.
type firer struct {
	s     *Scheduler
	ss    store.ScheduleStore
	mu    sync.Mutex
	reqs  []*request // guarded by mu
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	close sync.Once
}

func newFirer(s *Scheduler) *firer {
	f := &firer{s: s, ss: s.cfg.Store, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *firer) stop() { f.close.Do(func() { close(f.quit) }) }

func (f *firer) wait() { f.stop(); <-f.done }

// due hands the fire of a durable schedule's due targets to the firer. s.mu held.
func (f *firer) due(e *Entry, res recur.Result) {
	f.push(e, reqDue, store.ScheduleFire{Next: res.Next}, res)
}

// send hands a trigger, a refresh or a move to next with spec to the firer. s.mu
// held.
func (f *firer) send(e *Entry, kind reqKind, next time.Time, spec string) {
	sf := store.ScheduleFire{Next: next, Spec: spec}
	f.push(e, kind, sf, recur.Result{})
}

// push builds and queues a request. s.mu held.
func (f *firer) push(e *Entry, kind reqKind, sf store.ScheduleFire, res recur.Result) {
	s := f.s
	if s.stopped {
		return
	}
	d := e.o.dur
	now := s.storeNow()
	sf.Name = e.o.Name
	sf.Expect = e.next
	switch kind {
	case reqDue:
		for _, fi := range res.Fires {
			sf.Occurrences = append(sf.Occurrences, occurrenceTask(e, fi.Scheduled, now))
		}
	case reqTrigger:
		sf.Next = sf.Expect
		sf.Occurrences = []store.Change{occurrenceTask(e, now, now)}
	}
	r := &request{e: e, kind: kind, f: sf, res: res}
	if kind == reqDue && len(sf.Occurrences) > 0 && e.o.Overlap != OverlapAllow {
		r.skip = d.last
	}
	d.inflight++
	s.disarm(e) // armed again with the answer
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// occurrenceTask returns the insert of e's occurrence due at target.
func occurrenceTask(e *Entry, target, now time.Time) store.Change {
	d := e.o.dur
	target = target.Truncate(time.Millisecond)
	prio := e.o.Priority
	if prio == kernel.PriorityDefault {
		prio = kernel.Normal
	}
	t := store.StoredTask{
		ID: store.OccurrenceID(e.o.Name, target), Kind: d.kind, Payload: d.payload, Priority: prio,
		RunAt: target, Timeout: e.o.Timeout, Fence: 1, Group: e.o.Group, Key: e.o.Key,
		State: store.Queued, CreatedAt: now, UpdatedAt: now,
	}
	if e.o.Retry != nil {
		t.MaxAttempts = e.o.Retry.MaxAttempts
	}
	if t.RunAt.After(now) {
		t.State = store.Delayed
	}
	return store.Change{Op: store.OpInsert, Task: t, Pool: true}
}

// run makes the requests' store calls in order and applies each result.
func (f *firer) run() {
	defer close(f.done)
	for {
		f.mu.Lock()
		var r *request
		if len(f.reqs) > 0 {
			r = f.reqs[0]
			f.reqs[0] = nil
			f.reqs = f.reqs[1:]
		}
		f.mu.Unlock()
		if r == nil {
			select {
			case <-f.quit:
				return
			case <-f.wake:
				continue
			}
		}
		f.call(r)
		f.stored(r)
	}
}

// call makes r's store calls. A trigger or a move that finds another next time
// stored tries again from it, a few times.
func (f *firer) call(r *request) {
	ctx, cancel := context.WithTimeout(context.Background(), f.s.cfg.StoreTimeout)
	defer cancel()
	name := r.e.o.Name
	if r.kind == reqRefresh {
		r.stored, r.err = f.ss.GetSchedule(ctx, name)
		return
	}
	if !r.skip.IsZero() {
		if sh, ok := f.ss.(store.SharedStore); ok {
			id := store.OccurrenceID(name, r.skip)
			ts, err := sh.States(ctx, []string{id})
			if err != nil {
				r.err = err
				return
			}
			for _, t := range ts {
				if t.ID == id && t.State.Live() {
					r.f.Occurrences, r.skipped = nil, true
				}
			}
		}
	}
	for try := 0; ; try++ {
		r.stored, r.fired, r.err = f.ss.FireSchedule(ctx, r.f)
		if r.err != nil || r.fired || r.stored.Paused || r.kind == reqDue || try == 2 {
			return
		}
		r.f.Expect = r.stored.Next
		if r.kind == reqTrigger {
			r.f.Next = r.stored.Next
		}
	}
}

// stored applies the result of r.
func (f *firer) stored(r *request) {
	s := f.s
	e := r.e
	d := e.o.dur
	s.mu.Lock()
	d.inflight--
	if e.flags&flagRemoved != 0 || s.stopped {
		s.mu.Unlock()
		return
	}
	if r.err != nil {
		s.outcome(e, OutcomeRefused, r.err)
		if errors.Is(r.err, store.ErrUnknownSchedule) {
			s.note(e, NoteRefused, "", r.err)
			e.next = time.Time{} // deleted from the store: it ended
			s.disarm(e)
			s.unlockEmit()
			return
		}
		d.backoff = min(max(2*d.backoff, retryMin), retryMax)
		d.notBefore = s.storeNow().Add(d.backoff)
		s.note(e, NoteRefused, "", r.err)
		if d.inflight == 0 {
			s.arm(e)
		}
		s.unlockEmit()
		s.poke()
		return
	}
	d.backoff = 0
	d.notBefore = time.Time{}
	fired := r.fired && len(r.f.Occurrences) > 0
	if r.fired {
		s.fired(e, r)
	}
	s.adopt(e, r.stored)
	if d.inflight == 0 {
		s.arm(e)
	}
	s.unlockEmit()
	s.poke()
	if fired {
		s.k.Poll()
	}
}

// fired counts the fire r made. mu held.
func (s *Scheduler) fired(e *Entry, r *request) {
	if r.kind == reqDue {
		res := r.res
		if e.cold != nil || res.Carried != 0 {
			coldOf(e).carried = res.Carried
		}
		if res.Missed > 0 {
			coldOf(e).misfires += uint64(res.Missed)
			s.outcome(e, OutcomeMisfired, nil)
			s.note(e, NoteMisfired, "", nil)
		}
		if r.skipped {
			for _, f := range res.Fires {
				s.skip(e, Fire(f))
			}
		}
	}
	for _, c := range r.f.Occurrences {
		e.fires++
		e.last = c.Task.RunAt.UnixNano()
		s.outcome(e, OutcomeSubmitted, nil)
		s.note(e, NoteFired, c.Task.ID, nil)
	}
}

// storeNow returns the time on the store's clock, as the kernel tells it: a durable
// schedule's times are on it.
func (s *Scheduler) storeNow() time.Time { return s.clk.Now().Add(s.k.StoreOffset()) }
