package bench

import (
	"math"
	"testing"
	"time"
)

// satTestParams scale saturation down: 20 slots, Low tasks of 20 ms (Normal
// 2 ms, High 0.4 ms), arrivals for 0.6 s.
var satTestParams = Params{Conc: 20, Queue: 200, Work: 20 * time.Millisecond, Duration: 600 * time.Millisecond}

func TestSaturationScaledDown(t *testing.T) {
	reg := NewRegistry()
	p := fixSaturation(satTestParams.resolve(saturationScenario().Defaults))
	if math.Abs(p.Rate-3000) > 1e-6 || p.N < 1000 {
		t.Fatalf("fixed params = %+v, want Low's rate 3000/s and N the arrivals of 0.6 s", p)
	}
	samples := map[string]*Sample{}
	for _, name := range []string{"priopool", "chanpool", "chanpool-nb", "ax-reserve"} {
		f, ok := reg.Executor(name)
		if !ok {
			t.Fatalf("no executor %q", name)
		}
		s, err := runSaturation(t.Context(), f, p)
		if err != nil {
			t.Fatalf("saturation on %s: %v", name, err)
		}
		samples[name] = s
		m := s.Metrics
		t.Logf("%s: High p50/p99 %.0f/%.0f µs, Low max %.0f µs, shares %.3f/%.3f/%.3f, ideal %.0f µs, rejected %v",
			name, m["wait_p50_us_high"], m["wait_p99_us_high"], m["wait_max_us_low"],
			m["share_high"], m["share_normal"], m["share_low"], m["ideal_wait_us"], m["rejected"])
		sum := m["share_high"] + m["share_normal"] + m["share_low"]
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: shares sum to %v, want 1 (%v %v %v)", name, sum, m["share_high"], m["share_normal"], m["share_low"])
		}
		if m["lost"] != 0 {
			t.Errorf("%s: lost = %v, want 0 (notes %v)", name, m["lost"], s.Notes)
		}
		if ideal := m["ideal_wait_us"]; !(ideal > 0 && ideal < float64(p.Work/time.Microsecond)) {
			t.Errorf("%s: ideal_wait_us = %v, want in (0, %v)", name, ideal, p.Work/time.Microsecond)
		}
		if lowMax, lowP99 := m["wait_max_us_low"], m["wait_p99_us_low"]; lowMax < lowP99 || lowMax <= 0 {
			t.Errorf("%s: Low wait max %v, p99 %v: want max >= p99 > 0 under saturation", name, lowMax, lowP99)
		}
		rej := m["rejected_high"] + m["rejected_normal"] + m["rejected_low"]
		if m["rejected"] != rej {
			t.Errorf("%s: rejected = %v, want the sum per priority %v", name, m["rejected"], rej)
		}
		if (f.Mode == NonBlocking) != (rej > 0) {
			t.Errorf("%s (%s): rejected %v at 3× capacity", name, f.Mode, rej)
		}
	}
	prio, fifo := samples["priopool"].Metrics, samples["chanpool"].Metrics
	for _, q := range []string{"wait_p50_us_high", "wait_p99_us_high"} {
		if prio[q] > fifo[q] {
			t.Errorf("%s: priopool %v > chanpool %v, want the strict-priority pool's High waits at most the FIFO's", q, prio[q], fifo[q])
		}
	}
	if samples["priopool"].Metrics["share_low"] >= samples["chanpool"].Metrics["share_low"] {
		t.Errorf("share_low: priopool %v >= chanpool %v, want strict priority to give Low less",
			samples["priopool"].Metrics["share_low"], samples["chanpool"].Metrics["share_low"])
	}
}

func TestSaturationPlan(t *testing.T) {
	p := Params{Conc: 500, Work: 50 * time.Millisecond, Duration: 4 * time.Second}
	plan := saturationPlan(p)
	want := [numPriorities]saturationArrivals{
		High:   {work: time.Millisecond, rate: 25_000, n: 100_000},
		Normal: {work: 5 * time.Millisecond, rate: 20_000, n: 80_000},
		Low:    {work: 50 * time.Millisecond, rate: 30_000, n: 120_000},
	}
	for pr := range numPriorities {
		g, w := plan[pr], want[pr]
		if g.work != w.work || math.Abs(g.rate-w.rate) > 1e-6 || g.n != w.n {
			t.Errorf("saturationPlan()[%s] = %+v, want %+v", pr, g, w)
		}
	}
	p.Rate = 15_000
	if got := saturationPlan(p)[Low].rate; got != 15_000 {
		t.Errorf("saturationPlan() with Rate 15000: Low's rate = %v, want 15000", got)
	}
	if got := (Params{Scale: 0.5}).resolve(saturationScenario().Defaults).Duration; got != 2*time.Second {
		t.Errorf("resolve() with Scale 0.5: Duration = %v, want 2s", got)
	}
}
