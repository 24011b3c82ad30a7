// Package timewheel implements a hierarchical timing wheel: a set of timers, each carrying a
// value, that fire when a caller-supplied clock passes their deadline. Scheduling,
// cancelling and firing a timer are O(1), and the next moment anything happens is found in
// O(levels) from 64-bit occupancy bitmaps. The ax kernel keeps its delayed tasks, retry
// backoffs and execution timeouts in one [Wheel].
//
//	w, err := timewheel.New[int](time.Millisecond, now)
//	if err != nil {
//		return err
//	}
//	h := w.Schedule(now.Add(2*time.Second), 42)
//	w.Cancel(h) // or let it fire:
//	if next, ok := w.Next(); ok {
//		// arm one timer for next; when it fires:
//		w.Advance(clk.Now(), func(v int) { /* v's deadline has passed */ })
//	}
//
// # Levels
//
// Each level has 64 slots and a bitmap of the occupied ones; a slot of level l spans 64^l
// ticks. A timer sits in the level of the highest base-64 digit in which its deadline (in
// ticks) differs from the wheel's current tick; when the clock reaches the start of its
// slot, the timers of that slot cascade to lower levels, until they reach level 0 and
// fire. With the kernel's default tick of 1 ms:
//
//	level  slot width   one rotation (64 slots)
//	0      1 ms         64 ms
//	1      64 ms        4.1 s
//	2      4.1 s        4.4 min
//	3      4.4 min      4.7 h
//	4      4.7 h        12.4 days
//	5      12.4 days    795 days
//
// [New] gives a wheel as many levels (2 to 9) as it needs to cover at least 30 days with its
// tick: 6 at 1 ms, 9 at 1 ns, 2 at an hour.
//
// # Guarantees
//
// A timer never fires early: [Wheel.Advance] fires a timer only when its now is at or after
// the timer's deadline, and it fires every pending timer whose deadline is. [Wheel.Next]
// returns a time no later than the earliest deadline rounded up to the tick, so a caller that
// calls Advance at Next() fires every timer less than one tick after its deadline (plus its
// own wake-up latency). Timers fire tick by tick in deadline order; timers already due when
// scheduled fire first. Next may also return the time of a cascade, at which Advance moves
// timers down a level without firing any: at most once per level in a timer's life.
//
// A fired or cancelled timer's value is zeroed: the wheel keeps no pointer to it. Its
// [Handle] goes stale, and [Wheel.Cancel] reports false for it even after the entry is
// reused.
//
// # Clock
//
// The wheel never reads the clock: [New], [Wheel.Schedule] and [Wheel.Advance] take times
// from the caller, which may read a real or a mock clock. Ticks are counted from the time
// given to New. Times are compared as [time.Time.Sub] does: by their monotonic clock
// readings when both carry one. Time never goes backwards: Advance with an earlier now than
// it has seen only fires timers that were already due.
//
// # Clamping
//
// A timer due more than one rotation of the top level ahead (795 days at 1 ms) waits in the
// top level for a full rotation and is placed again then; it cascades more often but fires
// on time. Deadlines are offsets from New's time and saturate about 292 years away.
//
// # Concurrency and memory
//
// A Wheel belongs to one goroutine: it is not safe for concurrent use and takes no locks.
// Its callbacks may call [Wheel.Schedule] and [Wheel.Cancel], but not [Wheel.Advance] or
// [Wheel.Clear], which panic if re-entered.
//
// Entries are nodes of intrusive doubly-linked lists, linked by 32-bit indices and
// allocated 1024 at a time; freed entries are recycled through a free list. Once the wheel
// has held as many timers, Schedule allocates nothing. An entry takes 24 bytes plus the
// value (32 bytes for an 8-byte value), and holds no pointer unless the value does.
package timewheel
