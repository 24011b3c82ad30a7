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

// TestFlowsDurableOnAx runs flows-durable small on ax's durable flows on the
// memory store (ax-memstore) and on its in-memory reference (ax-flow-mem):
// every flow computes the hand-written pipeline's value (the scenario fails
// otherwise), every task runs once, and the figures are there.
func TestFlowsDurableOnAx(t *testing.T) {
	reg := NewRegistry()
	sc, ok := reg.Scenario("flows-durable")
	if !ok {
		t.Fatal(`Scenario("flows-durable") missing`)
	}
	if dur, _ := reg.Scenario("durable"); runsOn(dur, mustExecutor(t, reg, "ax-flow-mem")) {
		t.Error("durable runs on ax-flow-mem, which has no store")
	}
	for _, name := range []string{"ax-flow-mem", "ax-memstore"} {
		t.Run(name, func(t *testing.T) {
			f := mustExecutor(t, reg, name)
			if !runsOn(sc, f) {
				t.Fatalf("flows-durable does not run on %s", name)
			}
			p := Params{N: 3}.resolve(sc.Defaults)
			s, err := sc.Run(t.Context(), f, p)
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			m := s.Metrics
			t.Logf("metrics: %v; notes: %v", m, s.Notes)
			// The warm-up flow, 3 one at a time, 3 in flight.
			if m["flows"] != 3 || m["executed"] != 7*66 || m["reruns"] != 0 {
				t.Errorf("flows = %v, executed = %v, reruns = %v; want 3, %d, 0", m["flows"], m["executed"], m["reruns"], 7*66)
			}
			for _, name := range []string{"flow_wall_p50_us", "hand_wall_p50_us", "flows_per_sec", "inflight_wall_p50_us", "flow_cpu_us_per_task", "client_cpu_us_per_task"} {
				if v, ok := m[name]; !ok || v <= 0 {
					t.Errorf("metric %s = %v, %v; want a positive figure", name, v, ok)
				}
			}
			if _, ok := m["server_cpu_us_per_task"]; ok {
				t.Error("server_cpu_us_per_task present without a server")
			}
		})
	}
}

func mustExecutor(t *testing.T, reg *Registry, name string) Factory {
	t.Helper()
	f, ok := reg.Executor(name)
	if !ok {
		t.Fatalf("executor %s missing", name)
	}
	return f
}
