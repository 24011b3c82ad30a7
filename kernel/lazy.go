package kernel

import (
	"container/heap"
	"context"
	"time"
)

// A delayed fire-and-forget task ([Kernel.TryGo] or [Kernel.Go] with a Delay or an
// At) spends most of its life waiting, where nobody can see it: it has no Handle,
// and without Config.OnEvent no event names it. So it travels and waits as a
// lazyTask of 24 bytes, and gets its full record (a pooled Handle and its attempt)
// only when it comes due. It travels in the intake's chunks of 255 (lazyQueue).
// The loop parks a full chunk whose tasks are all due more than lazyParkAfter
// ahead, whole, until its first task is due, and puts the other tasks into the
// wheel, by value in their entries. A pending lazy task costs 32 bytes in a
// parked chunk or 56 in the wheel, and no allocation of its own.
//
// It keeps every guarantee of a task: it holds an admission ticket of its bucket
// while it waits, counts as live and delayed, ends Abandoned on Shutdown and
// Canceled on Close, and shows in Stats and metrics like any task. What it needs
// no record for is what a caller could not observe: its sequence number (and so
// its made-up ID) is drawn when it comes due, and its retry policy is its
// priority's, read when a retry is decided, as for every task without its own.
//
// A task takes the full path instead when the lazy form could not carry it: it
// has an ID, an OnTimeout, its own Retry policy or a timeout past lazyTimeoutMax,
// it claimed the eviction of a Low task, or the kernel has an OnEvent (whose
// events name the task from its submission on). Kernel.pathOf decides.

const (
	lazyPrioShift  = 62
	lazyTimeoutMax = 1<<lazyPrioShift - 1

	// lazyBatch is how many lazy tasks may wait in the intake for a parked loop
	// before a submitter wakes it (see Kernel.enqueueLazy).
	lazyBatch = 1024
)

// lazyIntake is a lazy task on its way to the loop, with its due time.
type lazyIntake struct {
	t   lazyTask
	due int64 // mono
}

const (
	// lazyChunkLen is how many lazy tasks a chunk of the intake holds: a chunk
	// fills 8 KiB.
	lazyChunkLen = 255
	// lazyChunksKept bounds the empty chunks the intake keeps for reuse.
	lazyChunksKept = 16
	// lazyParkAfter is how far ahead the first task of a full chunk must be due for
	// the loop to park the chunk whole: a chunk due sooner is unpacked at once, so
	// that the intake gets it back while it is warm.
	lazyParkAfter = int64(time.Second)
)

// lazyChunk is a fixed-size piece of the lazy intake. A full chunk whose tasks
// are all due later is parked whole by the loop until its first task is due.
type lazyChunk struct {
	next   *lazyChunk
	n      int
	minDue int64 // mono: the earliest due of e[:n]
	e      [lazyChunkLen]lazyIntake
}

// lazyQueue is the intake of lazy tasks: a list of fixed-size chunks, so that a
// burst that outruns the loop never copies what it queued, and emptied chunks are
// reused. Guarded by Kernel.in.mu.
type lazyQueue struct {
	head, tail *lazyChunk // queued, oldest first
	n          int        // tasks queued
	free       *lazyChunk // empty chunks, at most lazyChunksKept
	nfree      int
}

// slot returns the entry the next task fills, at the tail, in a new chunk if the
// tail chunk is full. commit then queues it.
func (q *lazyQueue) slot() *lazyIntake {
	t := q.tail
	if t == nil || t.n == lazyChunkLen {
		c := q.free
		if c != nil {
			q.free, c.next = c.next, nil
			q.nfree--
		} else {
			c = new(lazyChunk)
		}
		if t == nil {
			q.head = c
		} else {
			t.next = c
		}
		q.tail = c
		t = c
	}
	return &t.e[t.n]
}

// commit queues the entry slot returned, due at due.
func (q *lazyQueue) commit(due int64) {
	t := q.tail
	if t.n == 0 || due < t.minDue {
		t.minDue = due
	}
	t.n++
	q.n++
}

// take removes every queued chunk and returns the first (they stay linked).
func (q *lazyQueue) take() *lazyChunk {
	c := q.head
	q.head, q.tail, q.n = nil, nil, 0
	return c
}

