// Package fifo is a growable first-in first-out queue with a cheap insertion at
// the front: the groups' key queues and key lists in package kernel.
package fifo

// Queue is a FIFO of T. The zero value is an empty queue. Not safe for concurrent
// use.
type Queue[T any] struct {
	s    []T
	head int
}

// Len returns the number of values queued.
func (r *Queue[T]) Len() int { return len(r.s) - r.head }

// Push appends v at the back.
func (r *Queue[T]) Push(v T) { r.s = append(r.s, v) }

// PushFront puts v at the front.
func (r *Queue[T]) PushFront(v T) {
	if r.head > 0 {
		r.head--
		r.s[r.head] = v
		return
	}
	r.s = append(r.s, v)
	copy(r.s[1:], r.s)
	r.s[0] = v
}

// Peek returns the front value. The queue must not be empty.
func (r *Queue[T]) Peek() T { return r.s[r.head] }

// Pop takes the front value out. The queue must not be empty. The space of the
// values taken is reclaimed as the queue empties or its front half is unused.
func (r *Queue[T]) Pop() T {
	var zero T
	v := r.s[r.head]
	r.s[r.head] = zero
	r.head++
	if r.head == len(r.s) {
		r.s, r.head = r.s[:0], 0
		if cap(r.s) > 64 {
			r.s = nil
		}
	} else if r.head >= 32 && r.head*2 >= len(r.s) {
		n := copy(r.s, r.s[r.head:])
		clear(r.s[n:])
		r.s, r.head = r.s[:n], 0
	}
	return v
}

// Remove takes out the first value match accepts, reporting whether there was one.
func (r *Queue[T]) Remove(match func(T) bool) bool {
	for i := r.head; i < len(r.s); i++ {
		if match(r.s[i]) {
			copy(r.s[i:], r.s[i+1:])
			var zero T
			r.s[len(r.s)-1] = zero
			r.s = r.s[:len(r.s)-1]
			if r.head == len(r.s) {
				r.s, r.head = r.s[:0], 0
			}
			return true
		}
	}
	return false
}
