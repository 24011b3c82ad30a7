package timewheel

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

const ms = time.Millisecond

// origin is the time every test wheel starts at: deliberately not a round number.
var origin = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// ticks returns n ticks of 1 ms.
func ticks(n int64) time.Duration { return time.Duration(n) * ms }

func newWheel(t *testing.T, tick time.Duration) *Wheel[int] {
	t.Helper()
	w, err := New[int](tick, origin)
	if err != nil {
		t.Fatalf("New(%v) error = %v, want nil", tick, err)
	}
	return w
}

// ceilTick rounds at up to the tick grid of a wheel started at origin.
func ceilTick(at time.Time, tick time.Duration) time.Time {
	d := at.Sub(origin)
	if d <= 0 {
		return origin
	}
	k := (d + tick - 1) / tick
	return origin.Add(k * tick)
}

func TestNew(t *testing.T) {
	tests := []struct {
		name       string
		tick       time.Duration
		wantErr    bool
		wantLevels int
	}{
		{"zero tick", 0, true, 0},
		{"negative tick", -ms, true, 0},
		{"1ns", time.Nanosecond, false, 9},
		{"1ms", ms, false, 6},
		{"1s", time.Second, false, 4},
		{"1h", time.Hour, false, 2},
		{"1 year", 365 * 24 * time.Hour, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New[int](tt.tick, origin)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "tick") {
					t.Fatalf("New(%v) error = %v, want an error naming tick", tt.tick, err)
				}
				if w != nil {
					t.Errorf("New(%v) = %v, want nil", tt.tick, w)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%v) error = %v, want nil", tt.tick, err)
			}
			if w.levels != tt.wantLevels {
				t.Errorf("New(%v).levels = %d, want %d", tt.tick, w.levels, tt.wantLevels)
			}
			if span := time.Duration(w.span) * tt.tick; tt.tick < spanMin && span < spanMin {
				t.Errorf("New(%v) covers %v, want >= %v", tt.tick, span, spanMin)
			}
			if got := w.Tick(); got != tt.tick {
				t.Errorf("Tick() = %v, want %v", got, tt.tick)
			}
			if got := w.Len(); got != 0 {
				t.Errorf("Len() = %d, want 0", got)
			}
			if got, ok := w.Next(); ok {
				t.Errorf("Next() = %v, true, want false on an empty wheel", got)
			}
		})
	}
	if _, err := New[int](0, origin); !strings.HasPrefix(err.Error(), "timewheel: ") {
		t.Errorf("New(0) error = %q, want the timewheel: prefix", err)
	}
}

