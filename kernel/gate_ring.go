package kernel

// ring is a growable FIFO with a cheap front insertion: the groups' key queues.
type ring[T any] struct {
	s    []T
	head int
}

func (r *ring[T]) len() int { return len(r.s) - r.head }

func (r *ring[T]) push(v T) { r.s = append(r.s, v) }

func (r *ring[T]) pushFront(v T) {
	if r.head > 0 {
		r.head--
		r.s[r.head] = v
		return
	}
	r.s = append(r.s, v)
	copy(r.s[1:], r.s)
	r.s[0] = v
}

func (r *ring[T]) peek() T { return r.s[r.head] }

func (r *ring[T]) pop() T {
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

// remove takes v out, reporting whether it was there.
func (r *ring[T]) remove(match func(T) bool) bool {
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
