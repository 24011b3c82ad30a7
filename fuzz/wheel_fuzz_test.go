package fuzz

import (
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/timewheel"
)

// wheelOrigin is where every fuzzed wheel's clock starts.
var wheelOrigin = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// wheelHorizon bounds the fuzzed clock and deadlines, far inside the ±292 years at which
// the wheel's offsets saturate.
const wheelHorizon = 100 * 365 * 24 * time.Hour

// wheelTicks are the ticks a fuzzed wheel picks from (first byte).
var wheelTicks = []time.Duration{time.Millisecond, time.Nanosecond, 7 * time.Millisecond, time.Hour}

// wheelUnits scale a decoded duration: level widths at 1 ms, so delays and steps land on
// every level, past the top one (795 days at 1 ms) and on and off the tick grid.
var wheelUnits = []time.Duration{
	time.Nanosecond,
	time.Microsecond,
	time.Millisecond,
	64 * time.Millisecond,
	4096 * time.Millisecond,
	262144 * time.Millisecond,
	16777216 * time.Millisecond,
	1073741824 * time.Millisecond,
}

// Wheel operations, one per byte (op % wheelOps), most followed by argument bytes.
const (
	wheelSchedule     = iota // duration (2 bytes): a timer that many after now
	wheelSchedulePast        // duration (2 bytes): a timer that many before now
	wheelCancel              // index byte: cancel one of the timers scheduled so far
	wheelStep                // duration (2 bytes): advance by that much
	wheelBack                // duration (2 bytes): advance to an earlier now (a no-op but for due timers)
	wheelToNext              // advance to Next()
	wheelDrain               // advance to Next() until the wheel is empty (at most 64 times)
	wheelReenter             // count byte: the next fires also schedule and cancel from the callback
	wheelClear               // clear the wheel
	wheelOps
)

// wheelInput hands out the fuzzer's bytes, then zeros.
type wheelInput struct{ data []byte }

func (in *wheelInput) more() bool { return len(in.data) > 0 }

func (in *wheelInput) next() byte {
	if len(in.data) == 0 {
		return 0
	}
	b := in.data[0]
	in.data = in.data[1:]
	return b
}

// duration decodes two bytes: a unit (top 3 bits), a mantissa of 13 bits in 1/16 of it.
func (in *wheelInput) duration() time.Duration {
	x := uint16(in.next())<<8 | uint16(in.next())
	return time.Duration(x&0x1fff) * wheelUnits[x>>13] / 16
}

// wheelSeeds are the table cases FuzzWheel starts from: tick byte, then ops.
var wheelSeeds = []struct {
	name string
	data []byte
}{
	{"one timer to Next", []byte{0, wheelSchedule, 0x40, 0x18, wheelDrain}},
	{"level edges", []byte{
		0, wheelSchedule, 0x5f, 0xf0, wheelSchedule, 0x64, 0x00, wheelSchedule, 0x64, 0x10,
		wheelSchedule, 0x84, 0x00, wheelSchedule, 0xa4, 0x00, wheelSchedule, 0xc4, 0x00, wheelDrain,
	}},
	{"sub-tick steps", []byte{
		0, wheelSchedule, 0x20, 0x18, wheelSchedule, 0x20, 0x08, wheelStep, 0x20, 0x08,
		wheelStep, 0x20, 0x04, wheelStep, 0x20, 0x04, wheelToNext,
	}},
	{"cancel before fire", []byte{0, wheelSchedule, 0x60, 0x20, wheelSchedule, 0x60, 0x20, wheelCancel, 1, wheelDrain, wheelCancel, 0}},
	{"due and backwards", []byte{
		0, wheelStep, 0x40, 0x50, wheelSchedulePast, 0x40, 0x10, wheelSchedule, 0x00, 0x00,
		wheelBack, 0x40, 0x20, wheelToNext,
	}},
	{"clamped", []byte{0, wheelSchedule, 0xff, 0xff, wheelSchedule, 0xe3, 0x00, wheelStep, 0xff, 0xff, wheelDrain, wheelDrain}},
	{"reentrant", []byte{
		0, wheelReenter, 9, wheelSchedule, 0x40, 0x10, wheelSchedule, 0x40, 0x10,
		wheelSchedule, 0x60, 0x30, wheelStep, 0x60, 0x40, wheelDrain,
	}},
	{"clear", []byte{0, wheelSchedule, 0x60, 0x20, wheelSchedulePast, 0x20, 0x20, wheelClear, wheelSchedule, 0x40, 0x10, wheelDrain}},
	{"1ns tick", []byte{1, wheelSchedule, 0xe0, 0x30, wheelSchedule, 0x00, 0x01, wheelStep, 0x00, 0x01, wheelDrain, wheelDrain}},
	{"7ms tick", []byte{2, wheelSchedule, 0x41, 0x00, wheelSchedule, 0x60, 0x71, wheelStep, 0x40, 0x51, wheelDrain}},
	{"1h tick clamped", []byte{3, wheelSchedule, 0xe8, 0x00, wheelSchedule, 0xc0, 0x50, wheelToNext, wheelStep, 0xe8, 0x00, wheelDrain}},
}