// TestBoundaries schedules one timer at delays around every level edge, from wheels whose
// clock is at various offsets (on and off the tick grid, just before level edges), and
// checks it fires neither early nor more than a tick late, by exact Advance calls and by
// advancing to Next().
func TestBoundaries(t *testing.T) {
	const (
		l1 = 64
		l2 = 64 * 64
		l3 = 64 * 64 * 64
		l4 = 64 * 64 * 64 * 64
		l5 = 64 * 64 * 64 * 64 * 64
		l6 = 64 * 64 * 64 * 64 * 64 * 64 // one rotation of the top level at 1 ms: 795 days
	)
	day := 24 * time.Hour
	delays := []struct {
		name  string
		delay time.Duration
	}{
		{"past", -time.Hour},
		{"zero", 0},
		{"1ns", 1},
		{"half tick", ms / 2},
		{"tick-1ns", ms - 1},
		{"tick", ms},
		{"tick+1ns", ms + 1},
		{"63 ticks", ticks(l1 - 1)},
		{"64 ticks", ticks(l1)},
		{"65 ticks", ticks(l1 + 1)},
		{"64^2-1 ticks", ticks(l2 - 1)},
		{"64^2 ticks", ticks(l2)},
		{"64^2+1 ticks", ticks(l2 + 1)},
		{"64^3-1 ticks", ticks(l3 - 1)},
		{"64^3 ticks", ticks(l3)},
		{"64^3+1 ticks", ticks(l3 + 1)},
		{"64^4-1 ticks", ticks(l4 - 1)},
		{"64^4 ticks", ticks(l4)},
		{"64^4+1 ticks", ticks(l4 + 1)},
		{"64^5-1 ticks", ticks(l5 - 1)},
		{"64^5 ticks", ticks(l5)},
		{"64^5+1 ticks", ticks(l5 + 1)},
		{"30 days", 30 * day},
		{"30 days+0.5 tick", 30*day + ms/2},
		{"64^6-1 ticks", ticks(l6 - 1)},
		{"64^6 ticks (clamped)", ticks(l6)},
		{"64^6+1 ticks (clamped)", ticks(l6 + 1)},
		{"5 years (clamped)", 5 * 365 * day},
		{"200 years (clamped)", 200 * 365 * day},
	}
	offsets := []struct {
		name   string
		offset time.Duration
	}{
		{"at origin", 0},
		{"off grid", ms / 3},
		{"end of level 0", ticks(l1-1) + ms/2},
		{"end of level 1", ticks(l2 - 1)},
		{"mid level 3", ticks(l3*17 + 5)},
		{"end of level 4", ticks(l5-1) + 1},
		{"end of top level", ticks(l6-1) + ms/2},
		{"after a rotation", ticks(l6*3 + l5*7)},
	}
	for _, off := range offsets {
		for _, d := range delays {
			t.Run(off.name+"/"+d.name, func(t *testing.T) {
				now := origin.Add(off.offset)
				at := now.Add(d.delay)
				due := ceilTick(at, ms) // the tick at which the timer is due
				if !at.After(now) {
					due = now // already due: fires at the next Advance
				}

				// Exact calls: nothing just before at, the timer at at.
				w := newWheel(t, ms)
				w.Advance(now, nil)
				w.Schedule(at, 1)
				if next, ok := w.Next(); !ok || next.After(due) || next.Before(now) {
					t.Fatalf("Next() = %v, %v, want in [%v, %v]", next, ok, now, due)
				}
				if at.After(now) {
					if got := w.Advance(at.Add(-1), nil); got != 0 {
						t.Fatalf("Advance(at-1ns) = %d, want 0 (early fire)", got)
					}
				}
				if got := w.Advance(at, nil); got != 1 {
					t.Fatalf("Advance(at) = %d, want 1", got)
				}
				if got := w.Len(); got != 0 {
					t.Fatalf("Len() = %d, want 0", got)
				}

				// Advancing to Next(): fires at due, at most a tick after at.
				w = newWheel(t, ms)
				w.Advance(now, nil)
				w.Schedule(at, 1)
				var firedAt time.Time
				for steps := 0; w.Len() > 0; steps++ {
					next, ok := w.Next()
					if !ok {
						t.Fatalf("Next() = _, false with Len() = %d", w.Len())
					}
					if next.After(due) {
						t.Fatalf("Next() = %v, want <= %v", next, due)
					}
					if steps > 10000 {
						t.Fatalf("no fire after %d steps (Next() = %v)", steps, next)
					}
					if w.Advance(next, nil) == 1 {
						firedAt = next
					}
				}
				if !firedAt.Equal(due) {
					t.Errorf("fired at %v, want %v", firedAt, due)
				}
				if _, ok := w.Next(); ok {
					t.Errorf("Next() = _, true after the only timer fired")
				}
			})
		}
	}
}

// TestBoundariesOtherTicks checks a tick that does not divide a millisecond and the
// smallest tick (the most levels), around their top-level edges.
func TestBoundariesOtherTicks(t *testing.T) {
	tests := []struct {
		name  string
		tick  time.Duration
		delay time.Duration
	}{
		{"7ms tick, sub-tick", 7 * ms, 3 * ms},
		{"7ms tick, 64 ticks + 1ns", 7 * ms, 64*7*ms + 1},
		{"1h tick, 30 days", time.Hour, 30 * 24 * time.Hour},
		{"1h tick, top rotation-1ns (4096h)", time.Hour, 4096*time.Hour - 1},
		{"1h tick, 2 years (clamped)", time.Hour, 2 * 365 * 24 * time.Hour},
		{"1ns tick, 1ns", 1, 1},
		{"1ns tick, 64^8+1 ns", 1, 1<<48 + 1},
		{"1ns tick, 30 days", 1, 30 * 24 * time.Hour},
		{"1ns tick, 250 years (clamped)", 1, 250 * 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWheel(t, tt.tick)
			at := origin.Add(tt.delay)
			w.Schedule(at, 1)
			due := ceilTick(at, tt.tick)
			for steps := 0; ; steps++ {
				next, ok := w.Next()
				if !ok {
					t.Fatal("Next() = _, false before the timer fired")
				}
				if next.After(due) {
					t.Fatalf("Next() = %v, want <= %v", next, due)
				}
				if steps > 10000 {
					t.Fatalf("no fire after %d steps", steps)
				}
				if got := w.Advance(next, nil); got == 1 {
					if next.Before(at) || next.Sub(at) >= tt.tick {
						t.Fatalf("fired at %v, want in [%v, %v)", next, at, at.Add(tt.tick))
					}
					return
				}
			}
		})
	}
}

