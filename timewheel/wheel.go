package timewheel

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

const (
	slotBits  = 6
	slotCount = 1 << slotBits // slots per level
	slotMask  = slotCount - 1

	// spanMin is the longest delay every wheel holds without clamping, whatever its tick.
	spanMin = 30 * 24 * time.Hour
	// levelsMin and levelsMax bound the number of levels: at least two, so the circular
	// top level is never level 0, and at most the nine that a 1 ns tick needs for spanMin.
	levelsMin = 2
	levelsMax = 9
)

// Wheel holds timers carrying values of type T, in levels of 64 slots (see the package
// documentation for the layout and the guarantees).
//
// A Wheel is owned by one goroutine: it is not safe for concurrent use and takes no locks.
// It never reads the clock; every time is passed in. Use [New] to make one; the zero Wheel
// is not usable.
type Wheel[T any] struct {
	start  time.Time // origin: ticks are counted from here
	wall   bool      // start has no monotonic clock reading, so offsets use the wall clock
	sec    int64     // start.Unix()
	nsec   int64     // start.Nanosecond()
	tick   time.Duration
	tickNs uint64 // tick in nanoseconds, > 0
	levels int    // number of levels, in [levelsMin, levelsMax]
	span   uint64 // ticks covered by one rotation of the top level: 64^levels

	now int64  // latest time passed to Advance (or New), in nanoseconds after start
	cur uint64 // next tick to process: every earlier tick is done, and so are the cascades at cur

	// occ holds one occupancy bitmap per level (bit i set when slot i holds a timer). Word
	// occ[levels] holds the bits of the due list (dueBit) and of the scratch list.
	occ [levelsMax + 1]uint64

	// soonest holds, per slot of level 0, a lower bound of its timers' deadlines, so that
	// Advance scans the tick after now only when one of them may be due (the kernel's loop
	// calls Advance on every pass).
	soonest [slotCount]int64

	count int  // pending timers
	busy  bool // inside Advance or Clear: they must not be called from their callbacks
	scan  bool // now moved and the tick after it has not been scanned for due timers yet

	// nodes holds the list sentinels first — slot s of level l at index l*64+s, then the due
	// list and the scratch list — and the timers after them.
	nodes slab[T]
}

// The lists that are not slots of a level, as offsets from levels*64.
const (
	dueList     = 0 // timers already due when scheduled: they fire at the next Advance
	scratchList = 1 // the list Advance and Clear are working through
	dueBit      = 1 << dueList
)

// Handle identifies one timer scheduled on a [Wheel]. It is a small value: copy it freely.
//
// The zero Handle identifies no timer. A Handle whose timer fired or was cancelled is
// stale: [Wheel.Cancel] returns false for it and never touches the entry, even once the
// wheel has reused it for another timer. A Handle is only meaningful to the Wheel that
// returned it.
type Handle[T any] struct {
	idx uint32 // node index
	gen uint32 // node generation when scheduled; odd, so the zero Handle matches nothing
}

// New returns an empty wheel whose slots on level 0 are tick long, with its clock at now.
// Ticks are counted from now: a deadline is rounded up to now + k*tick for some k. It
// returns an error if tick is not positive.
func New[T any](tick time.Duration, now time.Time) (*Wheel[T], error) {
	if tick <= 0 {
		return nil, fmt.Errorf("timewheel: tick = %v: must be > 0", tick)
	}
	w := &Wheel[T]{
		start: now,
		// Round(0) changes the representation only when it strips a monotonic reading.
		wall:   now == now.Round(0), //nolint:staticcheck // comparing representations, not instants
		sec:    now.Unix(),
		nsec:   int64(now.Nanosecond()),
		tick:   tick,
		tickNs: uint64(tick),
		levels: levelsFor(tick),
	}
	w.span = 1 << (w.levels * slotBits)
	w.cur = 1 // tick 0 is now: a deadline at or before now is due already
	w.nodes.free = nilIndex
	for i := range w.soonest {
		w.soonest[i] = math.MaxInt64
	}
	for range w.levels*slotCount + 2 {
		i, n := w.nodes.alloc()
		n.next, n.prev = i, i
	}
	return w, nil
}

