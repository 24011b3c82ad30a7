package bench

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1) // 1 … 100
	}
	thousand := make([]int64, 1000)
	for i := range thousand {
		thousand[i] = int64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []int64
		p      float64
		want   int64
	}{
		{"empty", nil, 50, 0},
		{"one", []int64{7}, 99.9, 7},
		{"p0 is the min", []int64{3, 5, 9}, 0, 3},
		{"p100 is the max", []int64{3, 5, 9}, 100, 9},
		{"median of odd", []int64{3, 5, 9}, 50, 5},
		{"median of even is the lower middle", []int64{1, 2, 3, 4}, 50, 2},
		{"p50 of 1..100", hundred, 50, 50},
		{"p90 of 1..100", hundred, 90, 90},
		{"p99 of 1..100", hundred, 99, 99},
		{"p99.9 of 1..100 rounds up", hundred, 99.9, 100},
		{"p99.9 of 1..1000", thousand, 99.9, 999},
		{"p99 of 1..1000", thousand, 99, 990},
		{"p0.1 of 1..1000", thousand, 0.1, 1},
		{"p25 of four", []int64{10, 20, 30, 40}, 25, 10},
		{"p26 of four", []int64{10, 20, 30, 40}, 26, 20},
		{"negative samples", []int64{-5, -1, 0, 2}, 75, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %d, want %d", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestQuantilesOf(t *testing.T) {
	// 1000 samples of 1 µs … 1000 µs, shuffled: QuantilesOf sorts them.
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64((i*7919)%1000+1) * 1000
	}
	q := QuantilesOf(s)
	want := Quantiles{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, N: 1000}
	if q != want {
		t.Errorf("QuantilesOf = %+v, want %+v", q, want)
	}
	m := map[string]float64{}
	q.put(m, "wait", "_low")
	if m["wait_p99_us_low"] != 990 || m["wait_max_us_low"] != 1000 || len(m) != 5 {
		t.Errorf("put = %v, want wait_p99_us_low 990, wait_max_us_low 1000 and 5 names", m)
	}
}

func TestStatOf(t *testing.T) {
	tests := []struct {
		name string
		vs   []float64
		want Stat
	}{
		{"none", nil, Stat{}},
		{"one", []float64{4}, Stat{4, 4, 4}},
		{"odd", []float64{9, 1, 5}, Stat{5, 1, 9}},
		{"even averages the middle", []float64{4, 1, 3, 10}, Stat{3.5, 1, 10}},
		{"NaN left out", []float64{math.NaN(), 2, 6}, Stat{4, 2, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatOf(tt.vs); got != tt.want {
				t.Errorf("StatOf(%v) = %+v, want %+v", tt.vs, got, tt.want)
			}
		})
	}
}

func TestSeriesThinKeepsPeaks(t *testing.T) {
	var s Series
	for i := range 1000 {
		v := 1.0
		if i == 517 {
			v = 99
		}
		s.add(float64(i), v)
	}
	th := s.thin(100)
	if len(th.T) != 100 {
		t.Fatalf("len(thin(100).T) = %d, want 100", len(th.T))
	}
	peak := 0.0
	for _, v := range th.V {
		peak = max(peak, v)
	}
	if peak != 99 {
		t.Errorf("max of thinned series = %v, want 99", peak)
	}
}
