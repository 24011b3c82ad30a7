package promtext

import (
	"strconv"

	"github.com/axsched/ax/internal/hist"
)

// JoinLabels joins two label lists, either of which may be empty.
func JoinLabels(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// AppendSample appends the line `name{labels} v`.
func AppendSample(b []byte, name, labels string, v uint64) []byte {
	b = AppendSeries(b, name, labels)
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// AppendSeries appends `name{labels} ` (without braces for no labels).
func AppendSeries(b []byte, name, labels string) []byte {
	b = append(b, name...)
	if labels != "" {
		b = append(b, '{')
		b = append(b, labels...)
		b = append(b, '}')
	}
	return append(b, ' ')
}

// NonNeg returns v, or 0 for a negative v (a gauge read between two updates).
func NonNeg(v int64) uint64 { return uint64(max(v, 0)) }

// The histograms' bucket bounds are the powers of two from 2^histLeMin to
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

// AppendHist appends h as the samples of a Prometheus histogram in seconds, with
// the buckets of powers of two from about 1 µs to 68 s and +Inf, _sum and _count;
// labels (possibly empty) go on every sample, before le.
func AppendHist(b []byte, h *hist.Hist, name, labels string) []byte {
	var cum uint64
	i := 0
	bucket := name + "_bucket"
	for e := histLeMin; e <= histLeMax; e++ {
		bound := uint64(1) << e
		for i < hist.Buckets && hist.Lower(i+1) <= bound {
			cum += h.Count(i)
			i++
		}
		b = AppendSample(b, bucket, JoinLabels(labels, histLe[e-histLeMin]), cum)
	}
	for ; i < hist.Buckets; i++ {
		cum += h.Count(i)
	}
	sum, _ := h.SumMax()
	b = AppendSample(b, bucket, JoinLabels(labels, `le="+Inf"`), cum)
	b = AppendSeries(b, name+"_sum", labels)
	b = strconv.AppendFloat(b, float64(sum)/1e9, 'g', -1, 64)
	b = append(b, '\n')
	return AppendSample(b, name+"_count", labels, cum)
}
