package kernel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/internal/recur"
	"github.com/axsched/ax/timewheel"
)

// setFlags sets the bits set and clears the bits clear of sc's flags. Loop only: the
// loop is their one writer.
func (sc *Scheduled) setFlags(set, clear uint32) {
	sc.ls.flags.Store(sc.ls.flags.Load()&^clear | set)
}

// coldOf returns sc's cold state, made at the first call. Loop only.
func (k *Kernel) coldOf(sc *Scheduled) *schedCold {
	if c := sc.cold.Load(); c != nil {
		return c
	}
	c := &schedCold{}
	sc.cold.Store(c)
	return c
}

// anyLive reports whether an occurrence of sc has not ended. It drops those that
// ended without the loop (settlesItself). Loop only.
func (sc *Scheduled) anyLive() bool {
	if h := sc.ls.live1.Load(); h != nil {
		if !State(h.state.Load()).Terminal() {
			return true
		}
		sc.ls.live1.CompareAndSwap(h, nil)
	}
	c := sc.cold.Load()
	if c == nil || len(c.live) == 0 {
		return false
	}
	c.live = slices.DeleteFunc(c.live, func(h *Handle) bool { return State(h.state.Load()).Terminal() })
	return len(c.live) > 0
}

// schedAddLive adds h to sc's live occurrences, the newest. Loop only.
func (k *Kernel) schedAddLive(sc *Scheduled, h *Handle) {
	if !sc.anyLive() {
		sc.ls.live1.Store(h)
		return
	}
	c := k.coldOf(sc)
	if h1 := sc.ls.live1.Swap(nil); h1 != nil {
		c.live = append(c.live, h1)
	}
	c.live = append(c.live, h)
}

// schedEnded is called when an occurrence of sc ends: it submits the one waiting
// under OverlapQueueOne. Loop only.
func (k *Kernel) schedEnded(sc *Scheduled, h *Handle) {
	if c := sc.cold.Load(); !sc.ls.live1.CompareAndSwap(h, nil) && c != nil {
		if i := slices.Index(c.live, h); i >= 0 {
			c.live = slices.Delete(c.live, i, i+1) // zeroes the freed tail
		}
	}
	if sc.ls.flags.Load()&(schedQueued|schedRemoved) == schedQueued && !sc.anyLive() {
		// An occurrence ends in the midst of the loop's other work (the gate's, a
		// bucket's): the waiting one is submitted from a clean point (schedRunQueued).
		k.ls.sched.ready = append(k.ls.sched.ready, sc)
	}
}

// schedRunQueued submits the occurrences that waited under OverlapQueueOne behind
// ones that ended this pass. Loop only.
func (k *Kernel) schedRunQueued() {
	ready := k.ls.sched.ready
	k.ls.sched.ready = nil
	for _, sc := range ready {
		if sc.ls.flags.Load()&(schedQueued|schedRemoved) == schedQueued && !sc.anyLive() {
			sc.setFlags(0, schedQueued)
			k.schedFire(sc, sc.cold.Load().queuedF)
		}
	}
}

// schedSetNext makes t sc's first target not fired, and publishes it; the zero t ends
// the schedule. The target is kept as its unix ns (pub.next) when the time rebuilt from
// them is t exactly, representation included (location and monotonic reading): a time
// the kernel's clock made (an Every schedule's) or a cron schedule's. Another is kept
// whole in the cold state. Loop only.
func (k *Kernel) schedSetNext(sc *Scheduled, t time.Time) {
	const modes = schedEnded | schedNextMono | schedNextWall
	if t.IsZero() {
		sc.pub.next.Store(0)
		sc.setFlags(schedEnded, modes)
		return
	}
	ns := t.UnixNano()
	var mode uint32
	if sameTime(t, k.epoch.Add(time.Duration(ns-k.epoch.UnixNano()))) {
		mode = schedNextMono
	} else if cs, ok := sc.ls.s.(*recur.Cron); ok && sameTime(t, time.Unix(0, ns).In(cs.Location())) {
		mode = schedNextWall
	} else {
		k.coldOf(sc).next = t
	}
	sc.pub.next.Store(ns)
	sc.setFlags(mode, modes)
}

// schedNext returns sc's first target not fired (schedSetNext), or the zero Time when
// the schedule ended. Loop only.
func (k *Kernel) schedNext(sc *Scheduled) time.Time {
	f := sc.ls.flags.Load()
	switch {
	case f&schedEnded != 0:
		return time.Time{}
	case f&schedNextMono != 0:
		return k.epoch.Add(time.Duration(sc.pub.next.Load() - k.epoch.UnixNano()))
	case f&schedNextWall != 0:
		return time.Unix(0, sc.pub.next.Load()).In(sc.ls.s.(*recur.Cron).Location())
	}
	if c := sc.cold.Load(); c != nil {
		return c.next
	}
	return time.Time{}
}

// sameTime reports whether a and b are the same representation: instant, location
// and monotonic reading.
func sameTime(a, b time.Time) bool { return a == b } //nolint:staticcheck // comparing representations, not instants

// schedNamePrefix starts the generated schedule names.
const schedNamePrefix = "schedule-"

func generatedName(seq uint64) string { return schedNamePrefix + strconv.FormatUint(seq, 10) }