func TestAdvanceOrderAndCount(t *testing.T) {
	w := newWheel(t, ms)
	// Scheduled out of order, across levels; 7 and 8 share a tick.
	delays := map[int]time.Duration{
		1: ms / 2, 2: 3 * ms, 3: 70 * ms, 4: 5 * time.Second, 5: 10 * time.Minute,
		6: 5 * time.Hour, 7: 20 * 24 * time.Hour, 8: 20*24*time.Hour - ms/3,
	}
	for _, v := range []int{8, 3, 5, 1, 7, 2, 6, 4} {
		w.Schedule(origin.Add(delays[v]), v)
	}
	var got []int
	n := w.Advance(origin.Add(30*24*time.Hour), func(v int) { got = append(got, v) })
	if n != 8 || len(got) != 8 {
		t.Fatalf("Advance() = %d, fired %v, want 8", n, got)
	}
	for i, v := range got[:6] {
		if v != i+1 {
			t.Fatalf("fire order = %v, want 1..6 first, then 7 and 8 in any order", got)
		}
	}
	if w.Advance(origin, nil) != 0 {
		t.Error("Advance(earlier now) fired, want 0")
	}
}

func TestTimeNeverGoesBackwards(t *testing.T) {
	w := newWheel(t, ms)
	w.Advance(origin.Add(10*ms), nil)
	w.Schedule(origin.Add(5*ms), 1) // already due: fires at the next Advance, even an earlier one
	w.Schedule(origin.Add(11*ms), 2)
	var got []int
	fire := func(v int) { got = append(got, v) }
	if n := w.Advance(origin, fire); n != 1 || got[0] != 1 {
		t.Fatalf("Advance(earlier now) = %d (%v), want 1 ([1])", n, got)
	}
	if n := w.Advance(origin.Add(10*ms), fire); n != 0 {
		t.Fatalf("Advance(same now) = %d, want 0", n)
	}
	if next, _ := w.Next(); !next.Equal(origin.Add(11 * ms)) {
		t.Errorf("Next() = %v, want %v", next, origin.Add(11*ms))
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{"due", -ms},
		{"level 0", 3 * ms},
		{"level 1", 100 * ms},
		{"level 3", 10 * time.Minute},
		{"top level", 100 * 24 * time.Hour},
		{"clamped", 5 * 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWheel(t, ms)
			w.Advance(origin.Add(ms/2), nil)
			at := origin.Add(ms / 2).Add(tt.delay)
			if !w.Cancel(w.Schedule(at, 0)) {
				t.Fatal("Cancel(only timer) = false, want true")
			}
			if next, ok := w.Next(); ok || w.Len() != 0 {
				t.Fatalf("Next() = %v, true (Len() = %d) after cancelling the only timer, want false", next, w.Len())
			}
			keep := w.Schedule(at, 1)
			h := w.Schedule(at, 2)
			if got := w.Len(); got != 2 {
				t.Fatalf("Len() = %d, want 2", got)
			}
			if got := w.Cancel(h); !got {
				t.Fatalf("Cancel(pending) = %v, want true", got)
			}
			if got := w.Cancel(h); got {
				t.Fatalf("Cancel(cancelled) = %v, want false", got)
			}
			if got := w.Len(); got != 1 {
				t.Fatalf("Len() = %d, want 1", got)
			}
			var fired []int
			w.Advance(at.Add(time.Hour), func(v int) { fired = append(fired, v) })
			if len(fired) != 1 || fired[0] != 1 {
				t.Fatalf("fired %v, want [1]", fired)
			}
			if got := w.Cancel(keep); got {
				t.Errorf("Cancel(fired) = %v, want false", got)
			}
			if _, ok := w.Next(); ok {
				t.Error("Next() = _, true on an empty wheel")
			}
		})
	}
}

