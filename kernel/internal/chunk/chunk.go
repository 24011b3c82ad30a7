// Package chunk is the queue the kernel's lazy intake is made of: values with a
// due time, queued in fixed-size chunks so that a burst that outruns the consumer
// is never copied, with emptied chunks kept for reuse, and a heap that holds
// parked chunks by their earliest due time. It knows nothing of tasks. A Queue is
// not safe for concurrent use: its owner guards it.
package chunk

// Len is how many values a chunk holds.
const Len = 255

// Kept bounds the empty chunks a queue keeps for reuse.
const Kept = 16

// Entry is one queued value and its due time.
type Entry[T any] struct {
	V   T
	Due int64
}

// Chunk is a fixed-size piece of a queue: E[:N] are its entries, MinDue the
// earliest of their due times, Next the chunk queued after it.
type Chunk[T any] struct {
	Next   *Chunk[T]
	N      int
	MinDue int64
	E      [Len]Entry[T]
}

// Queue is a list of chunks, oldest first, and the empty chunks kept for reuse.
// The zero value is an empty queue.
type Queue[T any] struct {
	head, tail *Chunk[T]
	n          int
	free       *Chunk[T]
	nfree      int
}

// Len returns how many values are queued.
func (q *Queue[T]) Len() int { return q.n }

// Slot returns the entry the next value fills, at the tail, in a new (or reused)
// chunk if the tail chunk is full. Commit then queues it.
func (q *Queue[T]) Slot() *Entry[T] {
	t := q.tail
	if t == nil || t.N == Len {
		c := q.free
		if c != nil {
			q.free, c.Next = c.Next, nil
			q.nfree--
		} else {
			c = new(Chunk[T])
		}
		if t == nil {
			q.head = c
		} else {
			t.Next = c
		}
		q.tail = c
		t = c
	}
	return &t.E[t.N]
}

// Commit queues the entry Slot returned, due at due.
func (q *Queue[T]) Commit(due int64) {
	t := q.tail
	if t.N == 0 || due < t.MinDue {
		t.MinDue = due
	}
	t.N++
	q.n++
}

// Take removes every queued chunk and returns the first; they stay linked by Next.
func (q *Queue[T]) Take() *Chunk[T] {
	c := q.head
	q.head, q.tail, q.n = nil, nil, 0
	return c
}

// Recycle keeps the emptied chunks from c on (linked by Next) for reuse, up to
// Kept; the others are left to the garbage collector.
func (q *Queue[T]) Recycle(c *Chunk[T]) {
	for c != nil && q.nfree < Kept {
		next := c.Next
		c.Next = q.free
		q.free = c
		q.nfree++
		c = next
	}
}

// Heap is a min-heap of chunks by MinDue, for container/heap.
type Heap[T any] []*Chunk[T]

func (h Heap[T]) Len() int           { return len(h) }
func (h Heap[T]) Less(i, j int) bool { return h[i].MinDue < h[j].MinDue }
func (h Heap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

// Push appends x, a *Chunk[T] (container/heap).
func (h *Heap[T]) Push(x any) { *h = append(*h, x.(*Chunk[T])) }

// Pop removes and returns the last chunk (container/heap).
func (h *Heap[T]) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}
