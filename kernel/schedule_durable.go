package kernel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/internal/recur"
	"github.com/axsched/ax/store"
)

// A durable schedule (Kernel.ScheduleDurable) lives in the kernel's ScheduleStore:
//
//   - The store keeps its next target. Every kernel that adds the schedule under the
//     same name follows that stored time with one wheel entry, as an in-memory
//     schedule does; when it comes due, the loop computes the occurrences by the
//     misfire policy from it and hands a fire to the owner's firer goroutine.
//   - The firer calls FireSchedule: a compare-and-set of the stored next time and,
//     when it matched, the insert of the occurrences as pool tasks, in one
//     transaction. Of the kernels that try an occurrence, exactly one fires it; the
//     others get the stored schedule back and follow its next time.
//   - The occurrences are durable tasks in the store's pool: any kernel on the store
//     with a free slot claims and runs them (the firing kernel wakes its claimer). A
//     crash after the fire loses nothing: the tasks are stored.
//   - Pause and Resume are stored (PauseSchedule), so they apply to every kernel.
//   - Only the loop changes the schedule's state; the firer handles one request at a
//     time and reports each result back (ctrlSchedStored).

// Delays of a durable schedule's store calls.
const (
	// schedRetryMin and schedRetryMax bound the delay before a failed fire is tried
	// again; it doubles on each failure.
	schedRetryMin = 100 * time.Millisecond
	schedRetryMax = 30 * time.Second
	// schedPausedPoll is how often a kernel asks the store whether a schedule paused
	// there (by any kernel) was resumed.
	schedPausedPoll = time.Second
	// schedRefresh is how long a kernel goes at most without reading a durable
	// schedule it follows back from the store: another kernel's Update, Delete or
	// Trigger shows within it.
	schedRefresh = 5 * time.Second
)

// schedDur is the durable part of a schedule made by ScheduleDurable.
type schedDur struct {
	kind    string              // immutable
	payload []byte              // immutable
	store   store.ScheduleStore // immutable
	spec    string              // immutable: the spec stored with it

	stored store.StoredSchedule // ScheduleDurable's UpsertSchedule; read by the loop's schedAdd

	// Loop-owned.
	last      time.Time // its Last
	inflight  int       // requests handed to the firer and not answered
	notBefore time.Time // the next fire waits until then (a retry, a paused poll)
	backoff   time.Duration
	paused    bool // the store says paused
	refresh   bool // the wheel entry is a refresh, not a due target
}

// schedReqKind is what a request to the firer does.
type schedReqKind uint8

const (
	schedReqDue     schedReqKind = iota + 1 // fire the due occurrences (the wheel entry came due)
	schedReqTrigger                         // fire one occurrence now, keep the next time
	schedReqMove                            // store a new next time and spec (Update, a changed spec)
	schedReqRefresh                         // read the stored schedule back
)

// schedReq is one store call of a durable schedule, made by the firer, and its
// result, which the loop applies (schedStored).
type schedReq struct {
	sc   *Scheduled
	kind schedReqKind
	f    store.ScheduleFire
	res  recur.Result // schedReqDue: the misfire computation the fire applies
	skip time.Time    // OverlapSkip: fire no occurrence while that occurrence is live

	// Results, written by the firer.
	stored  store.StoredSchedule
	fired   bool
	skipped bool // the previous occurrence was live: the fire moved the next time only
	err     error
}

// schedFirer is the owner's queue of requests to the firer goroutine.
type schedFirer struct {
	store store.ScheduleStore // nil when the store is not a ScheduleStore
	reqs  reqQueue
}

