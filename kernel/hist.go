package kernel

import (
	"math/bits"
	"strconv"
	"sync/atomic"
	"time"
)

// histSub is the number of sub-buckets per power of two: values are kept within
// 1/histSub (12.5 %) of their true size.
const (
	histSubBits = 3
	histSub     = 1 << histSubBits
	histBuckets = 64 * histSub
)

// histShards is how many shards a hist has. Executors on different cores that
// recorded into one set of counters made those cache lines move between the
// cores on every task: a third of the cost of a no-op task. Each executor
// records into the shard of its slot (the loop into shard 0), and readers add
// the shards up.
const histShards = 4

// hist is a log-linear histogram of durations in nanoseconds. The loop and the
// executors record into it and readers (Stats, Prometheus) read it concurrently,
// all through atomics. Recording costs a few nanoseconds and never allocates.
type hist struct {
	shards [histShards]histShard
}

type histShard struct {
	counts [histBuckets]atomic.Uint64
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

// histLower returns the smallest value of bucket i.
func histLower(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	e := i/histSub + histSubBits - 1
	sub := uint64(i % histSub)
	return (1 << e) | sub<<(e-histSubBits)
}

// observe records d (negative values count as 0) into shard (any int: it is
// reduced to a shard).
func (h *hist) observe(shard int, d time.Duration) {
	s := &h.shards[shard&(histShards-1)]
	v := max(int64(d), 0)
	s.counts[histIndex(uint64(v))].Add(1)
	s.sum.Add(v)
	for m := s.max.Load(); v > m && !s.max.CompareAndSwap(m, v); m = s.max.Load() {
	}
}

// count returns the count of bucket i, all shards together.
func (h *hist) count(i int) uint64 {
	var n uint64
	for s := range h.shards {
		n += h.shards[s].counts[i].Load()
	}
	return n
}

// sumMax returns the sum and the largest value, all shards together.
func (h *hist) sumMax() (sum, mx int64) {
	for s := range h.shards {
		sum += h.shards[s].sum.Load()
		mx = max(mx, h.shards[s].max.Load())
	}
	return sum, mx
}

// Percentiles summarises a distribution of durations.
type Percentiles struct {
	Count               uint64
	Mean                time.Duration
	P50, P90, P99, P999 time.Duration
	Max                 time.Duration
}

// percentiles reads a consistent-enough summary (each bucket read once).
func (h *hist) percentiles() Percentiles {
	var counts [histBuckets]uint64
	var n uint64
	for i := range counts {
		counts[i] = h.count(i)
		n += counts[i]
	}
	sum, mx := h.sumMax()
	p := Percentiles{Count: n, Max: time.Duration(mx)}
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
				up := histLower(i + 1)
				if i+1 >= histBuckets {
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

// The Prometheus buckets' bounds are the powers of two from 2^histLeMin to
// 2^histLeMax ns (about 1 µs to 68 s); histLe holds their le labels in seconds.
const (
	histLeMin = 10
	histLeMax = 36
)

var histLe = func() (le [histLeMax - histLeMin + 1]string) {
	for e := histLeMin; e <= histLeMax; e++ {
		le[e-histLeMin] = `le="` + strconv.FormatFloat(float64(uint64(1)<<e)/1e9, 'g', -1, 64) + `"`
	}
	return le
}()

// appendPrometheus appends h as the samples of a Prometheus histogram in seconds,
// with the buckets of histLe and +Inf, _sum and _count; labels (possibly empty) go
// on every sample, before le.
func (h *hist) appendPrometheus(b []byte, name, labels string) []byte {
	var cum uint64
	i := 0
	bucket := name + "_bucket"
	for e := histLeMin; e <= histLeMax; e++ {
		bound := uint64(1) << e
		for i < histBuckets && histLower(i+1) <= bound {
			cum += h.count(i)
			i++
		}
		b = appendSample(b, bucket, joinLabels(labels, histLe[e-histLeMin]), cum)
	}
	for ; i < histBuckets; i++ {
		cum += h.count(i)
	}
	sum, _ := h.sumMax()
	b = appendSample(b, bucket, joinLabels(labels, `le="+Inf"`), cum)
	b = appendSeries(b, name+"_sum", labels)
	b = strconv.AppendFloat(b, float64(sum)/1e9, 'g', -1, 64)
	b = append(b, '\n')
	return appendSample(b, name+"_count", labels, cum)
}