func TestCancelZeroAndStaleHandles(t *testing.T) {
	w := newWheel(t, ms)
	if w.Cancel(Handle[int]{}) {
		t.Fatal("Cancel(zero Handle) = true, want false")
	}
	h1 := w.Schedule(origin.Add(ms), 1)
	if w.Cancel(Handle[int]{}) {
		t.Fatal("Cancel(zero Handle) = true with a timer pending, want false")
	}
	w.Advance(origin.Add(ms), nil)
	// The freed entry is recycled for the next timer: the stale handle must not reach it.
	h2 := w.Schedule(origin.Add(2*ms), 2)
	if h2.idx != h1.idx {
		t.Fatalf("entry not recycled (idx %d, then %d): test assumption broken", h1.idx, h2.idx)
	}
	if w.Cancel(h1) {
		t.Fatal("Cancel(stale handle of a fired timer) = true, want false")
	}
	if w.Len() != 1 {
		t.Fatalf("Len() = %d, want 1: the stale cancel removed the recycled entry", w.Len())
	}
	if !w.Cancel(h2) {
		t.Fatal("Cancel(h2) = false, want true")
	}
	h3 := w.Schedule(origin.Add(3*ms), 3)
	if w.Cancel(h2) || w.Cancel(h1) {
		t.Fatal("Cancel(stale handle of a cancelled timer) = true, want false")
	}
	if !w.Cancel(h3) {
		t.Fatal("Cancel(h3) = false, want true")
	}
	if w.Cancel(Handle[int]{idx: 1 << 30, gen: 1}) {
		t.Fatal("Cancel(out-of-range handle) = true, want false")
	}
	if w.Cancel(Handle[int]{idx: 0, gen: 1}) {
		t.Fatal("Cancel(handle of a sentinel) = true, want false")
	}
}

// TestCancelDuringCascade cancels, from a fire callback, timers whose slot is cascaded
// in the same Advance, timers already cascaded into the slot being fired, and timers in
// higher levels.
func TestCancelDuringCascade(t *testing.T) {
	w := newWheel(t, ms)
	// 128 ticks: level 1, slot 2, cascaded at tick 128. 130, 4096+5: same slot of level 1
	// and a slot of level 2 cascaded later.
	a := w.Schedule(origin.Add(128*ms), 1)
	b := w.Schedule(origin.Add(128*ms), 2)
	c := w.Schedule(origin.Add(130*ms), 3)
	d := w.Schedule(origin.Add(4101*ms), 4)
	e := w.Schedule(origin.Add(4101*ms), 5)
	var fired []int
	fire := func(v int) {
		fired = append(fired, v)
		if v == 1 || v == 2 {
			// Whichever of a and b fires first cancels the other one, then c and d.
			other := map[int]Handle[int]{1: b, 2: a}[v]
			if got := w.Cancel(other); !got {
				t.Errorf("Cancel(peer in the slot being fired) = %v, want true", got)
			}
			if got := w.Cancel(c); !got {
				t.Errorf("Cancel(timer cascaded in this Advance) = %v, want true", got)
			}
			if got := w.Cancel(d); !got {
				t.Errorf("Cancel(timer in level 2) = %v, want true", got)
			}
		}
	}
	if n := w.Advance(origin.Add(5*time.Second), fire); n != 2 {
		t.Fatalf("Advance() = %d (%v), want 2 (one of a and b, then e)", n, fired)
	}
	if fired[1] != 5 {
		t.Errorf("fired %v, want [1|2 5]", fired)
	}
	if w.Cancel(e) || w.Len() != 0 {
		t.Errorf("Len() = %d after everything fired or was cancelled, want 0", w.Len())
	}
}

func TestCancelAfterCascadeFromOutside(t *testing.T) {
	w := newWheel(t, ms)
	h := w.Schedule(origin.Add(10*time.Minute+ms/2), 1)
	other := w.Schedule(origin.Add(10*time.Minute+ms/2), 2)
	// Walk Next() until the timer sits in level 0, then cancel it.
	for w.occ[0] == 0 {
		next, _ := w.Next()
		w.Advance(next, nil)
	}
	if !w.Cancel(h) {
		t.Fatal("Cancel(after cascades) = false, want true")
	}
	var fired []int
	w.Advance(origin.Add(time.Hour), func(v int) { fired = append(fired, v) })
	if len(fired) != 1 || fired[0] != 2 || w.Cancel(other) {
		t.Errorf("fired %v, want [2]", fired)
	}
}

func TestReentrantSchedule(t *testing.T) {
	w := newWheel(t, ms)
	w.Schedule(origin.Add(ms), 1)
	var fired []int
	fire := func(v int) {
		fired = append(fired, v)
		if v == 1 {
			w.Schedule(origin, 2)                  // already due: next Advance
			w.Schedule(origin.Add(2*ms), 3)        // due at this Advance's now: next Advance
			w.Schedule(origin.Add(3*ms+ms/2), 4)   // in the partly-over tick, after now
			w.Schedule(origin.Add(time.Minute), 5) // far
		}
	}
	if n := w.Advance(origin.Add(3*ms), fire); n != 1 {
		t.Fatalf("Advance() = %d (%v), want 1", n, fired)
	}
	if next, _ := w.Next(); !next.Equal(origin.Add(3 * ms)) {
		t.Fatalf("Next() = %v, want %v (due timers pending)", next, origin.Add(3*ms))
	}
	if n := w.Advance(origin.Add(3*ms), fire); n != 2 {
		t.Fatalf("second Advance(same now) = %d (%v), want 2", n, fired)
	}
	if n := w.Advance(origin.Add(3*ms+ms/2), fire); n != 1 {
		t.Fatalf("Advance(+0.5 tick) = %d (%v), want 1", n, fired)
	}
	if w.Len() != 1 {
		t.Fatalf("Len() = %d, want 1", w.Len())
	}
}