// FuzzWheel drives a timewheel.Wheel and wheelModel with the same operations and checks
// every fire: never early, never lost or repeated, in tick order, at most a tick late when
// advancing to Next(); and Len, Next and Cancel against the model after each operation.
func FuzzWheel(f *testing.F) {
	for _, s := range wheelSeeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &wheelInput{data: data}
		tick := wheelTicks[int(in.next())%len(wheelTicks)]
		w, err := timewheel.New[int](tick, wheelOrigin)
		if err != nil {
			t.Fatalf("New(%v) error = %v", tick, err)
		}
		m := &wheelModel{t: t, w: w, tick: tick, now: wheelOrigin}
		for m.step = 0; in.more() && m.step < 1000; m.step++ {
			switch in.next() % wheelOps {
			case wheelSchedule:
				m.schedule(m.now.Add(in.duration()))
			case wheelSchedulePast:
				m.schedule(m.now.Add(-in.duration()))
			case wheelCancel:
				if len(m.timers) > 0 {
					m.cancel(int(in.next()) % len(m.timers))
				}
			case wheelStep:
				m.advance(m.now.Add(in.duration()), false)
			case wheelBack:
				m.advance(m.now.Add(-in.duration()), false)
			case wheelToNext:
				if next, ok := w.Next(); ok {
					m.advance(next, true)
				}
			case wheelDrain:
				for range 64 {
					next, ok := w.Next()
					if !ok {
						break
					}
					m.advance(next, true)
				}
			case wheelReenter:
				m.reenter = int(in.next() % 16)
			case wheelClear:
				m.clear()
			}
			m.check()
		}
	})
}

// wheelTimer is one timer of wheelModel.
type wheelTimer struct {
	at      time.Time
	sched   time.Time // the wheel's clock when it was scheduled
	h       timewheel.Handle[int]
	pending bool
}

// wheelModel is the reference model of a Wheel: every timer scheduled, and the ids of the
// pending ones sorted by deadline.
type wheelModel struct {
	t       *testing.T
	w       *timewheel.Wheel[int]
	tick    time.Duration
	now     time.Time // latest now passed to Advance
	step    int
	timers  []wheelTimer
	sorted  []int // pending timer ids, by deadline then id
	reenter int   // fires left that schedule and cancel from the callback

	// Within one Advance.
	due     map[int]bool // timers that must fire now (unless cancelled by a callback)
	lastKey time.Time    // deadline tick of the previous fire, for the order check
	toNext  bool
	fired   int
}

func (m *wheelModel) less(a, b int) int {
	if c := m.timers[a].at.Compare(m.timers[b].at); c != 0 {
		return c
	}
	return a - b
}

func (m *wheelModel) schedule(at time.Time) {
	if at.Sub(wheelOrigin) > wheelHorizon || wheelOrigin.Sub(at) > wheelHorizon {
		return
	}
	id := len(m.timers)
	m.timers = append(m.timers, wheelTimer{at: at, sched: m.now, pending: true})
	m.timers[id].h = m.w.Schedule(at, id)
	i, _ := slices.BinarySearchFunc(m.sorted, id, m.less)
	m.sorted = slices.Insert(m.sorted, i, id)
}

// remove takes timer id out of the pending ones.
func (m *wheelModel) remove(id int) {
	m.timers[id].pending = false
	i, found := slices.BinarySearchFunc(m.sorted, id, m.less)
	if !found {
		m.t.Fatalf("step %d: model lost timer %d", m.step, id)
	}
	m.sorted = slices.Delete(m.sorted, i, i+1)
	delete(m.due, id)
}

func (m *wheelModel) cancel(id int) {
	tm := m.timers[id]
	if got := m.w.Cancel(tm.h); got != tm.pending {
		m.t.Fatalf("step %d: Cancel(timer %d) = %t, want %t", m.step, id, got, tm.pending)
	}
	if tm.pending {
		m.remove(id)
	}
}