// ScheduleDurable adds a durable schedule: its next target is kept in the kernel's
// store, which must be a [store.ScheduleStore] and a [store.SharedStore] (storekit.MemoryStore and
// mysqlstore.Store are both), so that it survives restarts and, of several kernels
// on the store that add the same schedule, exactly one fires each occurrence, with no
// leader. Each occurrence is a durable task of kind with payload (the kind must be
// registered, see [Kernel.Register]) whose ID is [store.OccurrenceID] of the schedule and
// the target ([OccurrenceOf] reads it in the task's function); it is stored in the
// store's pool, where any kernel with a free slot claims and runs it. A task's
// Fire.Missed is not stored: the misfires show in the firing kernel's
// ScheduleStats and events.
//
// o.Name is required and names the schedule in the store ([store.CheckScheduleName]). When
// the store holds no schedule of that name, the first target is s.Next(now);
// otherwise the kernel follows the stored next target, and the targets that passed
// while no kernel fired them follow o.Misfire when it comes due (a kernel starting
// after a stop catches up by its misfire policy). When the stored spec differs from
// s's (its String method, else its type), the next target becomes s.Next(now).
//
// The options are those of [Kernel.Schedule], with these differences:
//   - Overlap may be OverlapSkip (the default: no occurrence fires while the previous
//     one is live in the store, whichever kernel runs it) or OverlapAllow;
//     OverlapQueueOne and OverlapReplace are refused.
//   - RunOnStart fires one occurrence when this kernel adds the schedule; each kernel
//     that adds it with RunOnStart does.
//   - Priority, Timeout, Group, Key and Retry.MaxAttempts are those of the
//     occurrences' tasks (DurableTask's fields); the other fields of Retry are not
//     stored and the kernel that runs them applies its Config.Retry.
//
// [Scheduled.Pause] and [Scheduled.Resume] change the stored schedule, so that every
// kernel following it pauses or resumes (the others within a second of a due target);
// Trigger and Update go to the store in the background, and a failure is logged and
// reported as an event with NoteRefused (while the schedule is paused in the store,
// they change nothing: the store fires no occurrence of a paused schedule); Remove stops this kernel following it, and
// [Scheduled.Delete] deletes it from the store as well.
//
// ScheduleDurable blocks until the store answered (Config.StoreTimeout at most) and the
// loop added the schedule. It returns a *ConfigError (joined) naming each bad field or
// argument, an error wrapping [ErrScheduleExists] when this kernel follows a schedule
// of that name, the store's error, and [ErrClosed] after Shutdown or Close began.
func (k *Kernel) ScheduleDurable(s Schedule, kind string, payload []byte, o *ScheduleOptions) (*Scheduled, error) {
	var opts ScheduleOptions
	if o != nil {
		opts = *o
	}
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &ConfigError{Field: field, Value: v, Reason: reason})
	}
	if s == nil {
		bad("ScheduleDurable: s", nil, "must not be nil")
	}
	var ss store.ScheduleStore
	if k.dur == nil {
		errs = append(errs, errors.New("kernel: ScheduleDurable: Config.Store is nil; durable schedules need a store"))
	} else if ss = k.dur.own.scheduleStore(); ss == nil {
		errs = append(errs, fmt.Errorf("kernel: ScheduleDurable: Config.Store (%T) is not a ScheduleStore and a SharedStore", k.rc.Load().cfg.Store))
	}
	if k.dur != nil {
		k.dur.mu.Lock()
		_, ok := k.dur.kinds[kind]
		k.dur.mu.Unlock()
		if !ok {
			bad("ScheduleDurable: kind", kind, "is not registered (Kernel.Register)")
		}
		if m := k.dur.maxBytes; m > 0 && len(payload) > m {
			errs = append(errs, fmt.Errorf("kernel: ScheduleDurable: payload of %d bytes, the store's cap is %d: %w", len(payload), m, store.ErrPayloadTooLarge))
		}
	}
	if opts.Name == "" {
		bad("ScheduleOptions.Name", "", "is required for a durable schedule")
	} else if err := store.CheckScheduleName(opts.Name); err != nil {
		bad("ScheduleOptions.Name", opts.Name, strings.TrimPrefix(err.Error(), "store: schedule name "+strconv.Quote(opts.Name)+": "))
	}
	switch opts.Overlap {
	case OverlapQueueOne, OverlapReplace:
		bad("ScheduleOptions.Overlap", opts.Overlap, "a durable schedule takes OverlapSkip or OverlapAllow")
	}
	if err := k.scheduleReady(errs, &opts); err != nil {
		return nil, err
	}
	spec := specOf(s)
	d := &schedDur{kind: kind, payload: append([]byte(nil), payload...), store: ss, spec: spec}
	sc := &Scheduled{}
	sc.ls.s = s
	if err := k.register(sc, &opts, d); err != nil {
		return nil, err
	}

	first, err := guardedNext(s, k.clk.Now())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), k.dur.j.timeout)
		d.stored, err = storeCall(k, "UpsertSchedule", func() (store.StoredSchedule, error) {
			st, _, err := ss.UpsertSchedule(ctx, store.StoredSchedule{Name: opts.Name, Spec: spec, Next: first})
			return st, err
		})
		cancel()
	}
	if err != nil {
		k.unregister(sc)
		return nil, fmt.Errorf("kernel: ScheduleDurable %q: %w", opts.Name, err)
	}
	k.m.schedUsed.Store(true)
	if err := k.schedCtrl(sc, schedAdd, nil); err != nil {
		k.unregister(sc)
		return nil, err
	}
	return sc, nil
}

