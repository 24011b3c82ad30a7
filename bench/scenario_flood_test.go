package bench

import (
	"testing"
	"time"
)

// TestFloodScaledDown runs flood at 20 slots with tasks of 10–30 ms for 0.6 s:
// the strict-priority pool starves Low, ax keeps Low's floor, and High waits
// less under ax than behind the FIFO.
func TestFloodScaledDown(t *testing.T) {
	reg := NewRegistry()
	p := floodScenario().Fix(Params{Conc: 20, Queue: 200, Work: 20 * time.Millisecond, Duration: 600 * time.Millisecond}.resolve(floodScenario().Defaults))
	samples := map[string]*Sample{}
	for _, name := range []string{"ax", "priopool", "chanpool"} {
		f, ok := reg.Executor(name)
		if !ok {
			t.Fatalf("no executor %q", name)
		}
		if !runsOn(floodScenario(), f) {
			t.Fatalf("flood does not run on %s", name)
		}
		s, err := floodScenario().Run(t.Context(), f, p)
		if err != nil {
			t.Fatalf("flood on %s: %v", name, err)
		}
		samples[name] = s
		m := s.Metrics
		t.Logf("%s: High p99 %.0f µs, Low share %.3f, timed out %v", name, m["wait_p99_us_high"], m["share_low"], m["timed_out"])
		if m["lost"] != 0 {
			t.Errorf("%s: lost = %v, want 0 (notes %v)", name, m["lost"], s.Notes)
		}
		if _, ok := m["timed_out"]; !ok {
			t.Errorf("%s: no timed_out metric", name)
		}
	}
	ax, prio, fifo := samples["ax"].Metrics, samples["priopool"].Metrics, samples["chanpool"].Metrics
	if prio["share_low"] > 0.005 {
		t.Errorf("priopool share_low = %v, want about 0: High and Normal ask for more than every slot", prio["share_low"])
	}
	if ax["share_low"] < 0.03 {
		t.Errorf("ax share_low = %v, want about its 5 %% floor", ax["share_low"])
	}
	if ax["wait_p99_us_high"] >= fifo["wait_p99_us_high"] {
		t.Errorf("High p99: ax %v µs >= chanpool %v µs, want less than behind the FIFO", ax["wait_p99_us_high"], fifo["wait_p99_us_high"])
	}
}

func TestFloodPlan(t *testing.T) {
	p := floodScenario().Fix(Params{}.resolve(floodScenario().Defaults))
	plan := mixPlan(floodMix, p)
	want := [numPriorities]float64{High: 1200, Normal: 1000, Low: 6000}
	for pr, w := range want {
		if got := plan[pr].rate; got != w {
			t.Errorf("mixPlan(floodMix)[%s].rate = %v, want %v", Priority(pr), got, w)
		}
	}
	if p.N != 16400 || p.Rate != 6000 {
		t.Errorf("fixed flood params: N %d, Rate %v; want 16400 and 6000", p.N, p.Rate)
	}
}
