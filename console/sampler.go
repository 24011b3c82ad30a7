package console

import (
	"sync"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/benbjohnson/clock"
)

// sample is one reading of the kernel's Stats by the sampler.
type sample struct {
	at time.Time
	st kernel.Stats
}

// point is what a chart draws of one sample: rates over the interval before it.
type point struct {
	at        time.Time
	submitted float64                    // tasks submitted per second
	ended     float64                    // tasks ended per second
	queued    int                        // tasks queued, all priorities
	running   int                        // attempts running
	waitMean  kernel.ByPriority[float64] // mean wait of the attempts started in the interval, in ms
	waitP99   kernel.ByPriority[float64] // the kernel's recent wait p99 at the sample (Stats.ByPriority[*].WaitRecent), in ms
}

// rateSpan is how many intervals the rates of the pages span.
const rateSpan = 5

// sampler reads the kernel's Stats every interval on a goroutine of its own, and
// keeps the last samples in a ring.
type sampler struct {
	k     *kernel.Kernel // immutable
	clk   clock.Clock    // immutable: the kernel's
	every time.Duration  // immutable

	mu    sync.Mutex
	ring  []point              // guarded by mu: the points, oldest first from next once full
	next  int                  // guarded by mu: the slot the next point takes
	full  bool                 // guarded by mu: ring wrapped
	last  [rateSpan + 1]sample // guarded by mu: the last samples, newest at lastN-1
	lastN int                  // guarded by mu: samples in last

	done chan struct{} // closed when the goroutine returns
}

func newSampler(k *kernel.Kernel, every time.Duration, history int) *sampler {
	sm := &sampler{
		k: k, clk: k.Clock(), every: every,
		ring: make([]point, history),
		done: make(chan struct{}),
	}
	sm.take()
	return sm
}

// run samples until the kernel begins to stop.
func (sm *sampler) run() {
	defer close(sm.done)
	t := sm.clk.Ticker(sm.every)
	defer t.Stop()
	stopping := sm.k.Stopping()
	for {
		select {
		case <-stopping:
			return
		case <-t.C:
			sm.take()
		}
	}
}

// take reads the kernel's figures and records them.
func (sm *sampler) take() {
	st := sm.k.Stats()
	now := sm.clk.Now()
	sm.mu.Lock()
	defer sm.mu.Unlock()
	cur := sample{at: now, st: st}
	if sm.lastN > 0 {
		sm.ring[sm.next] = pointOf(&sm.last[sm.lastN-1], &cur)
	} else {
		sm.ring[sm.next] = point{at: now, queued: queued(&st), running: st.Running}
	}
	if sm.lastN == len(sm.last) {
		copy(sm.last[:], sm.last[1:])
		sm.lastN--
	}
	sm.last[sm.lastN] = cur
	sm.lastN++
	sm.next++
	if sm.next == len(sm.ring) {
		sm.next, sm.full = 0, true
	}
}

// pointOf computes the chart's point of cur from the sample before it.
func pointOf(prev, cur *sample) point {
	p := point{at: cur.at, queued: queued(&cur.st), running: cur.st.Running}
	b := &cur.st.ByPriority
	p.waitP99 = kernel.ByPriority[float64]{High: ms(b.High.WaitRecent.P99), Normal: ms(b.Normal.WaitRecent.P99), Low: ms(b.Low.WaitRecent.P99)}
	dt := cur.at.Sub(prev.at).Seconds()
	if dt <= 0 {
		return p
	}
	p.submitted = float64(submitted(&cur.st)-submitted(&prev.st)) / dt
	p.ended = float64(cur.st.Terminal()-prev.st.Terminal()) / dt
	mean := func(a, b *kernel.PriorityStats) float64 {
		n := b.Wait.Count - a.Wait.Count
		if b.Wait.Count < a.Wait.Count || n == 0 {
			return 0
		}
		sum := float64(b.Wait.Mean)*float64(b.Wait.Count) - float64(a.Wait.Mean)*float64(a.Wait.Count)
		return max(0, sum/float64(n)/float64(time.Millisecond))
	}
	p.waitMean.High = mean(&prev.st.ByPriority.High, &cur.st.ByPriority.High)
	p.waitMean.Normal = mean(&prev.st.ByPriority.Normal, &cur.st.ByPriority.Normal)
	p.waitMean.Low = mean(&prev.st.ByPriority.Low, &cur.st.ByPriority.Low)
	return p
}

func submitted(st *kernel.Stats) uint64 {
	b := &st.ByPriority
	return b.High.Submitted + b.Normal.Submitted + b.Low.Submitted
}

func queued(st *kernel.Stats) int { return st.Queued.High + st.Queued.Normal + st.Queued.Low }

// points returns the chart's points, oldest first, into buf.
func (sm *sampler) points(buf []point) []point {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.full {
		buf = append(buf, sm.ring[sm.next:]...)
	}
	return append(buf, sm.ring[:sm.next]...)
}

// span returns the oldest and the newest of the last samples (the same one when
// only one was taken).
func (sm *sampler) span() (oldest, newest sample) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.last[0], sm.last[sm.lastN-1]
}