// specOf is the spec stored with s: its String, else its type.
func specOf(s Schedule) string {
	spec := fmt.Sprintf("%T", s)
	if st, ok := s.(fmt.Stringer); ok {
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

// guardedNext calls s.Next(t) outside the loop, turning a panic into an error.
func guardedNext(s Schedule, t time.Time) (next time.Time, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the schedule's Next panicked: %v", r)
		}
	}()
	return s.Next(t), nil
}

// Delete removes the schedule as [Scheduled.Remove] does and, for a durable schedule,
// deletes it from the store, so that no kernel fires it any more (the others stop
// within a second of their next target). The tasks of its occurrences stay.
// For a schedule in memory it is Remove.
func (sc *Scheduled) Delete(ctx context.Context) error {
	sc.Remove()
	if sc.o.dur == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	_, err := storeCall(sc.o.k, "DeleteSchedule", func() (bool, error) { return sc.o.dur.store.DeleteSchedule(ctx, sc.o.Name) })
	return err
}

// durableCheck returns the error a change of a removed or stopped durable schedule
// gets, before its store call.
func (sc *Scheduled) durableCheck() error {
	if sc.o.k.isClosed() {
		return ErrClosed
	}
	sc.o.k.schedMu.Lock()
	defer sc.o.k.schedMu.Unlock()
	if sc.o.k.scheds[sc.o.Name] != sc {
		return ErrScheduleRemoved
	}
	return nil
}

// setStorePaused stores the paused flag of a durable schedule.
func (sc *Scheduled) setStorePaused(paused bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), sc.o.k.dur.j.timeout)
	defer cancel()
	_, err := storeCall(sc.o.k, "PauseSchedule", func() (store.StoredSchedule, error) {
		return sc.o.dur.store.PauseSchedule(ctx, sc.o.Name, paused)
	})
	if err != nil {
		return fmt.Errorf("kernel: schedule %q: %w", sc.o.Name, err)
	}
	return nil
}

// OccurrenceOf returns the schedule name and the target of the occurrence whose task
// ctx belongs to (the ctx a durable schedule's task function gets), and ok = false
// for any other ctx.
func OccurrenceOf(ctx context.Context) (name string, target time.Time, ok bool) {
	info, ok := TaskInfo(ctx)
	if !ok {
		return "", time.Time{}, false
	}
	return store.ParseOccurrenceID(info.ID)
}

// schedDurAdd starts following a durable schedule the caller upserted. Loop only.
func (k *Kernel) schedDurAdd(sc *Scheduled) {
	d := sc.o.dur
	k.schedAdopt(sc, d.stored)
	if d.stored.Spec != d.spec {
		// Another spec was stored under this name: the schedule starts afresh.
		var next time.Time
		if !k.schedGuard(sc, func() { next = sc.ls.s.Next(k.ls.now) }) {
			return
		}
		k.schedSend(sc, schedReqMove, store.ScheduleFire{Next: next, Spec: d.spec}, recur.Result{})
	}
	if sc.o.RunOnStart {
		k.schedSend(sc, schedReqTrigger, store.ScheduleFire{}, recur.Result{})
	}
	k.schedArm(sc)
}

// schedAdopt takes the stored schedule st as the truth. The firer answers requests
// in order, so st is the latest the kernel read. Loop only.
func (k *Kernel) schedAdopt(sc *Scheduled, st store.StoredSchedule) {
	d := sc.o.dur
	d.last = st.Last
	d.paused = st.Paused
	k.schedSetNext(sc, st.Next)
	if d.paused {
		d.notBefore = k.ls.now.Add(schedPausedPoll)
		sc.setFlags(schedStorePaused, 0)
	} else {
		sc.setFlags(0, schedStorePaused)
	}
}