// offset returns t - w.start in nanoseconds, as t.Sub(w.start) does (by the monotonic
// readings if both times carry one, saturating at about ±292 years) but without the cost
// of its overflow check when they do not.
func (w *Wheel[T]) offset(t time.Time) int64 {
	if !w.wall {
		return int64(t.Sub(w.start))
	}
	const secMax = math.MaxInt64/int64(time.Second) - 1
	sec := t.Unix() - w.sec
	switch {
	case sec > secMax:
		return math.MaxInt64
	case sec < -secMax:
		return math.MinInt64
	}
	return sec*int64(time.Second) + int64(t.Nanosecond()) - w.nsec
}

// levelsFor returns how many levels a wheel with this tick needs to hold delays up to
// spanMin without clamping.
func levelsFor(tick time.Duration) int {
	need := (uint64(spanMin) + uint64(tick) - 1) / uint64(tick)
	levels := levelsMin
	for levels < levelsMax && uint64(1)<<(levels*slotBits) < need {
		levels++
	}
	return levels
}

// Tick returns the duration of one slot of level 0, as given to [New].
func (w *Wheel[T]) Tick() time.Duration { return w.tick }

// Len returns the number of pending timers: scheduled, and neither fired nor cancelled.
func (w *Wheel[T]) Len() int { return w.count }

// Schedule adds a timer that fires v at the first [Wheel.Advance] whose now is at or after
// at; a timer whose at is not after the latest now the wheel has seen fires at the next
// Advance. It returns a Handle for [Wheel.Cancel]. Schedule is O(1) and allocates nothing
// once the wheel has held as many timers before. It may be called from the callbacks of
// Advance and Clear.
func (w *Wheel[T]) Schedule(at time.Time, v T) Handle[T] {
	i, n := w.nodes.alloc()
	n.gen++
	n.at = w.offset(at)
	n.v = v
	w.count++
	w.place(i, n)
	return Handle[T]{idx: i, gen: n.gen}
}

// Cancel removes the timer of h if it is pending, and reports whether it did. It returns
// false for the zero Handle and for a stale one (its timer fired or was cancelled). Cancel
// is O(1) and may be called from the callbacks of Advance and Clear.
func (w *Wheel[T]) Cancel(h Handle[T]) bool {
	if h.gen&1 == 0 || h.idx >= w.nodes.used {
		return false
	}
	n := w.nodes.get(h.idx)
	if n.gen != h.gen {
		return false
	}
	w.unlink(n)
	w.release(h.idx, n)
	return true
}

// Advance moves the wheel's clock to now and calls fire (if not nil) with the value of every
// pending timer whose at is at or before now, removing it; it returns how many fired.
//
// Timers that were already due when scheduled fire first, in scheduling order; the others
// fire tick by tick, in deadline order up to the tick (order within one tick is
// unspecified). Time never goes backwards: a now earlier than the latest one seen is
// treated as that one. The cost is O(1) per fired timer and per cascade, plus O(levels) per
// run of empty ticks skipped, plus, when now is inside a tick and some timers of that tick
// may be due already, a scan of that tick's timers.
//
// fire may call [Wheel.Schedule] and [Wheel.Cancel]; a timer it schedules at or before now
// fires at the next Advance. Advance panics if called from fire or from a [Wheel.Clear]
// callback. If fire panics, the timers not yet fired stay pending.
func (w *Wheel[T]) Advance(now time.Time, fire func(v T)) int {
	w.enter()
	defer w.exit()

	if n := w.offset(now); n > w.now {
		w.now = n
		w.scan = true
	}
	fired := w.expire(w.list(dueList), fire)
	// The loop and the scan below resume where they stopped if a callback panicked.
	last := uint64(w.now) / w.tickNs // the last tick that is over
	for w.cur <= last {
		t, ok := w.nextTick()
		if !ok || t > last {
			w.moveTo(last + 1)
			break
		}
		if t > w.cur {
			w.moveTo(t)
		}
		fired += w.expire(uint32(w.cur&slotMask), fire)
		w.moveTo(w.cur + 1)
	}
	if s := uint32(w.cur & slotMask); w.scan && w.soonest[s] <= w.now {
		// The tick after now is partly over and holds timers that may be due: fire them.
		fired += w.expireUntil(s, w.now, fire)
	}
	w.scan = false
	return fired
}

