package queue

import "strconv"

// CapacityMin is the smallest capacity [NewRing], [Ring.Resize] and [NewBuckets]
// accept.
const CapacityMin = 1

// Ring is a bounded FIFO queue held in a ring buffer of fixed capacity. Its storage
// is allocated by [NewRing] and [Ring.Resize] only: [Ring.Push] never grows it and
// never blocks, it returns [ErrFull] instead.
//
// Every method that takes an element out of the ring ([Ring.Pop], [Ring.PopBack],
// [Ring.Remove], [Ring.Clear]) zeroes the slot it leaves, so the ring keeps no
// reference to an element it no longer holds.
//
// A Ring is not safe for concurrent use: one goroutine owns it. The zero value is an
// empty ring of capacity 0, on which Push always returns ErrFull until
// [Ring.Resize] gives it room.
type Ring[T any] struct {
	buf  []T // len(buf) is the capacity
	head int // index in buf of the oldest element
	n    int // number of elements
}

// NewRing returns an empty ring that holds at most capacity elements. It returns an
// error naming "capacity" when capacity < [CapacityMin].
func NewRing[T any](capacity int) (*Ring[T], error) {
	if capacity < CapacityMin {
		return nil, capacityError("capacity", capacity, "must be >= "+strconv.Itoa(CapacityMin))
	}
	return &Ring[T]{buf: make([]T, capacity)}, nil
}

// Len returns the number of elements in the ring.
func (r *Ring[T]) Len() int { return r.n }

// Cap returns the most elements the ring can hold.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// index returns the position in buf of the i-th oldest element (0 <= i < len(buf)).
func (r *Ring[T]) index(i int) int {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return j
}

// Push appends v as the newest element. It returns [ErrFull], and changes nothing,
// when Len() == Cap(). It never blocks and never allocates.
func (r *Ring[T]) Push(v T) error {
	if r.n == len(r.buf) {
		return ErrFull
	}
	r.buf[r.index(r.n)] = v
	r.n++
	return nil
}

// Pop removes and returns the oldest element. It returns the zero value and false
// when the ring is empty.
func (r *Ring[T]) Pop() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = r.index(1)
	r.n--
	return v, true
}

// Peek returns the oldest element without removing it. It returns the zero value and
// false when the ring is empty.
func (r *Ring[T]) Peek() (T, bool) {
	if r.n == 0 {
		var zero T
		return zero, false
	}
	return r.buf[r.head], true
}

// PopBack removes and returns the newest element (the one the last successful
// [Ring.Push] added, if it is still there). It returns the zero value and false when
// the ring is empty.
func (r *Ring[T]) PopBack() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	i := r.index(r.n - 1)
	v := r.buf[i]
	r.buf[i] = zero
	r.n--
	return v, true
}

// PeekBack returns the newest element without removing it. It returns the zero value
// and false when the ring is empty.
func (r *Ring[T]) PeekBack() (T, bool) {
	if r.n == 0 {
		var zero T
		return zero, false
	}
	return r.buf[r.index(r.n-1)], true
}

// Remove removes and returns the oldest element for which matchFunc returns true;
// the other elements keep their FIFO order. It returns the zero value and false, and
// changes nothing, when no element matches. matchFunc is called on the elements from
// oldest to newest until it returns true, and must not modify the ring. Remove takes
// O(Len()) time and does not allocate.
func (r *Ring[T]) Remove(matchFunc func(T) bool) (T, bool) {
	var zero T
	k := -1
	for i := range r.n {
		if matchFunc(r.buf[r.index(i)]) {
			k = i
			break
		}
	}
	if k < 0 {
		return zero, false
	}
	v := r.buf[r.index(k)]
	if k < r.n/2 {
		// Fewer elements before k: move them one step toward the tail.
		for i := k; i > 0; i-- {
			r.buf[r.index(i)] = r.buf[r.index(i-1)]
		}
		r.buf[r.head] = zero
		r.head = r.index(1)
	} else {
		// Fewer elements after k: move them one step toward the head.
		for i := k; i < r.n-1; i++ {
			r.buf[r.index(i)] = r.buf[r.index(i+1)]
		}
		r.buf[r.index(r.n-1)] = zero
	}
	r.n--
	return v, true
}

// Range calls visitFunc on each element from oldest to newest, and stops early when
// visitFunc returns false. visitFunc must not modify the ring.
func (r *Ring[T]) Range(visitFunc func(v T) bool) {
	for i := range r.n {
		if !visitFunc(r.buf[r.index(i)]) {
			return
		}
	}
}

// Resize changes the capacity of the ring to capacity, keeping its elements in
// order. It returns an error, and changes nothing, when capacity < [CapacityMin] or
// capacity < Len(). Resize to the current capacity does nothing; any other capacity
// allocates a new buffer.
func (r *Ring[T]) Resize(capacity int) error {
	switch {
	case capacity < CapacityMin:
		return capacityError("capacity", capacity, "must be >= "+strconv.Itoa(CapacityMin))
	case capacity < r.n:
		return capacityError("capacity", capacity, "must be >= Len() = "+strconv.Itoa(r.n))
	case capacity == len(r.buf):
		return nil
	}
	buf := make([]T, capacity)
	first := min(r.n, len(r.buf)-r.head) // elements before the wrap
	copy(buf, r.buf[r.head:r.head+first])
	copy(buf[first:], r.buf[:r.n-first])
	r.buf, r.head = buf, 0
	return nil
}

// Clear removes the elements the ring holds when it is called, oldest first, and
// calls dropFunc on each one after it has left the ring (dropFunc may be nil).
// Elements that dropFunc pushes stay in the ring. The capacity is unchanged.
func (r *Ring[T]) Clear(dropFunc func(T)) {
	for range r.n {
		v, _ := r.Pop()
		if dropFunc != nil {
			dropFunc(v)
		}
	}
}