func TestReentrantAdvancePanics(t *testing.T) {
	tests := []struct {
		name string
		call func(w *Wheel[int])
	}{
		{"Advance", func(w *Wheel[int]) { w.Advance(origin.Add(time.Hour), nil) }},
		{"Clear", func(w *Wheel[int]) { w.Clear(nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWheel(t, ms)
			w.Schedule(origin.Add(ms), 1)
			w.Schedule(origin.Add(ms), 2)
			got := catch(func() { w.Advance(origin.Add(ms), func(int) { tt.call(w) }) })
			if msg, _ := got.(string); !strings.HasPrefix(msg, "timewheel: ") {
				t.Fatalf("recover() = %v, want a timewheel: panic", got)
			}
			// The timer that did not fire is pending again and fires next time.
			if w.Len() != 1 {
				t.Fatalf("Len() = %d after the panic, want 1", w.Len())
			}
			if n := w.Advance(origin.Add(ms), nil); n != 1 {
				t.Fatalf("Advance() after the panic = %d, want 1", n)
			}
		})
	}
}

// TestFirePanicKeepsTimers checks that a panicking callback loses no timer: in a full tick,
// in the partly-over tick, and in the due list.
func TestFirePanicKeepsTimers(t *testing.T) {
	errBoom := errors.New("boom")
	w := newWheel(t, ms)
	for v := range 3 {
		w.Schedule(origin.Add(ms), v)           // full tick
		w.Schedule(origin.Add(2*ms-ms/4), 10+v) // partly-over tick
	}
	panicky := func(int) { panic(errBoom) }
	for want := 6; want > 0; want-- {
		if got := catch(func() { w.Advance(origin.Add(2*ms-ms/8), panicky) }); got != errBoom { //nolint:errorlint // the recovered value itself
			t.Fatalf("recover() = %v, want %v", got, errBoom)
		}
		if w.Len() != want-1 {
			t.Fatalf("Len() = %d, want %d", w.Len(), want-1)
		}
	}
	w.Schedule(origin.Add(2*ms), 20)
	if n := w.Advance(origin.Add(3*ms), nil); n != 1 {
		t.Fatalf("Advance() = %d, want 1", n)
	}
}

func catch(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

func TestClear(t *testing.T) {
	w := newWheel(t, ms)
	w.Advance(origin.Add(ms/2), nil)
	want := 0
	for i, d := range []time.Duration{-ms, 0, ms, 100 * ms, time.Hour, 40 * 24 * time.Hour, 10 * 365 * 24 * time.Hour} {
		w.Schedule(origin.Add(d), i)
		want += i
	}
	h := w.Schedule(origin.Add(time.Second), 100)
	w.Cancel(h)
	sum, n := 0, 0
	var late Handle[int]
	w.Clear(func(v int) {
		sum += v
		n++
		if n == 1 {
			late = w.Schedule(origin.Add(time.Second), 50) // survives the Clear
		}
	})
	if n != 7 || sum != want {
		t.Fatalf("Clear called f %d times (sum %d), want 7 (sum %d)", n, sum, want)
	}
	if w.Len() != 1 || !w.Cancel(late) {
		t.Fatalf("Len() = %d, want only the timer scheduled by f", w.Len())
	}
	if _, ok := w.Next(); ok {
		t.Fatal("Next() = _, true after Clear")
	}
	w.Clear(nil)
	if n := w.Advance(origin.Add(1000*24*time.Hour), func(int) { t.Error("a cleared timer fired") }); n != 0 {
		t.Fatalf("Advance() after Clear = %d, want 0", n)
	}
	// The wheel is reusable.
	w.Schedule(origin.Add(1001*24*time.Hour), 1)
	if n := w.Advance(origin.Add(1002*24*time.Hour), nil); n != 1 {
		t.Fatalf("Advance() after reuse = %d, want 1", n)
	}
}

func TestValuesAreZeroed(t *testing.T) {
	w, err := New[*int](ms, origin)
	if err != nil {
		t.Fatal(err)
	}
	x := new(int)
	fired := w.Schedule(origin.Add(ms), x)
	cancelled := w.Schedule(origin.Add(time.Hour), x)
	cleared := w.Schedule(origin.Add(time.Minute), x)
	w.Cancel(cancelled)
	w.Advance(origin.Add(ms), func(*int) {})
	w.Clear(nil)
	for _, h := range []Handle[*int]{fired, cancelled, cleared} {
		if v := w.nodes.get(h.idx).v; v != nil {
			t.Errorf("entry %d still holds %p, want nil", h.idx, v)
		}
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name   string
		now    time.Duration // wheel clock when scheduling
		delays []time.Duration
		want   time.Duration // Next() - origin
	}{
		{"one sub-tick", 0, []time.Duration{ms / 3}, ms},
		{"on the grid", 0, []time.Duration{5 * ms}, 5 * ms},
		{"earliest wins", 0, []time.Duration{9 * ms, 4*ms + 1, 30 * ms}, 5 * ms},
		{"off-grid clock", ms / 2, []time.Duration{ms / 4}, ms},
		{"due", 10 * ms, []time.Duration{-ms, time.Hour}, 10 * ms},
		{"level 1 cascade", 0, []time.Duration{100 * ms}, 64 * ms},
		{"level 1 cascade at the deadline", 0, []time.Duration{128 * ms}, 128 * ms},
		{"level 0 before level 1", 0, []time.Duration{100 * ms, 63 * ms}, 63 * ms},
		{"cascade at the next top rotation", ticks(64*64*64*64*64*64 - 2), []time.Duration{ticks(3)}, ticks(64 * 64 * 64 * 64 * 64 * 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWheel(t, ms)
			now := origin.Add(tt.now)
			w.Advance(now, nil)
			for i, d := range tt.delays {
				w.Schedule(now.Add(d), i)
			}
			got, ok := w.Next()
			if want := origin.Add(tt.want); !ok || !got.Equal(want) {
				t.Errorf("Next() = %v, %v, want %v, true", got.Sub(origin), ok, tt.want)
			}
		})
	}
}

// refTimer is one timer of the reference model.
type refTimer struct {
	at      time.Time
	sched   time.Time // the wheel's clock when it was scheduled
	h       Handle[int]
	pending bool
}

// refHeap orders timer ids by deadline; cancelled and fired ids are skipped lazily.
type refHeap struct {
	ids    []int
	timers []refTimer
}

func (r *refHeap) Len() int { return len(r.ids) }
func (r *refHeap) Less(i, j int) bool {
	return r.timers[r.ids[i]].at.Before(r.timers[r.ids[j]].at)
}
func (r *refHeap) Swap(i, j int) { r.ids[i], r.ids[j] = r.ids[j], r.ids[i] }
func (r *refHeap) Push(x any)    { r.ids = append(r.ids, x.(int)) }
func (r *refHeap) Pop() any {
	x := r.ids[len(r.ids)-1]
	r.ids = r.ids[:len(r.ids)-1]
	return x
}

// earliest returns the pending timer with the smallest deadline.
func (r *refHeap) earliest() (int, bool) {
	for len(r.ids) > 0 && !r.timers[r.ids[0]].pending {
		heap.Pop(r)
	}
	if len(r.ids) == 0 {
		return 0, false
	}
	return r.ids[0], true
}

// model drives a wheel and checks every fire against the reference.
type model struct {
	t       *testing.T
	w       *Wheel[int]
	tick    time.Duration
	rng     *rand.Rand
	now     time.Time // the wheel's clock
	ref     refHeap
	pending int

	// Within one Advance.
	expect  map[int]bool // due timers that must fire (or be cancelled) now
	lastKey time.Time    // deadline tick of the last fire, for the order check
	toNext  bool         // advancing to Next(): at most a tick late
	fired   int
	maxLate time.Duration // when advancing to Next()
}

func newModel(t *testing.T, tick time.Duration, seed uint64) *model {
	w := newWheel(t, tick)
	return &model{t: t, w: w, tick: tick, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: origin}
}

// randomDelay mixes scales from sub-tick to 30 days (and a few beyond, and in the past).
func (m *model) randomDelay() time.Duration {
	switch m.rng.IntN(10) {
	case 0:
		return time.Duration(m.rng.Int64N(int64(m.tick))) // sub-tick, 0 included
	case 1:
		return time.Duration(m.rng.Int64N(int64(64 * m.tick)))
	case 2:
		return time.Duration(m.rng.Int64N(int64(4096 * m.tick)))
	case 3:
		return time.Duration(m.rng.Int64N(int64(time.Minute)))
	case 4:
		return time.Duration(m.rng.Int64N(int64(time.Hour)))
	case 5:
		return time.Duration(m.rng.Int64N(int64(24 * time.Hour)))
	case 6:
		return time.Duration(m.rng.Int64N(int64(30 * 24 * time.Hour)))
	case 7:
		return time.Duration(m.rng.IntN(100)) * m.tick // on the grid
	case 8:
		if m.rng.IntN(20) == 0 {
			return time.Duration(m.rng.Int64N(int64(3 * 365 * 24 * time.Hour))) // clamped at 1 ms
		}
		return -time.Duration(m.rng.Int64N(int64(time.Second))) // in the past
	default:
		return time.Duration(m.rng.Int64N(int64(10 * time.Second)))
	}
}

func (m *model) schedule(d time.Duration) {
	id := len(m.ref.timers)
	at := m.now.Add(d)
	m.ref.timers = append(m.ref.timers, refTimer{at: at, sched: m.now, pending: true})
	m.ref.timers[id].h = m.w.Schedule(at, id)
	heap.Push(&m.ref, id)
	m.pending++
}

// cancel cancels a random timer, pending or not, and checks the answer.
func (m *model) cancel() {
	if len(m.ref.timers) == 0 {
		return
	}
	id := m.rng.IntN(len(m.ref.timers))
	tm := &m.ref.timers[id]
	if got := m.w.Cancel(tm.h); got != tm.pending {
		m.t.Fatalf("Cancel(timer %d) = %v, want %v", id, got, tm.pending)
	}
	if tm.pending {
		tm.pending = false
		m.pending--
		delete(m.expect, id)
	}
}

func (m *model) fire(id int) {
	m.fired++
	if id < 0 || id >= len(m.ref.timers) {
		m.t.Fatalf("fired unknown value %d", id)
	}
	tm := &m.ref.timers[id]
	if !tm.pending {
		m.t.Fatalf("timer %d fired twice, or after Cancel", id)
	}
	if !m.expect[id] {
		m.t.Fatalf("timer %d (at %v) fired at %v: early or scheduled during this Advance", id, tm.at.Sub(origin), m.now.Sub(origin))
	}
	if tm.at.After(m.now) {
		m.t.Fatalf("timer %d fired early: at %v, now %v", id, tm.at.Sub(origin), m.now.Sub(origin))
	}
	key := ceilTick(tm.at, m.tick)
	if !tm.at.After(tm.sched) {
		key = time.Time{} // due when scheduled: fires first
	}
	if key.Before(m.lastKey) {
		m.t.Fatalf("timer %d (tick %v) fired after a timer of tick %v", id, key.Sub(origin), m.lastKey.Sub(origin))
	}
	m.lastKey = key
	late := m.now.Sub(tm.at)
	if tm.sched.After(tm.at) {
		late = m.now.Sub(tm.sched)
	}
	if m.toNext && late > m.tick {
		m.t.Fatalf("timer %d fired %v late advancing to Next(), want <= %v", id, late, m.tick)
	}
	if m.toNext {
		m.maxLate = max(m.maxLate, late)
	}
	tm.pending = false
	m.pending--
	delete(m.expect, id)
	// Now and then, act from the callback like the kernel would.
	switch m.rng.IntN(16) {
	case 0:
		m.schedule(m.randomDelay())
	case 1:
		m.cancel()
	}
}

// advance moves the wheel to now and checks exactly the due timers fired.
func (m *model) advance(now time.Time, toNext bool) {
	if now.After(m.now) {
		m.now = now
	}
	if m.expect == nil {
		m.expect = map[int]bool{}
	}
	clear(m.expect)
	for {
		id, ok := m.ref.earliest()
		if !ok || m.ref.timers[id].at.After(m.now) {
			break
		}
		heap.Pop(&m.ref)
		m.expect[id] = true
	}
	m.lastKey, m.toNext, m.fired = time.Time{}, toNext, 0
	got := m.w.Advance(now, m.fire)
	if got != m.fired {
		m.t.Fatalf("Advance() = %d, want the %d calls of fire", got, m.fired)
	}
	for id := range m.expect {
		m.t.Fatalf("timer %d (at %v) did not fire at %v", id, m.ref.timers[id].at.Sub(origin), m.now.Sub(origin))
	}
	m.check()
}

// check compares Len and Next with the reference.
func (m *model) check() {
	if got := m.w.Len(); got != m.pending {
		m.t.Fatalf("Len() = %d, want %d", got, m.pending)
	}
	next, ok := m.w.Next()
	id, want := m.ref.earliest()
	if ok != want {
		m.t.Fatalf("Next() = _, %v, want %v", ok, want)
	}
	if !ok {
		return
	}
	tm := m.ref.timers[id]
	limit := ceilTick(tm.at, m.tick)
	if limit.Before(m.now) {
		limit = m.now
	}
	if next.After(limit) {
		m.t.Fatalf("Next() = %v, want <= %v (earliest deadline %v)", next.Sub(origin), limit.Sub(origin), tm.at.Sub(origin))
	}
	if !tm.at.After(m.now) {
		return // a timer is due: Next() may be now
	}
	if !next.After(m.now) {
		m.t.Fatalf("Next() = %v, want after now %v when nothing is due", next.Sub(origin), m.now.Sub(origin))
	}
}

// TestRandomAgainstReference schedules 100,000 timers with delays from sub-tick to 30 days
// (and some beyond, and in the past) and advances to each Next() or by random steps,
// cancelling and scheduling on the way (also from the fire callback); then fewer timers
// with other ticks.
func TestRandomAgainstReference(t *testing.T) {
	tests := []struct {
		name   string
		tick   time.Duration
		toNext int // out of 4: how often to advance to Next() rather than by a random step
		total  int // timers to schedule
	}{
		{"1ms to Next", ms, 4, 100_000},
		{"1ms random steps", ms, 0, 100_000},
		{"1ms mixed", ms, 2, 30_000},
		{"1h tick mixed (clamping)", time.Hour, 2, 30_000},
		{"1ns tick mixed", 1, 2, 30_000},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newModel(t, tt.tick, uint64(i+1))
			total := tt.total
			for range total / 2 {
				m.schedule(m.randomDelay())
			}
			m.check()
			steps := 0
			for m.pending > 0 || len(m.ref.timers) < total {
				steps++
				if len(m.ref.timers) < total && m.rng.IntN(4) == 0 {
					for range m.rng.IntN(50) {
						m.schedule(m.randomDelay())
					}
				}
				if m.rng.IntN(8) == 0 {
					m.cancel()
				}
				if m.rng.IntN(4) < tt.toNext {
					if next, ok := m.w.Next(); ok {
						m.advance(next, true)
						continue
					}
				}
				step := m.randomDelay()
				if m.rng.IntN(10) == 0 {
					step = -step // an earlier now: a no-op but for due timers
				}
				m.advance(m.now.Add(step), false)
			}
			if len(m.ref.timers) < total {
				t.Fatalf("scheduled %d timers, want %d", len(m.ref.timers), total)
			}
			t.Logf("%d timers, %d advances, max lateness advancing to Next() %v", len(m.ref.timers), steps, m.maxLate)
		})
	}
}

