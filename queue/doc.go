// Package queue holds the bounded FIFO buckets of ax and the quota picker that
// decides which bucket is dispatched next. It imports only the standard library and
// knows nothing of tasks: the kernel stores its tasks in [Buckets] and asks
// [Buckets.Pop] for the next one.
//
// None of the types is safe for concurrent use. In ax one goroutine, the kernel's
// loop, owns them.
//
// # Rings
//
// A [Ring] is a FIFO queue of fixed capacity. [Ring.Push] returns [ErrFull] when the
// ring is full; it never blocks and never grows the ring, and once a ring is created
// no method but [Ring.Resize] allocates. Elements leave from the head ([Ring.Pop]),
// from the tail ([Ring.PopBack], used to evict the newest element) or from anywhere
// ([Ring.Remove], which keeps the others in order). A slot an element leaves is
// zeroed, so the ring holds no pointer to an element it no longer has.
//
// # Levels and cycles
//
// There are three levels, [High], [Normal] and [Low]. A [Picker] hands out picks in
// cycles, following [Quotas]:
//
//   - In a cycle, High gets at most Quotas.High picks and Normal at most
//     Quotas.Normal picks.
//   - Low gets Quotas.LowGuaranteed picks in a cycle: a cycle never ends while Low is
//     ready before Low has had them, whatever the other levels hold.
//   - The picker is work-conserving: a level that is not ready (empty, or not allowed
//     by the caller) takes no pick and blocks no other level. When no ready level has
//     credit left, a new cycle starts with every credit refilled, so a lone ready
//     level gets every pick.
//   - Within a cycle the picks are interleaved: each pick goes to the ready level
//     with credit that has used the smallest fraction of its quota; a tie goes to
//     Low, else to High. So a cycle starts with Low whenever Low is ready, and while
//     Low stays ready at most Quotas.High + Quotas.Normal picks go to other levels
//     between two picks of Low: a Low element at the head of its bucket waits less
//     than one cycle.
//   - [Picker.SetQuotas] takes effect at the next pick; the current cycle keeps the
//     picks it has counted.
//   - [Picker.Peek] says which level the next pick would go to without counting
//     it, and [Picker.PickInCycle] picks only within the current cycle. A caller
//     that cannot take the level Peek names (the kernel, when that level's
//     lookahead is full) may take a higher one with PickInCycle: the passed-over
//     level keeps its turn, as the cycle cannot end before it had its picks.
//
// With every level ready all the time, every cycle holds exactly
// High + Normal + LowGuaranteed picks, so each level's share of the picks is its
// quota divided by that sum. With quotas 250/166/1, for instance, Low gets one pick
// in every 417.
//
// # Aging
//
// [Buckets.SetAged] installs an optional hook that says whether the element at the
// head of a bucket has waited too long ("aged"). An aged element is picked as if it
// were one level higher: it competes for that level's credit. Exactly, on each
// [Buckets.Pop]:
//
//   - The head of Normal (or Low) is aged when its bucket is allowed and non-empty
//     and the hook returns true for it. The hook is called at most once per level.
//   - Each level is offered to the picker if its own bucket is allowed and
//     non-empty, and High (or Normal) is also offered when the head of Normal (or
//     Low) is aged.
//   - When the picker spends a High pick and the head of Normal is aged, Pop takes
//     the head of Normal unless the head of High is aged too; the same holds one
//     level down for a Normal pick and the head of Low. Otherwise Pop takes the head
//     of the picked level's bucket.
//
// Elements never move between buckets, and Pop reports the bucket an element came
// from. Aging lifts an element by one level only, and the allowed mask still filters
// the bucket an element comes from: an aged Low element is never popped while Low is
// not allowed. An aged element takes the pick of a level whose own head is fresh, so
// a flood of aged Low elements delays fresh Normal elements until they age too.
//
// # Example
//
//	b, err := queue.NewBuckets[*task](
//		[queue.NumLevels]int{10_000, 30_000, 10_000},
//		queue.Quotas{High: 150, Normal: 100, LowGuaranteed: 1},
//	)
//	if err != nil {
//		return err
//	}
//	if err := b.Push(queue.Low, t); errors.Is(err, queue.ErrFull) {
//		return errQueueFull
//	}
//	for free > 0 {
//		t, level, ok := b.Pop(queue.AllLevels)
//		if !ok {
//			break
//		}
//		run(t, level)
//		free--
//	}
package queue
