package timewheel

// chunkBits sets the size of the chunks nodes are allocated in: 1024 nodes, 32 KiB for an
// 8-byte value, so growing the wheel never copies nodes and costs one allocation per 1024
// timers.
const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	chunkMask = chunkSize - 1
)

// nilIndex ends the free list. It is never a valid node index.
const nilIndex = ^uint32(0)

// node is one entry of the wheel: a list sentinel or a timer. Links are indices into the
// slab rather than pointers, so the slab holds no pointers of its own and costs the
// garbage collector nothing to scan unless T holds pointers.
type node[T any] struct {
	next, prev uint32 // neighbours in the circular list of a slot; next links the free list
	gen        uint32 // odd while the node holds a pending timer, even otherwise
	at         int64  // deadline, in nanoseconds after the wheel's origin
	v          T
}

// slab owns the nodes of a wheel, allocated in fixed-size chunks and recycled through a
// free list.
type slab[T any] struct {
	chunks []*[chunkSize]node[T]
	free   uint32 // head of the free list, or nilIndex
	used   uint32 // nodes [0, used) have been handed out at least once
}

// get returns node i, which must be below s.used.
func (s *slab[T]) get(i uint32) *node[T] {
	return &s.chunks[i>>chunkBits][i&chunkMask]
}

// alloc returns a node that no list holds, recycled if possible.
func (s *slab[T]) alloc() (uint32, *node[T]) {
	if i := s.free; i != nilIndex {
		n := s.get(i)
		s.free = n.next
		return i, n
	}
	i := s.used
	if i == nilIndex {
		panic("timewheel: too many pending timers")
	}
	if int(i>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, new([chunkSize]node[T]))
	}
	s.used++
	return i, s.get(i)
}

// release zeroes the value of node i, marks it not pending and puts it on the free list.
func (s *slab[T]) release(i uint32, n *node[T]) {
	var zero T
	n.v = zero
	n.gen++
	n.next = s.free
	s.free = i
}
