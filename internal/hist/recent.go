package hist

import (
	"slices"
	"sync"
	"time"
)

// Recent tells what histograms (and counters beside them) recorded over about the
// last Span, from readings of them that its readers keep: the recorders pay
// nothing, and a reading is kept at most once a step. A reader's call compares
// the values now with the newest kept reading at least Span old (or the oldest
// kept, when none is that old yet). Safe for concurrent use.
type Recent struct {
	span, step time.Duration // immutable
	hs         []*Hist       // immutable

	mu      sync.Mutex
	ring    []reading // guarded by mu: kept readings, oldest first
	scratch reading   // guarded by mu: the reading of a call that keeps none
	frozen  bool      // guarded by mu: Freeze was called
	last    *result   // guarded by mu: once frozen, what every Read returns
}

type result struct {
	sums   []Summary
	deltas []uint64
	span   time.Duration
}

// Freeze makes every later Read return what the first Read after it returns: the
// figures of a stopped kernel no longer move with time.
func (r *Recent) Freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
}

type reading struct {
	at     time.Time
	counts [][Buckets]uint64 // one per Hist
	sums   []int64
	vals   []uint64
}

// NewRecent returns a Recent of hs over span, keeping a reading at most every
// span/steps.
func NewRecent(span time.Duration, steps int, hs ...*Hist) *Recent {
	return &Recent{span: span, step: span / time.Duration(steps), hs: hs}
}

// Read reads the histograms at now, with vals the counters' values now, and
// returns the summaries of what each histogram recorded since the reading it
// compares with (see Recent), each counter's change since then (0 for one that
// went down), and the span between the two. The first call returns zeros: it only
// keeps its reading. Max is the upper edge of the highest bucket recorded in the
// span, capped by the histogram's largest value ever.
func (r *Recent) Read(now time.Time, vals ...uint64) (sums []Summary, deltas []uint64, span time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil {
		return slices.Clone(r.last.sums), slices.Clone(r.last.deltas), r.last.span
	}
	cur := &r.scratch
	if n := len(r.ring); n == 0 || now.Sub(r.ring[n-1].at) >= r.step {
		r.ring = append(r.ring, reading{})
		cur = &r.ring[len(r.ring)-1]
	}
	if cur.counts == nil {
		cur.counts, cur.sums = make([][Buckets]uint64, len(r.hs)), make([]int64, len(r.hs))
	}
	cur.at, cur.vals = now, append(cur.vals[:0], vals...)
	maxes := make([]int64, len(r.hs))
	for i, h := range r.hs {
		h.counts(&cur.counts[i])
		cur.sums[i], maxes[i] = h.SumMax()
	}
	base := 0
	for i := range r.ring {
		if now.Sub(r.ring[i].at) >= r.span {
			base = i
		}
	}
	if base > 0 {
		kept := copy(r.ring, r.ring[base:])
		clear(r.ring[kept:])
		r.ring = r.ring[:kept]
		if cur != &r.scratch {
			cur = &r.ring[len(r.ring)-1]
		}
	}
	old := &r.ring[0]
	sums, deltas = make([]Summary, len(r.hs)), make([]uint64, len(vals))
	for i := range vals {
		if i < len(old.vals) && vals[i] > old.vals[i] {
			deltas[i] = vals[i] - old.vals[i]
		}
	}
	for i := range r.hs {
		var d [Buckets]uint64
		var n uint64
		top := -1
		for b := range d {
			if c, o := cur.counts[i][b], old.counts[i][b]; c > o {
				d[b] = c - o
				n += d[b]
				top = b
			}
		}
		mx := int64(0)
		if top >= 0 {
			mx = maxes[i]
			if top+1 < Buckets {
				mx = min(mx, int64(Lower(top+1)-1))
			}
		}
		sums[i] = summarize(&d, n, max(cur.sums[i]-old.sums[i], 0), mx)
	}
	span = now.Sub(old.at)
	if r.frozen {
		r.last = &result{sums: slices.Clone(sums), deltas: slices.Clone(deltas), span: span}
	}
	return sums, deltas, span
}
