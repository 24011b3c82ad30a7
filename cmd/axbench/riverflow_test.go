package main

import (
	"testing"

	"github.com/axsched/ax/bench"
)

// TestFlowsDurableOnRiver runs flows-durable small on river: every flow's chain
// of jobs ends with the value the hand-written pipeline computes (the scenario
// fails otherwise), every job runs once, the server's CPU is read, and the run's
// schema is dropped.
func TestFlowsDurableOnRiver(t *testing.T) {
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	reports, err := bench.Run(t.Context(), reg, bench.Options{
		Scenarios: []string{"flows-durable"}, Executors: []string{"river-pg"},
		Params: bench.Params{N: 2, Conc: 8}, Reps: 1, InProcess: true,
	})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	r := reports[0].Results[0]
	if len(r.Errors) > 0 {
		t.Fatalf("errors %v", r.Errors)
	}
	// The warm-up flow, 2 one at a time, 2 in flight; 66 jobs each.
	if s := r.Metrics["executed"]; s.Median != 5*66 {
		t.Errorf("executed = %v, want %d (notes %v)", s.Median, 5*66, r.Notes)
	}
	if s := r.Metrics["reruns"]; s.Max != 0 {
		t.Errorf("reruns = %v, want 0", s.Max)
	}
	for _, m := range []string{"flow_wall_p50_us", "flows_per_sec", "client_cpu_us_per_task", "server_cpu_us_per_task"} {
		if s, ok := r.Metrics[m]; !ok || s.Median <= 0 {
			t.Errorf("%s = %+v (present %v), want > 0 (notes %v)", m, s, ok, r.Notes)
		}
	}
	if n := leftovers(t, "river-pg"); n != 0 {
		t.Errorf("%d river schemas of this process left behind, want none", n)
	}
}
