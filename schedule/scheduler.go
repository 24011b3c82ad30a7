package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/timewheel"
	"github.com/benbjohnson/clock"
)

// Config configures a [Scheduler]. The zero Config is valid.
type Config struct {
	// Store keeps durable schedules ([Scheduler.AddDurable]): usually the kernel's
	// Config.Store, whose pool the occurrences' tasks go to. If nil, AddDurable
	// returns an error.
	Store store.ScheduleStore

	// StoreTimeout bounds each call to Store. If zero, 15 s.
	StoreTimeout time.Duration

	// Tick is the resolution of the scheduler's timers: a fire is rounded up to a
	// multiple of it. If zero, 1 ms.
	Tick time.Duration

	// Name labels the series of [Scheduler.WritePrometheus] (kernel="<Name>"); give it
	// the kernel's Config.Name to serve both on one page. At most 64 bytes of ASCII
	// letters, digits, '_', '-' and '.'. If empty, the series have no label.
	Name string
	// OnEvent, if set, receives the schedules' events (fires, skips, misfires,
	// refusals), one call at a time, in the order they happened, on the goroutine
	// that made them (the scheduler's, the kernel's OnEnd goroutine, or the caller
	// of an [Entry] method), after the scheduler's lock is released. It must not
	// block (the schedules it was called for wait) nor call the methods of its
	// scheduler or of its entries that fire (Add, AddDurable, Trigger, Update,
	// Resume, Stop). A panic in it is recovered. If nil, no events are made.
	OnEvent func(Event)
}

// Defaults of [Config].
const (
	storeTimeoutDefault = 15 * time.Second
	tickDefault         = time.Millisecond
)

// Validate returns nil for a valid Config, and otherwise a *kernel.ConfigError
// (joined) for each bad field.
func (c *Config) Validate() error {
	var errs []error
	if c.StoreTimeout < 0 {
		errs = append(errs, &kernel.ConfigError{Field: "schedule.Config.StoreTimeout", Value: c.StoreTimeout, Reason: "must be >= 0"})
	}
	if c.Tick < 0 {
		errs = append(errs, &kernel.ConfigError{Field: "schedule.Config.Tick", Value: c.Tick, Reason: "must be >= 0"})
	}
	if !validName(c.Name) {
		errs = append(errs, &kernel.ConfigError{Field: "schedule.Config.Name", Value: c.Name, Reason: "must be at most 64 bytes of ASCII letters, digits, '_', '-' and '.'"})
	}
	return errors.Join(errs...)
}

// Scheduler fires schedules into a kernel: at each target of a schedule it submits
// a task through the kernel's public API ([kernel.Kernel.TrySubmit]), and follows
// the task's end with [kernel.Task.OnEnd] to apply the overlap policies. It keeps
// every schedule's timer in one wheel served by one goroutine, and costs no
// goroutine per schedule. A durable schedule's occurrences go to the store's pool
// instead, where the kernel's claimer finds them ([kernel.Kernel.Poll]).
//
// A cron schedule's targets are wall-clock times and the timers run on the
// monotonic clock: the scheduler measures, at each pass and at least every max(1 s,
// 2 Config.Tick), how far the wall clock stepped against the monotonic one, and
// places the wall targets accordingly. A step of at least that much (an NTP step, a
// suspend and resume) re-places each wall-clock schedule's next target, noted as
// NoteClockStep: the targets a forward step skipped follow the misfire policy, and
// after a backward step no target fires twice. Every schedules ignore steps.
//
// A Scheduler is safe for concurrent use. It stops when [Scheduler.Stop] is called
// or when the kernel's Shutdown or Close begins ([kernel.Kernel.Stopping]):
// schedules fire no more, live occurrences go on in the kernel.
type Scheduler struct {
	k   *kernel.Kernel // immutable
	clk clock.Clock    // immutable: the kernel's
	cfg Config         // immutable, defaults applied

	mu       sync.Mutex
	wheel    *timewheel.Wheel[*Entry] // guarded by mu
	named    map[string]*Entry        // guarded by mu: the schedules given an Options.Name
	unnamed  []*Entry                 // guarded by mu: the others, by seq ascending; removed ones are dropped when they are half
	gone     int                      // guarded by mu: removed entries still in unnamed
	seq      uint64                   // guarded by mu: the last generated name's number
	deflt    *opts                    // guarded by mu: the options of the schedules whose options are all zero
	due      []*Entry                 // guarded by mu: the pass's due entries
	events   []Event                  // guarded by mu: made, not yet handed to OnEvent
	stopped  bool                     // guarded by mu
	removed  totals                   // guarded by mu: the counters of removed schedules
	skew     time.Duration            // guarded by mu: how far the wall clock moved from the monotonic one since the wheel's start (clockstep.go)
	seen     time.Time                // guarded by mu: the clock's time at the last pass
	seenWall time.Time                // guarded by mu: its wall-clock reading, without a monotonic one

	wallHook func(time.Time) time.Time // immutable: testWallHook

	emitMu sync.Mutex // serializes OnEvent

	wake   chan struct{} // size 1: an entry was armed from outside the goroutine
	stopCh chan struct{} // closed by Stop
	done   chan struct{} // closed when the goroutine returns
	stop   sync.Once

	fr *firer // nil without Config.Store
}