func (m *wheelModel) clear() {
	var got []int
	m.w.Clear(func(v int) { got = append(got, v) })
	slices.Sort(got)
	want := slices.Clone(m.sorted)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		m.t.Fatalf("step %d: Clear() removed %v, want %v", m.step, got, want)
	}
	for _, id := range want {
		m.remove(id)
	}
}

// advance moves the wheel to now and checks that exactly the due timers fire.
func (m *wheelModel) advance(now time.Time, toNext bool) {
	if now.Sub(wheelOrigin) > wheelHorizon {
		return
	}
	if now.After(m.now) {
		m.now = now
	}
	m.due = map[int]bool{}
	for _, id := range m.sorted {
		if m.timers[id].at.After(m.now) {
			break
		}
		m.due[id] = true
	}
	m.lastKey, m.toNext, m.fired = time.Time{}, toNext, 0
	got := m.w.Advance(now, m.fire)
	if got != m.fired {
		m.t.Fatalf("step %d: Advance() = %d, want the %d calls of fire", m.step, got, m.fired)
	}
	for id := range m.due {
		m.t.Fatalf("step %d: timer %d (at %v) lost: not fired at %v", m.step, id, m.timers[id].at.Sub(wheelOrigin), m.now.Sub(wheelOrigin))
	}
}

func (m *wheelModel) fire(id int) {
	m.fired++
	if id < 0 || id >= len(m.timers) {
		m.t.Fatalf("step %d: fired unknown value %d", m.step, id)
	}
	tm := m.timers[id]
	switch {
	case !tm.pending:
		m.t.Fatalf("step %d: timer %d fired twice or after Cancel", m.step, id)
	case tm.at.After(m.now):
		m.t.Fatalf("step %d: timer %d fired early: at %v, now %v", m.step, id, tm.at.Sub(wheelOrigin), m.now.Sub(wheelOrigin))
	case !m.due[id]:
		m.t.Fatalf("step %d: timer %d scheduled from a callback, due, fired in the same Advance", m.step, id)
	}
	key := time.Time{} // due when scheduled: fires first
	if tm.at.After(tm.sched) {
		key = wheelOrigin.Add((tm.at.Sub(wheelOrigin) + m.tick - 1) / m.tick * m.tick)
	}
	if key.Before(m.lastKey) {
		m.t.Fatalf("step %d: timer %d (tick %v) fired after one of tick %v", m.step, id, key.Sub(wheelOrigin), m.lastKey.Sub(wheelOrigin))
	}
	m.lastKey = key
	late := m.now.Sub(tm.at)
	if tm.sched.After(tm.at) {
		late = m.now.Sub(tm.sched)
	}
	if m.toNext && late > m.tick {
		m.t.Fatalf("step %d: timer %d fired %v late advancing to Next(), want <= %v", m.step, id, late, m.tick)
	}
	m.remove(id)
	if m.reenter > 0 {
		m.reenter--
		m.cancel((id*7 + 3) % len(m.timers))
		m.schedule(m.now.Add(time.Duration(id%5-2) * m.tick / 2))
	}
}

// check compares Len and Next with the model.
func (m *wheelModel) check() {
	if got := m.w.Len(); got != len(m.sorted) {
		m.t.Fatalf("step %d: Len() = %d, want %d", m.step, got, len(m.sorted))
	}
	next, ok := m.w.Next()
	if ok != (len(m.sorted) > 0) {
		m.t.Fatalf("step %d: Next() = _, %t with %d timers pending", m.step, ok, len(m.sorted))
	}
	if !ok {
		return
	}
	first := m.timers[m.sorted[0]]
	limit := wheelOrigin.Add((first.at.Sub(wheelOrigin) + m.tick - 1) / m.tick * m.tick)
	if limit.Before(m.now) {
		limit = m.now
	}
	if next.After(limit) {
		m.t.Fatalf("step %d: Next() = %v, want <= %v (earliest deadline %v)", m.step, next.Sub(wheelOrigin), limit.Sub(wheelOrigin), first.at.Sub(wheelOrigin))
	}
	if first.at.After(m.now) && !next.After(m.now) {
		m.t.Fatalf("step %d: Next() = %v, want after now %v when nothing is due", m.step, next.Sub(wheelOrigin), m.now.Sub(wheelOrigin))
	}
}