// recycle keeps emptied chunks, from c on, for reuse, up to lazyChunksKept; the
// others are left to the garbage collector.
func (q *lazyQueue) recycle(c *lazyChunk) {
	for c != nil && q.nfree < lazyChunksKept {
		next := c.next
		c.next = q.free
		q.free = c
		q.nfree++
		c = next
	}
}

func (t *lazyTask) prio() Priority         { return Priority(t.meta >> lazyPrioShift) }
func (t *lazyTask) timeout() time.Duration { return time.Duration(t.meta & lazyTimeoutMax) }

// acceptLazies takes in the lazy tasks of the chunks from c on. A full chunk whose
// tasks are all due past lazyParkAfter is parked whole, until its first task is due: a burst
// of far-future tasks costs the loop one step per chunk, and each pending task its
// 32 bytes in the chunk. The other chunks are unpacked, task by task, and returned
// emptied, linked, for reuse. Loop only.
func (k *Kernel) acceptLazies(c *lazyChunk) (emptied *lazyChunk) {
	for c != nil {
		next := c.next
		k.ls.live += c.n
		if c.n == lazyChunkLen && c.minDue > k.ls.nowMono+lazyParkAfter {
			c.next = nil
			heap.Push(&k.ls.parked, c)
			k.ls.delayed += c.n
		} else {
			k.unpack(c)
			c.next = emptied
			emptied = c
		}
		c = next
	}
	return emptied
}

// unparkDue unpacks the parked chunks whose first task is due, and adds them to
// k.ls.lazyDone for reuse. Loop only.
func (k *Kernel) unparkDue() {
	for len(k.ls.parked) > 0 && k.ls.parked[0].minDue <= k.ls.nowMono {
		c := heap.Pop(&k.ls.parked).(*lazyChunk)
		k.ls.delayed -= c.n
		k.unpack(c)
		c.next = k.ls.lazyDone
		k.ls.lazyDone = c
	}
}

// unpack places each lazy task of chunk c (counted live already) and empties c.
// Loop only.
func (k *Kernel) unpack(c *lazyChunk) {
	for i := range c.n {
		k.placeLazy(&c.e[i])
	}
	clear(c.e[:c.n])
	c.n = 0
}

// endParked ends the tasks of the parked chunks (see endLazy) and drops the
// chunks. Loop only.
func (k *Kernel) endParked(to State) {
	for _, c := range k.ls.parked {
		for i := range c.n {
			k.endLazy(&c.e[i].t, to)
		}
	}
	clear(k.ls.parked)
	k.ls.parked = k.ls.parked[:0]
}

// placeLazy puts a lazy task into the wheel, or into its bucket if it is due
// already. Loop only.
func (k *Kernel) placeLazy(l *lazyIntake) {
	if l.due > k.ls.nowMono {
		k.ls.wheel.Schedule(k.at(l.due), timerEntry{t: l.t})
		k.ls.delayed++
		return
	}
	k.toBucket(k.lazyHandle(&l.t), 0)
}

// lazyHandle builds the full record of a lazy task that came due: a pooled Handle,
// recycled once the task ends, as TryGo's are. Loop only.
func (k *Kernel) lazyHandle(t *lazyTask) *Handle {
	h := handlePool.Get().(*Handle)
	h.pooled = true
	h.k = k
	h.seq = k.seq.Add(1)
	h.prio = t.prio()
	h.bucket = levelOf(h.prio)
	h.run = t.run
	h.timeout = t.timeout()
	h.submitAt = t.submitAt
	h.initFirst(context.Background())
	return h
}

// chunkHeap is a min-heap of parked chunks by their first due (container/heap).
type chunkHeap []*lazyChunk

func (h chunkHeap) Len() int           { return len(h) }
func (h chunkHeap) Less(i, j int) bool { return h[i].minDue < h[j].minDue }
func (h chunkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *chunkHeap) Push(x any)        { *h = append(*h, x.(*lazyChunk)) }
func (h *chunkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}

// endLazy ends a lazy task that never came due: Abandoned by Shutdown, Canceled by
// Close. Loop only.
func (k *Kernel) endLazy(t *lazyTask, to State) {
	l := levelOf(t.prio())
	k.ls.delayed--
	k.ls.live--
	k.release(l, 1)
	if to == Abandoned {
		k.m.abandoned[l].Inc()
	} else {
		k.m.canceled[l].Inc()
	}
}