// schedRegistry is the Kernel's table of live schedules by name.
type schedRegistry struct {
	schedMu sync.Mutex
	scheds  map[string]*Scheduled // guarded by schedMu: the schedules given a ScheduleOptions.Name
	// unnamed holds the other schedules, by seq ascending; those whose bit of
	// unnamedGone is set were removed, and are dropped when they are half of them.
	unnamed      []*Scheduled // guarded by schedMu
	unnamedGone  []uint64     // guarded by schedMu
	goneCount    int          // guarded by schedMu: the bits set in unnamedGone
	schedSeq     uint64       // guarded by schedMu: the last generated name's number
	schedDefault *schedOpts   // guarded by schedMu: the options of the schedules whose options are all zero
}

// register gives sc its options (o, validated; dur for a durable schedule) and its
// name, and adds it to the registry: an error wrapping ErrScheduleExists when o.Name
// is taken.
func (k *Kernel) register(sc *Scheduled, o *ScheduleOptions, dur *schedDur) error {
	k.schedMu.Lock()
	defer k.schedMu.Unlock()
	if o.Name != "" {
		if k.schedTaken(o.Name) {
			return fmt.Errorf("%w: %q", ErrScheduleExists, o.Name)
		}
		sc.o = &schedOpts{k: k, dur: dur, ScheduleOptions: *o}
		if k.scheds == nil {
			k.scheds = make(map[string]*Scheduled)
		}
		k.scheds[o.Name] = sc
		return nil
	}
	if *o == (ScheduleOptions{}) {
		if k.schedDefault == nil {
			k.schedDefault = &schedOpts{k: k}
		}
		sc.o = k.schedDefault
	} else {
		sc.o = &schedOpts{k: k, ScheduleOptions: *o}
	}
	var buf [len(schedNamePrefix) + 20]byte
	for {
		k.schedSeq++
		name := strconv.AppendUint(append(buf[:0], schedNamePrefix...), k.schedSeq, 10)
		if _, ok := k.scheds[string(name)]; !ok {
			break
		}
	}
	sc.seq = k.schedSeq
	k.unnamed = append(k.unnamed, sc)
	if i := len(k.unnamed) - 1; i/64 == len(k.unnamedGone) {
		k.unnamedGone = append(k.unnamedGone, 0)
	}
	return nil
}

// schedTaken reports whether a live schedule is named name. schedMu held.
func (k *Kernel) schedTaken(name string) bool {
	if _, ok := k.scheds[name]; ok {
		return true
	}
	digits, ok := strings.CutPrefix(name, schedNamePrefix)
	if !ok {
		return false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || strconv.FormatUint(seq, 10) != digits {
		return false
	}
	_, ok = k.unnamedAt(seq)
	return ok
}

// unnamedAt returns the index in unnamed of the live schedule of generated number
// seq. schedMu held.
func (k *Kernel) unnamedAt(seq uint64) (int, bool) {
	i, ok := slices.BinarySearchFunc(k.unnamed, seq, func(sc *Scheduled, seq uint64) int {
		switch {
		case sc.seq < seq:
			return -1
		case sc.seq > seq:
			return 1
		}
		return 0
	})
	if !ok || k.unnamedGone[i/64]&(1<<(i%64)) != 0 {
		return 0, false
	}
	return i, true
}

func (k *Kernel) unregister(sc *Scheduled) {
	k.schedMu.Lock()
	defer k.schedMu.Unlock()
	if sc.seq == 0 {
		if k.scheds[sc.o.Name] == sc {
			delete(k.scheds, sc.o.Name)
		}
		return
	}
	i, ok := k.unnamedAt(sc.seq)
	if !ok {
		return // Remove is idempotent
	}
	k.unnamedGone[i/64] |= 1 << (i % 64)
	k.goneCount++
	if k.goneCount*2 <= len(k.unnamed) {
		return
	}
	live := k.unnamed[:0]
	for i, sc := range k.unnamed {
		if k.unnamedGone[i/64]&(1<<(i%64)) == 0 {
			live = append(live, sc)
		}
	}
	clear(k.unnamed[len(live):])
	k.unnamed = live
	k.unnamedGone = make([]uint64, (len(live)+63)/64)
	k.goneCount = 0
}

// schedCount returns the number of live schedules. schedMu held.
func (k *Kernel) schedCount() int { return len(k.scheds) + len(k.unnamed) - k.goneCount }

// scheduleStats returns the figures of every schedule, by name; nil if none.
func (k *Kernel) scheduleStats() map[string]ScheduleStats {
	k.schedMu.Lock()
	defer k.schedMu.Unlock()
	n := k.schedCount()
	if n == 0 {
		return nil
	}
	m := make(map[string]ScheduleStats, n)
	for name, sc := range k.scheds {
		m[name] = sc.Stats()
	}
	for i, sc := range k.unnamed {
		if k.unnamedGone[i/64]&(1<<(i%64)) == 0 {
			m[generatedName(sc.seq)] = sc.Stats()
		}
	}
	return m
}

// schedStop stops every schedule: Shutdown or Close began. Loop only.
func (k *Kernel) schedStop() {
	for _, sc := range k.ls.sched.slots {
		if sc != nil {
			sc.setFlags(schedStopped, schedQueued)
			sc.ls.slot, sc.ls.timer = 0, timewheel.Handle[timerEntry]{}
		}
	}
	// The wheel entries are gone (the stop cleared the wheel): forget the slots.
	k.ls.sched = schedLoop{}
}

// schedNote records an event about sc for OnEvent. Loop only.
func (k *Kernel) schedNote(sc *Scheduled, n Note, err error) {
	if k.events == nil {
		return
	}
	k.ls.evBuf = append(k.ls.evBuf, Event{Time: k.ls.now, Schedule: sc.Name(), Note: n, Err: err})
}