// TestOffset checks that offsets from a start without a monotonic reading match
// time.Time.Sub, saturation included, and that a start with one uses it.
func TestOffset(t *testing.T) {
	w := newWheel(t, ms)
	if !w.wall {
		t.Fatal("wall = false for a time without a monotonic reading")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	times := []time.Time{
		origin, origin.Add(1), origin.Add(-1),
		origin.Add(290 * 365 * 24 * time.Hour), origin.Add(-290 * 365 * 24 * time.Hour),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		origin.In(time.FixedZone("x", 3600)).Add(ms),
	}
	for range 1000 {
		d := time.Duration(rng.Int64N(int64(290 * 365 * 24 * time.Hour)))
		times = append(times, origin.Add(d), origin.Add(-d))
	}
	for _, at := range times {
		if got, want := w.offset(at), int64(at.Sub(origin)); got != want {
			t.Fatalf("offset(%v) = %d, want %d", at, got, want)
		}
	}

	start := clock.New().Now() // carries a monotonic reading
	m, err := New[int](ms, start)
	if err != nil {
		t.Fatal(err)
	}
	if m.wall {
		t.Fatal("wall = true for a time with a monotonic reading")
	}
	m.Schedule(start.Add(5*ms), 1)
	m.Schedule(start.Round(0).Add(6*ms), 2) // no monotonic reading: compared by wall clock
	if n := m.Advance(start.Add(5*ms-1), nil); n != 0 {
		t.Fatalf("Advance(5ms-1ns) = %d, want 0", n)
	}
	if n := m.Advance(start.Add(6*ms), nil); n != 2 {
		t.Fatalf("Advance(6ms) = %d, want 2", n)
	}
}
