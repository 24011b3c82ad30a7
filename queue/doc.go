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
// cycles of High + Normal + LowGuaranteed picks, following [Quotas]: High first,
// with floors for the others.
//
//   - Floors: a ready Normal gets Quotas.Normal picks in a cycle, and a ready Low
//     Quotas.LowGuaranteed, spread evenly over it: a floor level takes the pick
//     whenever its share of the cycle so far, counting this pick, would stay below
//     its quota's share (Low before Normal when both would). A cycle starts with
//     Low whenever Low is ready, so a Low element at the head of its bucket waits
//     less than one cycle while the cycles run their length.
//   - The rest of each pick goes to the highest ready level: High, else Normal,
//     else Low. With every level ready, each level's share is its quota divided
//     by the cycle's length; a level that is not ready (empty, or not allowed by
//     the caller) takes nothing and blocks nobody, and its share goes to the
//     highest ready level (work-conserving).
//   - A cycle ends when it holds its length in picks and no ready floor level is
//     owed picks in it; it runs on, up to twice its length, while one is (a floor
//     level that became ready late in the cycle gets its floor).
//   - [Picker.Peek] says where the next pick would go without counting it, and
//     [Picker.PickAhead] lets a caller that cannot take that level (the kernel,
//     when that level's lookahead is full) take a higher one: the level passed
//     over keeps its turn, and picks ahead stop before they would take a floor's
//     share of the cycle.
//   - [Picker.SetQuotas] takes effect at the next pick; the current cycle keeps the
//     picks it has counted.
//
// With quotas 17/2/1, for instance, High gets 85 % of the picks while Normal and
// Low are saturated, and Normal and Low never less than 10 % and 5 % while they
// have work.
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
//		queue.Quotas{High: 17, Normal: 2, LowGuaranteed: 1},
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