// New returns a scheduler bound to k, started. It returns the errors of
// [Config.Validate], and an error for a nil k.
func New(k *kernel.Kernel, cfg Config) (*Scheduler, error) {
	if k == nil {
		return nil, errors.New("schedule: New: nil kernel")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.StoreTimeout = cmp.Or(cfg.StoreTimeout, storeTimeoutDefault)
	cfg.Tick = cmp.Or(cfg.Tick, tickDefault)
	clk := k.Clock()
	now := clk.Now()
	w, err := timewheel.New[*Entry](cfg.Tick, now)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		k: k, clk: clk, cfg: cfg, wheel: w, seen: now, wallHook: testWallHook,
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), done: make(chan struct{}),
	}
	s.seenWall = s.wall(now).Round(0)
	if cfg.Store != nil {
		s.fr = newFirer(s)
	}
	go s.run()
	return s, nil
}

// Stop stops the scheduler: its schedules fire no more (their Next is zero), an
// occurrence waiting under OverlapQueueOne is dropped, and the live occurrences go
// on in the kernel. It waits for the scheduler's goroutines (a durable schedule's
// store call in progress included, StoreTimeout at most) and is idempotent. It
// must not be called from Config.OnEvent.
func (s *Scheduler) Stop() {
	s.stop.Do(func() { close(s.stopCh) })
	<-s.done
	if s.fr != nil {
		s.fr.wait()
	}
}

// run is the scheduler's goroutine: it fires the due schedules and sleeps until
// the next one, a change from outside, or the stop.
func (s *Scheduler) run() {
	defer close(s.done)
	t := s.clk.Timer(time.Hour)
	defer t.Stop()
	for {
		d, ok := s.pass()
		if !ok {
			return
		}
		t.Reset(d)
		select {
		case <-t.C:
		case <-s.wake:
		case <-s.stopCh:
			s.halt()
			return
		case <-s.k.Stopping():
			s.halt()
			return
		}
	}
}

// pass fires the due schedules and returns how long to sleep; ok = false when the
// scheduler stopped.
func (s *Scheduler) pass() (d time.Duration, ok bool) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return 0, false
	}
	now := s.clk.Now()
	s.clockStepped(now)
	s.wheel.Advance(now, func(e *Entry) { s.due = append(s.due, e) })
	for i, e := range s.due {
		s.due[i] = nil
		e.timer = timewheel.Handle[*Entry]{}
		s.onDue(e, s.frame(e, now))
	}
	s.due = s.due[:0]
	next, armed := s.wheel.Next()
	stopped := s.stopped
	s.unlockEmit()
	if stopped {
		return 0, false
	}
	if !armed {
		return time.Hour, true
	}
	// The clock is read again: a Spec's Next may have taken time. The sleep is at
	// most stepMin, to see a wall-clock step that soon (clockstep.go).
	return min(max(next.Sub(s.clk.Now()), 0), s.stepMin()), true
}

// halt stops every schedule.
func (s *Scheduler) halt() {
	s.mu.Lock()
	s.stopLocked()
	s.mu.Unlock()
	if s.fr != nil {
		s.fr.stop()
	}
}

// stopLocked marks the scheduler stopped. mu held.
func (s *Scheduler) stopLocked() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.wheel.Clear(func(e *Entry) { e.timer = timewheel.Handle[*Entry]{} })
}

