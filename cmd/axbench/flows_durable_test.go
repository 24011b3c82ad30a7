package main

import (
	"testing"

	"github.com/axsched/ax/bench"
)

// TestFlowsDurable runs flows-durable small on ax's durable flows on MariaDB
// and on river's chain of jobs: every flow ends with the value the
// hand-written pipeline computes (the scenario fails otherwise), every task or
// job runs once, the server's CPU is read, and the run's tables and schemas
// are dropped.
func TestFlowsDurable(t *testing.T) {
	db := mariaDB(t)
	before := durableTables(t, db)
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	reports, err := bench.Run(t.Context(), reg, bench.Options{
		Scenarios: []string{"flows-durable"}, Executors: []string{"ax-mariadb-ack", "river-pg"},
		Params: bench.Params{N: 2, Conc: 8}, Reps: 1, InProcess: true,
	})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if len(reports) != 1 || len(reports[0].Results) != 2 {
		t.Fatalf("Run() = %d reports, want 1 with 2 results", len(reports))
	}
	for _, r := range reports[0].Results {
		if len(r.Errors) > 0 {
			t.Fatalf("%s: errors %v", r.Executor, r.Errors)
		}
		// The warm-up flow, 2 one at a time, 2 in flight; 66 tasks each.
		if s := r.Metrics["executed"]; s.Median != 5*66 {
			t.Errorf("%s: executed = %v, want %d (notes %v)", r.Executor, s.Median, 5*66, r.Notes)
		}
		if s := r.Metrics["reruns"]; s.Max != 0 {
			t.Errorf("%s: reruns = %v, want 0", r.Executor, s.Max)
		}
		for _, m := range []string{"flow_wall_p50_us", "flows_per_sec", "client_cpu_us_per_task", "server_cpu_us_per_task"} {
			if s, ok := r.Metrics[m]; !ok || s.Median <= 0 {
				t.Errorf("%s: %s = %+v (present %v), want > 0 (notes %v)", r.Executor, m, s, ok, r.Notes)
			}
		}
	}
	if after := durableTables(t, db); after != before {
		t.Errorf("durable tables: %d before, %d after, want the run's dropped", before, after)
	}
	if n := leftovers(t, "river-pg"); n != 0 {
		t.Errorf("%d river schemas of this process left behind, want none", n)
	}
}