// schedDurDue hands the fire of a durable schedule's due targets to the firer.
// Loop only.
func (k *Kernel) schedDurDue(sc *Scheduled, res recur.Result) {
	k.schedSend(sc, schedReqDue, store.ScheduleFire{Next: res.Next}, res)
}

// schedSend hands a request to the firer. Loop only.
func (k *Kernel) schedSend(sc *Scheduled, kind schedReqKind, f store.ScheduleFire, res recur.Result) {
	if k.ls.draining || k.ls.closing {
		return
	}
	d := sc.o.dur
	now := k.ls.now
	f.Name = sc.o.Name
	f.Expect = k.schedNext(sc)
	switch kind {
	case schedReqDue:
		for _, fi := range res.Fires {
			f.Occurrences = append(f.Occurrences, k.occurrence(sc, fi.Scheduled, now))
		}
	case schedReqTrigger:
		f.Next = f.Expect
		f.Occurrences = []store.Change{k.occurrence(sc, now, now)}
	}
	r := &schedReq{sc: sc, kind: kind, f: f, res: res}
	if kind == schedReqDue && len(f.Occurrences) > 0 && sc.o.Overlap != OverlapAllow {
		r.skip = d.last
	}
	d.inflight++
	k.dur.own.fires.reqs.push(r)
}

// occurrence returns the insert of sc's occurrence due at target. Loop only.
func (k *Kernel) occurrence(sc *Scheduled, target, now time.Time) store.Change {
	d := sc.o.dur
	target = target.Truncate(time.Millisecond)
	t := store.StoredTask{
		ID: store.OccurrenceID(sc.o.Name, target), Kind: d.kind, Payload: d.payload, Priority: normPriority(sc.o.Priority),
		RunAt: target, Timeout: sc.o.Timeout, Fence: 1, Group: sc.o.Group, Key: sc.o.Key,
		State: Queued, CreatedAt: now, UpdatedAt: now,
	}
	if sc.o.Retry != nil {
		t.MaxAttempts = sc.o.Retry.MaxAttempts
	}
	if t.RunAt.After(now) {
		t.State = Delayed
	}
	return store.Change{Op: store.OpInsert, Task: t, Pool: true}
}

// runFirer runs the durable schedules' store calls, one at a time, and reports each
// result to the loop.
func (o *ownership) runFirer() {
	k := o.k
	for {
		r, ok := o.fires.reqs.pop(o.stopCh)
		if !ok {
			return
		}
		o.fire(r)
		k.control(ctrlMsg{kind: ctrlSchedStored, schedReq: r})
	}
}

