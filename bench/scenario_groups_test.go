package bench

import (
	"testing"
	"time"
)

func TestGroupsScenarioOnAx(t *testing.T) {
	reg := NewRegistry()
	sc, ok := reg.Scenario("groups")
	if !ok {
		t.Fatal(`Scenario("groups") missing`)
	}
	f, ok := reg.Executor("ax")
	if !ok || !runsOn(sc, f) {
		t.Fatal("groups does not run on ax")
	}
	if cp, _ := reg.Executor("chanpool"); runsOn(sc, cp) {
		t.Error("groups runs on chanpool, which has no Keyed")
	}
	p := Params{Scale: 0.2, N: 5000}.resolve(sc.Defaults)
	s, err := sc.Run(t.Context(), f, p)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	m := s.Metrics
	t.Logf("metrics: %v; notes: %v", m, s.Notes)
	// The limits are invariants: a permit is held until Run returns, and a call
	// ends at the server before its answer leaves.
	if m["max_conc_per_key"] > groupsKeyConc || m["max_conc_per_key_client"] > groupsKeyConc || m["conc_exact"] != 1 {
		t.Errorf("max concurrency per key: server %v, client %v; want <= %d", m["max_conc_per_key"], m["max_conc_per_key_client"], groupsKeyConc)
	}
	if m["max_conc_per_key"] < 1 || m["max_conc_hang_key"] < 1 {
		t.Errorf("no call counted at the server: %v, hanging key %v", m["max_conc_per_key"], m["max_conc_hang_key"])
	}
	if m["not_run"] != 0 && m["breaker_opened"] == 0 {
		t.Errorf("%v tasks never ran, and no breaker opened to refuse them", m["not_run"])
	}
	if m["timed_out"] < 1 {
		t.Errorf("timed_out = %v, want the hanging key's calls", m["timed_out"])
	}
	if m["fail_key_calls"] < 1 {
		t.Errorf("fail_key_calls = %v, want >= 1", m["fail_key_calls"])
	}
	for _, name := range []string{"wait_p99_us", "wait_p99_us_nobad", "wait_ratio", "rate_dev_pct_max", "overhead_ns_per_task", "breaker_opened", "fail_calls_open_max"} {
		if _, ok := m[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}

func TestRateDeviation(t *testing.T) {
	const iv = float64(10 * time.Millisecond)
	even := make([]int64, 30)
	for i := range even {
		even[i] = int64(i) * int64(iv)
	}
	tests := []struct {
		name        string
		s           []int64
		w           int
		dev, excess float64
		tolerance   float64
	}{
		{"even", even, 10, 0, 0, 1e-9},
		{"too few", even[:9], 10, 0, 0, 1e-9},
		{"one late", append(append([]int64{}, even[:10]...), even[10]+int64(iv)), 10, 0.1, 0, 1e-9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, excess := rateDeviation(tt.s, iv, tt.w)
			if d := dev - tt.dev; d > tt.tolerance || d < -tt.tolerance {
				t.Errorf("rateDeviation() dev = %v, want %v", dev, tt.dev)
			}
			if d := excess - tt.excess; d > tt.tolerance || d < -tt.tolerance {
				t.Errorf("rateDeviation() excess = %v, want %v", excess, tt.excess)
			}
		})
	}
}