// Next returns the earliest time at which [Wheel.Advance] has work — a timer to fire or
// timers to cascade to a lower level — and false when no timer is pending. It is never
// later than the earliest pending deadline rounded up to the tick, or than the latest now
// the wheel has seen if a timer was scheduled at or before it; it is after that now
// otherwise. Next is O(levels): it reads the occupancy bitmaps, never the slots.
func (w *Wheel[T]) Next() (time.Time, bool) {
	if w.occ[w.levels]&dueBit != 0 {
		return w.start.Add(time.Duration(w.now)), true
	}
	t, ok := w.nextTick()
	if !ok {
		return time.Time{}, false
	}
	if t > math.MaxInt64/w.tickNs {
		return w.start.Add(math.MaxInt64), true
	}
	return w.start.Add(time.Duration(t * w.tickNs)), true
}

// Clear removes every pending timer, calling f (if not nil) with the value of each, in no
// particular order. Timers that f schedules stay pending. Clear panics if called from a
// callback of [Wheel.Advance] or Clear.
func (w *Wheel[T]) Clear(f func(v T)) {
	w.enter()
	defer w.exit()

	scratch := w.list(scratchList)
	for lvl := range w.levels {
		for occ := w.occ[lvl]; occ != 0; occ &= occ - 1 {
			w.splice(uint32(lvl<<slotBits|bits.TrailingZeros64(occ)), scratch)
		}
	}
	w.splice(w.list(dueList), scratch)
	for {
		i := w.nodes.get(scratch).next
		if i == scratch {
			return
		}
		n := w.nodes.get(i)
		w.unlink(n)
		v := n.v
		w.release(i, n)
		if f != nil {
			f(v)
		}
	}
}

// enter marks the wheel busy, or panics if a callback re-enters Advance or Clear.
func (w *Wheel[T]) enter() {
	if w.busy {
		panic("timewheel: Advance or Clear called from one of their callbacks")
	}
	w.busy = true
}

// exit ends Advance or Clear. If a callback panicked, the timers left in the scratch list
// are pending again: due ones go to the due list, the others to their slots.
func (w *Wheel[T]) exit() {
	w.busy = false
	scratch := w.list(scratchList)
	for {
		i := w.nodes.get(scratch).next
		if i == scratch {
			return
		}
		n := w.nodes.get(i)
		w.unlink(n)
		w.place(i, n)
	}
}

// list returns the sentinel index of a list that is not a slot.
func (w *Wheel[T]) list(which uint32) uint32 {
	return uint32(w.levels<<slotBits) + which
}

// place links node i, which no list holds, into the due list or its slot.
func (w *Wheel[T]) place(i uint32, n *node[T]) {
	if n.at <= w.now {
		w.push(w.list(dueList), i, n)
		return
	}
	w.push(w.slotFor(w.tickOf(n.at)), i, n)
}

// tickOf returns the tick at which a deadline at > 0 is due: at rounded up to the tick.
func (w *Wheel[T]) tickOf(at int64) uint64 {
	t := uint64(at) / w.tickNs
	if t*w.tickNs != uint64(at) {
		t++
	}
	return t
}

// slotFor returns the slot that holds a timer due at tick t >= w.cur. The level is the
// one of the highest base-64 digit in which t and w.cur differ, so the slot is reached
// (and cascaded) at or before t. Past the top level, the timer waits in the top level,
// which is circular: a slot at or before the current one there is reached in its next
// rotation. A timer due more than a whole rotation ahead waits for that rotation and is
// placed again then (clamping).
func (w *Wheel[T]) slotFor(t uint64) uint32 {
	x := t ^ w.cur
	if x < slotCount {
		return uint32(t & slotMask)
	}
	lvl := (bits.Len64(x) - 1) / slotBits
	if lvl >= w.levels {
		lvl = w.levels - 1
		if t-w.cur >= w.span {
			t = w.cur
		}
	}
	return uint32(lvl<<slotBits) | uint32(t>>(lvl*slotBits)&slotMask)
}