// poke wakes the goroutine after an entry was armed from outside it.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// note records an event. mu held.
func (s *Scheduler) note(e *Entry, n Note, taskID string, err error) {
	if s.cfg.OnEvent == nil {
		return
	}
	s.events = append(s.events, Event{Time: s.clk.Now(), Schedule: e.Name(), Note: n, TaskID: taskID, Err: err})
}

// unlockEmit releases mu and hands the events made meanwhile to OnEvent.
func (s *Scheduler) unlockEmit() {
	evs := s.events
	s.events = nil
	if len(evs) == 0 {
		s.mu.Unlock()
		return
	}
	// emitMu is taken before mu is released, so that events reach OnEvent in the
	// order they were made.
	s.emitMu.Lock()
	s.mu.Unlock()
	defer s.emitMu.Unlock()
	for _, ev := range evs {
		func() {
			defer func() { _ = recover() }()
			s.cfg.OnEvent(ev)
		}()
	}
}

// Stats returns the figures of every live schedule, by name; nil if none. It
// takes the scheduler's lock.
func (s *Scheduler) Stats() map[string]Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.named) + len(s.unnamed) - s.gone
	if n == 0 {
		return nil
	}
	m := make(map[string]Stats, n)
	for name, e := range s.named {
		m[name] = e.statsLocked()
	}
	for _, e := range s.unnamed {
		if e.flags&flagRemoved == 0 {
			m[e.Name()] = e.statsLocked()
		}
	}
	return m
}

// namePrefix starts the generated schedule names.
const namePrefix = "schedule-"

func generatedName(seq uint64) string { return namePrefix + strconv.FormatUint(seq, 10) }

// register gives e its options (o, validated; dur for a durable schedule) and its
// name, and adds it to the registry: an error wrapping ErrExists when o.Name is
// taken. mu held.
func (s *Scheduler) register(e *Entry, o *Options, dur *durable) error {
	if o.Name != "" {
		if s.taken(o.Name) {
			return fmt.Errorf("%w: %q", ErrExists, o.Name)
		}
		e.o = &opts{s: s, dur: dur, Options: *o}
		if s.named == nil {
			s.named = make(map[string]*Entry)
		}
		s.named[o.Name] = e
		return nil
	}
	if *o == (Options{}) {
		if s.deflt == nil {
			s.deflt = &opts{s: s}
		}
		e.o = s.deflt
	} else {
		e.o = &opts{s: s, Options: *o}
	}
	for {
		s.seq++
		if _, ok := s.named[generatedName(s.seq)]; !ok {
			break
		}
	}
	e.seq = s.seq
	s.unnamed = append(s.unnamed, e)
	return nil
}

// Entry returns the live schedule named name (its Options.Name or the generated
// name), or nil when the scheduler has none: a removed schedule's name is free.
// It takes the scheduler's lock.
func (s *Scheduler) Entry(name string) *Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(name)
}

// taken reports whether a live schedule is named name. mu held.
func (s *Scheduler) taken(name string) bool { return s.lookup(name) != nil }

// lookup returns the live schedule named name, or nil. mu held.
func (s *Scheduler) lookup(name string) *Entry {
	if e, ok := s.named[name]; ok {
		return e
	}
	digits, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return nil
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || strconv.FormatUint(seq, 10) != digits {
		return nil
	}
	i, ok := slices.BinarySearchFunc(s.unnamed, seq, func(e *Entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !ok || s.unnamed[i].flags&flagRemoved != 0 {
		return nil
	}
	return s.unnamed[i]
}

// unregister takes the removed e out of the registry. mu held.
func (s *Scheduler) unregister(e *Entry) {
	s.removed.add(e.statsLocked())
	if e.seq == 0 {
		if s.named[e.o.Name] == e {
			delete(s.named, e.o.Name)
		}
		return
	}
	s.gone++
	if s.gone*2 <= len(s.unnamed) {
		return
	}
	live := s.unnamed[:0]
	for _, e := range s.unnamed {
		if e.flags&flagRemoved == 0 {
			live = append(live, e)
		}
	}
	clear(s.unnamed[len(live):])
	s.unnamed = live
	s.gone = 0
}

// validName reports whether name may label a metric series unescaped.
func validName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
