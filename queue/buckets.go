package queue

import (
	"errors"
	"strconv"
)

// Buckets holds one bounded FIFO [Ring] per level and a [Picker] that chooses the
// level of each [Buckets.Pop], with optional aging (see the package documentation).
//
// Buckets is not safe for concurrent use: one goroutine owns it. The zero value has
// buckets of capacity 0 and must not be used; create it with [NewBuckets].
type Buckets[T any] struct {
	rings    [NumLevels]Ring[T]
	picker   Picker
	agedFunc func(l Level, head T) bool // nil: aging is off
	pickedAs Level                      // the credit the last pop spent (PickedAs)
}

// NewBuckets returns empty buckets with the capacities caps, indexed by level, and a
// picker with quotas q. It returns an error naming each bad capacity (below
// [CapacityMin]) and each bad quota field ([Quotas.Validate]), combined with
// [errors.Join].
func NewBuckets[T any](caps [NumLevels]int, q Quotas) (*Buckets[T], error) {
	var errs []error
	for l, c := range caps {
		if c < CapacityMin {
			errs = append(errs, capacityError("capacity of "+Level(l).String(), c, "must be >= "+strconv.Itoa(CapacityMin)))
		}
	}
	if err := q.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	b := &Buckets[T]{picker: Picker{quota: q.levels()}}
	for l, c := range caps {
		b.rings[l].buf = make([]T, c)
	}
	return b, nil
}

// Bucket returns the ring of level l, for direct access ([Ring.Remove],
// [Ring.PopBack], [Ring.Len], [Ring.Resize], ...). It panics when l is not a valid
// level.
func (b *Buckets[T]) Bucket(l Level) *Ring[T] {
	if l >= NumLevels {
		panic("queue: invalid level " + l.String())
	}
	return &b.rings[l]
}

// Picker returns the picker used by [Buckets.Pop], e.g. to change its quotas with
// [Picker.SetQuotas].
func (b *Buckets[T]) Picker() *Picker { return &b.picker }

// Len returns the number of elements in all buckets.
func (b *Buckets[T]) Len() int {
	return b.rings[High].n + b.rings[Normal].n + b.rings[Low].n
}

// Push appends v to the bucket of level l. It returns [ErrFull], and changes nothing,
// when that bucket is full. It panics when l is not a valid level.
func (b *Buckets[T]) Push(l Level, v T) error {
	return b.Bucket(l).Push(v)
}

// SetAged sets the aging hook; nil turns aging off. [Buckets.Pop] calls agedFunc
// with a level and the element at the head of that level's bucket, and agedFunc
// reports whether that element has waited long enough to be picked as if it were one
// level higher. agedFunc must not modify the buckets.
func (b *Buckets[T]) SetAged(agedFunc func(l Level, head T) bool) {
	b.agedFunc = agedFunc
}

// Pop removes and returns the next element to dispatch, with the level of the bucket
// it came from. allowed is the set of levels whose buckets may be popped; Pop returns
// ok == false, and changes nothing, when every allowed bucket is empty.
//
// Without aging, Pop asks the picker for a level among the non-empty allowed buckets
// and pops the head of that level's bucket. With aging, the rule in the package
// documentation applies. Pop calls the aging hook at most once per level and does not
// allocate.
func (b *Buckets[T]) Pop(allowed Mask) (v T, from Level, ok bool) {
	return b.take(allowed, allowed, takePick)
}

// Peek returns the level of the bucket the next [Buckets.Pop] with allowed would
// take from, and changes nothing (the aging hook is called as Pop would).
func (b *Buckets[T]) Peek(allowed Mask) (from Level, ok bool) {
	_, from, ok = b.take(allowed, allowed, takePeek)
	return from, ok
}

// PopAhead pops from a level of allowed for a caller that cannot take the level
// [Buckets.Peek] with ready names: the level passed over keeps its turn (see
// [Picker.PickAhead]). ready is the set of levels that count as having work,
// allowed the subset that may be popped. It returns ok == false, and changes
// nothing, when the picker may not pick ahead.
func (b *Buckets[T]) PopAhead(ready, allowed Mask) (v T, from Level, ok bool) {
	return b.take(ready, allowed&ready, takeAhead)
}

// PickedAs returns the level the element of the last successful [Buckets.Pop] or
// [Buckets.PopAhead] was picked as: the level of its bucket, or the level above
// when it was aged (see Aging in the package documentation), whichever level's
// credit it spent.
func (b *Buckets[T]) PickedAs() Level { return b.pickedAs }

// How take asks the picker.
const (
	takePick  = iota // Pick: pop
	takePeek         // Peek: only say where Pop would take from
	takeAhead        // PickAhead: pop from allowed, the passed-over level keeping its turn
)

// take is Pop, Peek and PopAhead, as mode says: ready are the levels that count
// as having work, allowed the subset it may pop from.
func (b *Buckets[T]) take(ready, allowed Mask, mode int) (v T, from Level, ok bool) {
	var nonEmpty Mask
	if b.rings[High].n > 0 {
		nonEmpty |= 1 << High
	}
	if b.rings[Normal].n > 0 {
		nonEmpty |= 1 << Normal
	}
	if b.rings[Low].n > 0 {
		nonEmpty |= 1 << Low
	}
	ready &= nonEmpty
	allowed &= ready
	credit := ready // levels whose credit may be spent
	var agedNormal, agedLow bool
	if b.agedFunc != nil {
		if ready.Has(Normal) && b.agedFunc(Normal, b.rings[Normal].buf[b.rings[Normal].head]) {
			agedNormal = true
			credit |= 1 << High
		}
		if ready.Has(Low) && b.agedFunc(Low, b.rings[Low].buf[b.rings[Low].head]) {
			agedLow = true
			credit |= 1 << Normal
		}
	}
	var l Level
	switch mode {
	case takePeek:
		l, ok = b.picker.Peek(credit)
	case takeAhead:
		allowedCredit := allowed
		if agedNormal && allowed.Has(Normal) {
			allowedCredit |= 1 << High
		}
		if agedLow && allowed.Has(Low) {
			allowedCredit |= 1 << Normal
		}
		l, ok = b.picker.PickAhead(credit, allowedCredit)
	default:
		l, ok = b.picker.Pick(credit)
	}
	if !ok {
		return v, 0, false
	}
	from = l
	switch {
	case l == High && agedNormal && allowed.Has(Normal):
		// The aged Normal head takes High's pick unless High's own head is aged.
		if !allowed.Has(High) || !b.agedFunc(High, b.rings[High].buf[b.rings[High].head]) {
			from = Normal
		}
	case l == Normal && agedLow && allowed.Has(Low) && (!agedNormal || !allowed.Has(Normal)):
		from = Low
	}
	if mode == takePeek {
		return v, from, true
	}
	b.pickedAs = from
	if (from == Normal && agedNormal) || (from == Low && agedLow) {
		b.pickedAs = from - 1
	}
	v, _ = b.rings[from].Pop()
	return v, from, true
}
