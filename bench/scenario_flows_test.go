package bench

import "testing"

func TestFlowsScenarioOnAx(t *testing.T) {
	reg := NewRegistry()
	sc, ok := reg.Scenario("flows")
	if !ok {
		t.Fatal(`Scenario("flows") missing`)
	}
	f, ok := reg.Executor("ax")
	if !ok || !runsOn(sc, f) {
		t.Fatal("flows does not run on ax")
	}
	if eg, _ := reg.Executor("errgroup"); runsOn(sc, eg) {
		t.Error("flows runs on errgroup: its hand-written side is part of every run on ax")
	}
	p := Params{N: 6}.resolve(sc.Defaults)
	s, err := sc.Run(t.Context(), f, p)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	m := s.Metrics
	t.Logf("metrics: %v; notes: %v", m, s.Notes)
	if m["pipelines"] != 6 || m["tasks_per_pipeline"] != 66 {
		t.Errorf("pipelines = %v, tasks_per_pipeline = %v; want 6, 66", m["pipelines"], m["tasks_per_pipeline"])
	}
	for _, name := range []string{"flow_wall_p50_us", "hand_wall_p50_us", "flow_cpu_us_per_task", "hand_cpu_us_per_task", "overhead_us_per_stage", "wall_ratio"} {
		if v, ok := m[name]; !ok || (name != "overhead_us_per_stage" && v <= 0) {
			t.Errorf("metric %s = %v, %v; want a positive figure", name, v, ok)
		}
	}
}