// fire makes r's store calls. A trigger or a move that finds another next time
// stored tries again from it, a few times.
func (o *ownership) fire(r *schedReq) {
	k := o.k
	ss := r.sc.o.dur.store
	ctx, cancel := context.WithTimeout(context.Background(), k.dur.j.timeout)
	defer cancel()
	if r.kind == schedReqRefresh {
		r.stored, r.err = storeCall(k, "GetSchedule", func() (store.StoredSchedule, error) { return ss.GetSchedule(ctx, r.sc.o.Name) })
		return
	}
	if !r.skip.IsZero() {
		id := store.OccurrenceID(r.sc.o.Name, r.skip)
		ts, err := storeCall(k, "States", func() ([]store.StoredTask, error) { return o.store.States(ctx, []string{id}) })
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
	for try := 0; ; try++ {
		r.stored, r.err = storeCall(k, "FireSchedule", func() (store.StoredSchedule, error) {
			st, fired, err := ss.FireSchedule(ctx, r.f)
			r.fired = fired
			return st, err
		})
		if r.err != nil || r.fired || r.stored.Paused || r.kind == schedReqDue || try == 2 {
			return
		}
		r.f.Expect = r.stored.Next
		if r.kind == schedReqTrigger {
			r.f.Next = r.stored.Next
		}
	}
}

// schedStored applies the result of a durable schedule's request. Loop only.
func (k *Kernel) schedStored(r *schedReq) {
	sc := r.sc
	d := sc.o.dur
	d.inflight--
	if sc.ls.flags.Load()&schedRemoved != 0 || k.ls.draining || k.ls.closing {
		return
	}
	if r.err != nil {
		if errors.Is(r.err, store.ErrUnknownSchedule) {
			k.log.warn("kernel: a durable schedule was deleted from the store: it ended", "schedule", sc.o.Name)
			k.schedNote(sc, NoteRefused, r.err)
			k.schedSetNext(sc, time.Time{})
			k.schedArm(sc) // ends it
			return
		}
		d.backoff = min(max(2*d.backoff, schedRetryMin), schedRetryMax)
		d.notBefore = k.ls.now.Add(d.backoff)
		k.log.warn("kernel: a durable schedule's store call failed", "schedule", sc.o.Name, "retry_in", d.backoff, "err", r.err)
		k.schedNote(sc, NoteRefused, r.err)
		if d.inflight == 0 {
			k.schedArm(sc)
		}
		return
	}
	d.backoff = 0
	d.notBefore = time.Time{}
	if r.fired {
		k.schedFired(sc, r)
	}
	k.schedAdopt(sc, r.stored)
	if d.inflight == 0 {
		k.schedArm(sc)
	}
}

// schedFired counts the fire r made and wakes the claimer for its occurrences.
// Loop only.
func (k *Kernel) schedFired(sc *Scheduled, r *schedReq) {
	if r.kind == schedReqDue {
		res := r.res
		if c := sc.cold.Load(); c != nil || res.Carried != 0 {
			k.coldOf(sc).carried = res.Carried
		}
		if res.Missed > 0 {
			k.coldOf(sc).misfires.Add(uint64(res.Missed))
			k.m.schedMisfires.AddInt64(int64(res.Missed))
			k.schedNote(sc, NoteMisfired, nil)
		}
		if r.skipped {
			for _, f := range res.Fires {
				k.schedSkip(sc, Fire(f))
			}
		}
	}
	for _, c := range r.f.Occurrences {
		sc.pub.fires.Add(1)
		k.m.schedFires.Inc()
		sc.pub.last.Store(c.Task.RunAt.UnixNano())
		if k.events != nil {
			k.ls.evBuf = append(k.ls.evBuf, Event{Time: k.ls.now, Schedule: sc.o.Name, Note: NoteFired, TaskID: c.Task.ID, Priority: c.Task.Priority})
		}
	}
	if len(r.f.Occurrences) > 0 {
		k.Poll()
	}
}

// schedDurArmAt returns when sc's wheel entry is due: its next target, or later
// while a retry or a paused poll waits, or sooner to read the stored schedule back
// (schedRefresh). Loop only.
func (k *Kernel) schedDurArmAt(sc *Scheduled) time.Time {
	at := maxTime(k.schedNext(sc), sc.o.dur.notBefore)
	refresh := k.ls.now.Add(schedRefresh)
	sc.o.dur.refresh = at.After(refresh)
	if sc.o.dur.refresh {
		return refresh
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// scheduleStore returns the store as a ScheduleStore, nil when it is none or o is nil.
func (o *ownership) scheduleStore() store.ScheduleStore {
	if o == nil {
		return nil
	}
	return o.fires.store
}

// startFirer starts the firer goroutine when the store keeps schedules.
func (o *ownership) startFirer() {
	if ss, ok := o.store.(store.ScheduleStore); ok {
		o.fires.store = ss
		o.fires.reqs.init()
		o.wg.Go(o.runFirer)
	}
}

// reqQueue is the firer's queue: the loop pushes without blocking, the firer pops.
type reqQueue struct {
	mu   sync.Mutex
	reqs []*schedReq
	wake chan struct{} // size 1
}

func (q *reqQueue) init() { q.wake = make(chan struct{}, 1) }

func (q *reqQueue) push(r *schedReq) {
	q.mu.Lock()
	q.reqs = append(q.reqs, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop returns the oldest request, waiting for one; ok = false once stop is closed.
func (q *reqQueue) pop(stop <-chan struct{}) (r *schedReq, ok bool) {
	for {
		q.mu.Lock()
		if len(q.reqs) > 0 {
			r = q.reqs[0]
			q.reqs[0] = nil
			q.reqs = q.reqs[1:]
			q.mu.Unlock()
			return r, true
		}
		q.mu.Unlock()
		select {
		case <-stop:
			return nil, false
		case <-q.wake:
		}
	}
}