// nextTick returns the earliest tick at or after w.cur at which a slot is due: a slot of
// level 0 fires, a slot of a higher level cascades. Slots of level l below the top hold
// only timers of the current rotation of level l, after the current slot; so the first
// level with a bit set holds the answer.
func (w *Wheel[T]) nextTick() (uint64, bool) {
	for lvl := range w.levels {
		occ := w.occ[lvl]
		if occ == 0 {
			continue
		}
		shift := lvl * slotBits
		rotation := uint64(1) << (shift + slotBits)
		base := w.cur &^ (rotation - 1)
		if lvl == w.levels-1 {
			c := w.cur >> shift & slotMask
			if ahead := occ &^ (uint64(2)<<c - 1); ahead != 0 {
				occ = ahead
			} else {
				base += rotation
			}
		}
		return base + uint64(bits.TrailingZeros64(occ))<<shift, true
	}
	return 0, false
}

// moveTo sets w.cur to t, which no due slot precedes, and cascades the slots that start at
// t to lower levels.
func (w *Wheel[T]) moveTo(t uint64) {
	w.cur = t
	for lvl := 1; lvl < w.levels; lvl++ {
		shift := lvl * slotBits
		if t&(uint64(1)<<shift-1) != 0 {
			return
		}
		digit := t >> shift & slotMask
		if w.occ[lvl]&(1<<digit) == 0 {
			continue
		}
		scratch := w.list(scratchList)
		w.splice(uint32(lvl<<slotBits)|uint32(digit), scratch)
		for {
			i := w.nodes.get(scratch).next
			if i == scratch {
				break
			}
			n := w.nodes.get(i)
			w.unlink(n)
			w.push(w.slotFor(w.tickOf(n.at)), i, n)
		}
	}
}

// expire fires every timer of list s.
func (w *Wheel[T]) expire(s uint32, fire func(v T)) int {
	return w.expireUntil(s, math.MaxInt64, fire)
}

// expireUntil fires the timers of list s whose deadline is at or before at and keeps the
// others there.
func (w *Wheel[T]) expireUntil(s uint32, at int64, fire func(v T)) int {
	if w.occ[s>>slotBits]&(1<<(s&slotMask)) == 0 {
		return 0
	}
	scratch := w.list(scratchList)
	w.splice(s, scratch)
	fired := 0
	for {
		i := w.nodes.get(scratch).next
		if i == scratch {
			return fired
		}
		n := w.nodes.get(i)
		w.unlink(n)
		if n.at > at {
			w.push(s, i, n)
			continue
		}
		v := n.v
		w.release(i, n)
		fired++
		if fire != nil {
			fire(v)
		}
	}
}

// release frees the node of a timer that left the wheel.
func (w *Wheel[T]) release(i uint32, n *node[T]) {
	w.count--
	w.nodes.release(i, n)
}

// push appends node i, which no list holds, to list s.
func (w *Wheel[T]) push(s, i uint32, n *node[T]) {
	head := w.nodes.get(s)
	tail := head.prev
	n.prev, n.next = tail, s
	w.nodes.get(tail).next = i
	head.prev = i
	w.occ[s>>slotBits] |= 1 << (s & slotMask)
	if s < slotCount && n.at < w.soonest[s] {
		w.soonest[s] = n.at
	}
}

// unlink removes n from its list, clearing the list's bit if it is now empty.
func (w *Wheel[T]) unlink(n *node[T]) {
	prev, next := n.prev, n.next
	w.nodes.get(prev).next = next
	w.nodes.get(next).prev = prev
	if prev == next { // only the sentinel is left
		w.occ[prev>>slotBits] &^= 1 << (prev & slotMask)
	}
}

// splice moves every node of list from to the end of list to.
func (w *Wheel[T]) splice(from, to uint32) {
	src := w.nodes.get(from)
	first, last := src.next, src.prev
	if first == from {
		return
	}
	dst := w.nodes.get(to)
	tail := dst.prev
	w.nodes.get(tail).next = first
	w.nodes.get(first).prev = tail
	w.nodes.get(last).next = to
	dst.prev = last
	src.next, src.prev = from, from
	w.occ[from>>slotBits] &^= 1 << (from & slotMask)
	if from < slotCount {
		w.soonest[from] = math.MaxInt64
	}
	w.occ[to>>slotBits] |= 1 << (to & slotMask)
}
