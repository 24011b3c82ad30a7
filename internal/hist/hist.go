// Package hist is a log-linear histogram of durations, sharded so that
// goroutines on different cores record without sharing cache lines, read
// concurrently through atomics.
package hist

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histSub is the number of sub-buckets per power of two: values are kept within
// 1/histSub (12.5 %) of their true size. Buckets is the number of buckets.
const (
	histSubBits = 3
	histSub     = 1 << histSubBits
	Buckets     = 64 * histSub
)

// Shards is how many shards a Hist has, so that goroutines on different cores
// recording on every task do not move one set of counters' cache lines between
// the cores. Each recorder uses a shard of its own (the kernel's loop shard 0,
// each executor the shard of its slot), and readers add the shards up.
const Shards = 4

// Hist is a log-linear histogram of durations in nanoseconds. The loop and the
// executors record into it and readers (Stats, Prometheus) read it concurrently,
// all through atomics. Recording costs a few nanoseconds and never allocates.
type Hist struct {
	shards [Shards]histShard
}

type histShard struct {
	counts [Buckets]atomic.Uint64
	sum    atomic.Int64 // ns
	max    atomic.Int64 // ns
	_      [48]byte     // the next shard starts on a cache line of its own
}

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - 1 // >= histSubBits
	sub := (v >> (e - histSubBits)) & (histSub - 1)
	return (e-histSubBits+1)*histSub + int(sub)
}

// Lower returns the smallest value of bucket i.
func Lower(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	e := i/histSub + histSubBits - 1
	sub := uint64(i % histSub)
	return (1 << e) | sub<<(e-histSubBits)
}

// Observe records d (negative values count as 0) into shard (any int: it is
// reduced to a shard).
func (h *Hist) Observe(shard int, d time.Duration) {
	s := &h.shards[shard&(Shards-1)]
	v := max(int64(d), 0)
	s.counts[histIndex(uint64(v))].Add(1)
	s.sum.Add(v)
	for m := s.max.Load(); v > m && !s.max.CompareAndSwap(m, v); m = s.max.Load() {
	}
}

// Count returns the count of bucket i, all shards together.
func (h *Hist) Count(i int) uint64 {
	var n uint64
	for s := range h.shards {
		n += h.shards[s].counts[i].Load()
	}
	return n
}

// SumMax returns the sum and the largest value, all shards together.
func (h *Hist) SumMax() (sum, mx int64) {
	for s := range h.shards {
		sum += h.shards[s].sum.Load()
		mx = max(mx, h.shards[s].max.Load())
	}
	return sum, mx
}

// Summary summarises a distribution of durations.
type Summary struct {
	Count               uint64
	Mean                time.Duration
	P50, P90, P99, P999 time.Duration
	Max                 time.Duration
}

// Summary reads a consistent-enough summary (each bucket read once).
func (h *Hist) Summary() Summary {
	var counts [Buckets]uint64
	n := h.counts(&counts)
	sum, mx := h.SumMax()
	return summarize(&counts, n, sum, mx)
}

// counts reads every bucket's count into c and returns their total.
func (h *Hist) counts(c *[Buckets]uint64) uint64 {
	var n uint64
	for i := range c {
		c[i] = h.Count(i)
		n += c[i]
	}
	return n
}

// summarize summarises n values in counts, of sum sum and largest value mx.
func summarize(counts *[Buckets]uint64, n uint64, sum, mx int64) Summary {
	p := Summary{Count: n, Max: time.Duration(mx)}
	if n == 0 {
		return p
	}
	p.Mean = time.Duration(sum / int64(n))
	q := func(f float64) time.Duration {
		rank := uint64(f*float64(n-1)) + 1
		var c uint64
		for i, x := range counts {
			c += x
			if c >= rank {
				// The upper edge of the bucket, capped by the maximum seen.
				up := Lower(i + 1)
				if i+1 >= Buckets {
					up = 1<<63 - 1
				}
				v := time.Duration(up - 1)
				if i < histSub {
					v = time.Duration(i)
				}
				return min(v, p.Max)
			}
		}
		return p.Max
	}
	p.P50, p.P90, p.P99, p.P999 = q(0.5), q(0.9), q(0.99), q(0.999)
	return p
}
