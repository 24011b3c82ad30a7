package fuzz

import (
	"slices"

	"github.com/axsched/ax/queue"
)

// RingModel is the reference model of [queue.Ring]: a plain slice, oldest first,
// with a capacity. Its methods mirror the ring's.
type RingModel[T any] struct {
	Items    []T
	Capacity int
}

// Push appends v and reports whether there was room.
func (m *RingModel[T]) Push(v T) bool {
	if len(m.Items) >= m.Capacity {
		return false
	}
	m.Items = append(m.Items, v)
	return true
}

// Pop removes and returns the oldest element.
func (m *RingModel[T]) Pop() (T, bool) {
	var zero T
	if len(m.Items) == 0 {
		return zero, false
	}
	v := m.Items[0]
	m.Items = slices.Delete(m.Items, 0, 1)
	return v, true
}

// Peek returns the oldest element.
func (m *RingModel[T]) Peek() (T, bool) {
	var zero T
	if len(m.Items) == 0 {
		return zero, false
	}
	return m.Items[0], true
}

// PopBack removes and returns the newest element.
func (m *RingModel[T]) PopBack() (T, bool) {
	var zero T
	if len(m.Items) == 0 {
		return zero, false
	}
	v := m.Items[len(m.Items)-1]
	m.Items = m.Items[:len(m.Items)-1]
	return v, true
}

// PeekBack returns the newest element.
func (m *RingModel[T]) PeekBack() (T, bool) {
	var zero T
	if len(m.Items) == 0 {
		return zero, false
	}
	return m.Items[len(m.Items)-1], true
}

// Remove removes and returns the first element for which matchFunc is true.
func (m *RingModel[T]) Remove(matchFunc func(T) bool) (T, bool) {
	var zero T
	i := slices.IndexFunc(m.Items, matchFunc)
	if i < 0 {
		return zero, false
	}
	v := m.Items[i]
	m.Items = slices.Delete(m.Items, i, i+1)
	return v, true
}

// Resize sets the capacity and reports whether it was valid (>= 1 and >= Len).
func (m *RingModel[T]) Resize(capacity int) bool {
	if capacity < 1 || capacity < len(m.Items) {
		return false
	}
	m.Capacity = capacity
	return true
}

// Clear removes every element and returns them, oldest first.
func (m *RingModel[T]) Clear() []T {
	out := m.Items
	m.Items = nil
	return out
}

// FloorModel is the rule of [queue.Picker] written out plainly, with fractions:
//
//   - A cycle holds c = High + Normal + LowGuaranteed picks. It ends once it holds c
//     picks and no ready floor level (Normal, Low) has had fewer picks than its
//     quota, and at 2c picks in any case.
//   - A ready floor level that has had fewer picks than its quota, and whose share
//     of the cycle so far would stay below its quota's share counting the next
//     pick, takes that pick (Low before Normal).
//   - Otherwise the highest ready level takes it.
//   - New quotas apply from the next pick; the counts of the cycle are kept.
type FloorModel struct {
	Quota [queue.NumLevels]int
	Used  [queue.NumLevels]int // picks per level in the current cycle
	N     int                  // picks in the current cycle
	Cycle uint64               // number of the current cycle
}

// NewFloorModel returns a model at the start of cycle 0 with quotas q.
func NewFloorModel(q queue.Quotas) *FloorModel {
	m := &FloorModel{}
	m.SetQuotas(q)
	return m
}

// SetQuotas replaces the quotas.
func (m *FloorModel) SetQuotas(q queue.Quotas) {
	m.Quota = [queue.NumLevels]int{q.High, q.Normal, q.LowGuaranteed}
}

// Next returns the level the next pick goes to when ready are the ready levels,
// and whether that pick starts a new cycle; ok is false when nothing is ready.
func (m *FloorModel) Next(ready queue.Mask) (l queue.Level, newCycle, ok bool) {
	ready &= queue.AllLevels
	if ready == 0 {
		return 0, false, false
	}
	c := m.Quota[queue.High] + m.Quota[queue.Normal] + m.Quota[queue.Low]
	owed := false
	for _, f := range []queue.Level{queue.Normal, queue.Low} {
		if ready.Has(f) && m.Used[f] < m.Quota[f] {
			owed = true
		}
	}
	used, n := m.Used, m.N
	if (n >= c && !owed) || n >= 2*c {
		used, n, newCycle = [queue.NumLevels]int{}, 0, true
	}
	for _, f := range []queue.Level{queue.Low, queue.Normal} {
		if ready.Has(f) && used[f] < m.Quota[f] && float64(used[f])/float64(m.Quota[f]) < float64(n+1)/float64(c) {
			return f, newCycle, true
		}
	}
	for _, l := range []queue.Level{queue.High, queue.Normal, queue.Low} {
		if ready.Has(l) {
			return l, newCycle, true
		}
	}
	return 0, false, false
}

// Take records a pick of l; newCycle is what [FloorModel.Next] returned for it.
func (m *FloorModel) Take(l queue.Level, newCycle bool) {
	if newCycle {
		m.Used, m.N = [queue.NumLevels]int{}, 0
		m.Cycle++
	}
	m.Used[l]++
	m.N++
}

// BucketsModel is the reference model of [queue.Buckets]: a slice per level and the
// aging rule written out plainly. It takes the picker's decisions from Picker, a
// [queue.Picker] of its own fed with the same readiness, so that it checks the
// buckets and aging exactly while the picker itself is checked against
// [FloorModel].
type BucketsModel[T any] struct {
	Buckets  [queue.NumLevels]RingModel[T]
	Picker   *queue.Picker
	AgedFunc func(l queue.Level, head T) bool // nil: aging off
}

// Len returns the number of elements in all buckets.
func (m *BucketsModel[T]) Len() int {
	n := 0
	for _, b := range m.Buckets {
		n += len(b.Items)
	}
	return n
}

// aged reports whether the head of level l's bucket is aged, counting only allowed,
// non-empty buckets.
func (m *BucketsModel[T]) aged(l queue.Level, allowed queue.Mask) bool {
	b := m.Buckets[l].Items
	return m.AgedFunc != nil && allowed.Has(l) && len(b) > 0 && m.AgedFunc(l, b[0])
}

// Pop applies the aging rule of the package documentation of queue:
//
//   - a level is offered to the picker when its bucket is allowed and non-empty, or
//     when the bucket one level below has an aged head;
//   - a High pick takes the aged head of Normal unless High's own head is aged; a
//     Normal pick takes the aged head of Low unless Normal's own head is aged;
//   - otherwise the pick takes the head of its own bucket.
func (m *BucketsModel[T]) Pop(allowed queue.Mask) (v T, from queue.Level, ok bool) {
	var credit queue.Mask
	for l := range queue.Level(queue.NumLevels) {
		if allowed.Has(l) && len(m.Buckets[l].Items) > 0 {
			credit |= queue.MaskOf(l)
		}
		if l+1 < queue.NumLevels && m.aged(l+1, allowed) {
			credit |= queue.MaskOf(l)
		}
	}
	l, ok := m.Picker.Pick(credit)
	if !ok {
		return v, 0, false
	}
	from = l
	if l+1 < queue.NumLevels && m.aged(l+1, allowed) && !m.aged(l, allowed) {
		from = l + 1
	}
	v, _ = m.Buckets[from].Pop()
	return v, from, true
}
