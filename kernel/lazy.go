package kernel

import (
	"container/heap"
	"context"
	"time"

	"github.com/axsched/ax/kernel/internal/chunk"
)

// A delayed fire-and-forget task ([Kernel.TryGo] or [Kernel.Go] with a Delay or an
// At) spends most of its life waiting, where nobody can see it: it has no Handle,
// and without Config.OnEvent no event names it. So it travels and waits as a
// lazyTask of 24 bytes, and gets its full record (a pooled Handle and its attempt)
// only when it comes due. It travels in the intake's chunks of 255 (lazyQueue, of kernel/internal/chunk).
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

// lazyIntake is a lazy task on its way to the loop, with its due time (mono), in
// the intake's chunked queue (kernel/internal/chunk): a burst that outruns the loop
// is never copied, and emptied chunks are reused.
type (
	lazyIntake = chunk.Entry[lazyTask]
	lazyChunk  = chunk.Chunk[lazyTask]
	lazyQueue  = chunk.Queue[lazyTask]
)

// lazyParkAfter is how far ahead the first task of a full chunk must be due for
// the loop to park the chunk whole: a chunk due sooner is unpacked at once, so
// that the intake gets it back while it is warm.
const lazyParkAfter = int64(time.Second)

func (t *lazyTask) prio() Priority         { return Priority(t.meta >> lazyPrioShift) }
func (t *lazyTask) timeout() time.Duration { return time.Duration(t.meta & lazyTimeoutMax) }

// acceptLazies takes in the lazy tasks of the chunks from c on. A full chunk whose
// tasks are all due past lazyParkAfter is parked whole, until its first task is due: a burst
// of far-future tasks costs the loop one step per chunk, and each pending task its
// 32 bytes in the chunk. The other chunks are unpacked, task by task, and returned
// emptied, linked, for reuse. Loop only.
func (k *Kernel) acceptLazies(c *lazyChunk) (emptied *lazyChunk) {
	for c != nil {
		next := c.Next
		k.ls.live += c.N
		if c.N == chunk.Len && c.MinDue > k.ls.nowMono+lazyParkAfter {
			c.Next = nil
			heap.Push(&k.ls.parked, c)
			k.countParked(c, 1)
		} else {
			k.unpack(c)
			c.Next = emptied
			emptied = c
		}
		c = next
	}
	return emptied
}

// unparkDue unpacks the parked chunks whose first task is due, and adds them to
// k.ls.lazyDone for reuse. Loop only.
func (k *Kernel) unparkDue() {
	for len(k.ls.parked) > 0 && k.ls.parked[0].MinDue <= k.ls.nowMono {
		c := heap.Pop(&k.ls.parked).(*lazyChunk)
		k.countParked(c, -1)
		k.unpack(c)
		c.Next = k.ls.lazyDone
		k.ls.lazyDone = c
	}
}

// countParked adds sign times the tasks of the parked chunk c to the delayed
// counts of their levels. Loop only.
func (k *Kernel) countParked(c *lazyChunk, sign int) {
	for i := range c.N {
		k.ls.delayed[levelOf(c.E[i].V.prio())] += sign
	}
}

// unpack places each lazy task of chunk c (counted live already) and empties c.
// Loop only.
func (k *Kernel) unpack(c *lazyChunk) {
	for i := range c.N {
		k.placeLazy(&c.E[i])
	}
	clear(c.E[:c.N])
	c.N = 0
}

// endParked ends the tasks of the parked chunks (see endLazy) and drops the
// chunks. Loop only.
func (k *Kernel) endParked(to State) {
	for _, c := range k.ls.parked {
		for i := range c.N {
			k.endLazy(&c.E[i].V, to)
		}
	}
	clear(k.ls.parked)
	k.ls.parked = k.ls.parked[:0]
}

// placeLazy puts a lazy task into the wheel, or into its bucket if it is due
// already. Loop only.
func (k *Kernel) placeLazy(l *lazyIntake) {
	if l.Due > k.ls.nowMono {
		k.ls.wheel.Schedule(k.at(l.Due), timerEntry{t: l.V})
		k.ls.delayed[levelOf(l.V.prio())]++
		return
	}
	k.toBucket(k.lazyHandle(&l.V), 0)
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

// endLazy ends a lazy task that never came due: Abandoned by Shutdown, Canceled by
// Close. Loop only.
func (k *Kernel) endLazy(t *lazyTask, to State) {
	l := levelOf(t.prio())
	k.ls.delayed[l]--
	k.ls.live--
	k.release(l, 1)
	if to == Abandoned {
		k.m.abandoned[l].Inc()
	} else {
		k.m.canceled[l].Inc()
	}
}
