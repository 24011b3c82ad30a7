package bench

import (
	"math"
	"slices"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample that at least p % of the samples do
// not exceed. sorted must be in ascending order. It returns 0 for no samples;
// p <= 0 gives the minimum and p >= 100 the maximum.
func Percentile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	// The small epsilon keeps p*n that are whole numbers in theory (99.9 % of
	// 1000) from rounding up one rank through floating-point error.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Quantiles are the percentiles the reports show, in microseconds.
type Quantiles struct {
	P50, P90, P99, P999, Max float64
	N                        int
}

// QuantilesOf sorts samples (nanoseconds) in place and returns their
// percentiles in microseconds. Each figure is an actual sample.
func QuantilesOf(samples []int64) Quantiles {
	slices.Sort(samples)
	us := func(p float64) float64 { return float64(Percentile(samples, p)) / 1e3 }
	return Quantiles{
		P50: us(50), P90: us(90), P99: us(99), P999: us(99.9), Max: us(100),
		N: len(samples),
	}
}

// put stores q in m as NAME_p50_us … NAME_max_us, with suffix (such as
// "_high") after the unit's position: wait_p99_us_high.
func (q Quantiles) put(m map[string]float64, name, suffix string) {
	m[name+"_p50_us"+suffix] = q.P50
	m[name+"_p90_us"+suffix] = q.P90
	m[name+"_p99_us"+suffix] = q.P99
	m[name+"_p999_us"+suffix] = q.P999
	m[name+"_max_us"+suffix] = q.Max
}

// Stat is one metric over the repetitions of a run: median, minimum and maximum.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// StatOf returns the median (the mean of the two middle values for an even
// count), minimum and maximum of vs. NaN values are left out; no values give
// the zero Stat. vs is not modified.
func StatOf(vs []float64) Stat {
	s := make([]float64, 0, len(vs))
	for _, v := range vs {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return Stat{}
	}
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[n-1]}
}
