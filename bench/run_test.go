package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// tinyParams shrink every scenario to a fraction of a second.
var tinyParams = Params{Scale: 0.002, Conc: 8, Queue: 64}

func TestRunEveryScenarioInProcess(t *testing.T) {
	reg := NewRegistry()
	for _, sc := range reg.Scenarios() {
		if sc.Name == "durable-multi" || sc.Name == "durable-tx" {
			// Their executors share a MariaDB table across processes, or submit in
			// a database's transactions; they live in cmd/axbench, whose
			// TestDurableMultiOnMariaDB and TestDurableTx run them.
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			p := tinyParams
			if sc.Name == "timers" {
				p.N = 2000
			}
			reports, err := Run(t.Context(), reg, Options{Scenarios: []string{sc.Name}, Params: p, Reps: 1, InProcess: true})
			if err != nil {
				t.Fatalf("Run(%s) error = %v", sc.Name, err)
			}
			if len(reports) != 1 || len(reports[0].Results) == 0 {
				t.Fatalf("Run(%s) = %d reports, want 1 with results", sc.Name, len(reports))
			}
			for _, r := range reports[0].Results {
				if len(r.Errors) > 0 {
					t.Errorf("%s on %s: errors %v", sc.Name, r.Executor, r.Errors)
				}
				if lost, ok := r.Metrics["lost"]; ok && lost.Max != 0 {
					t.Errorf("%s on %s: lost = %v, want 0 (notes %v)", sc.Name, r.Executor, lost.Max, r.Notes)
				}
				if len(r.Metrics) == 0 {
					t.Errorf("%s on %s: no metrics", sc.Name, r.Executor)
				}
			}
		})
	}
}

func TestRunInFreshProcesses(t *testing.T) {
	var progress []Progress
	var stderr bytes.Buffer
	reports, err := Run(t.Context(), NewRegistry(), Options{
		Scenarios: []string{"noop"},
		Executors: []string{"chanpool", "errgroup"},
		Params:    Params{N: 2000, Conc: 4},
		Reps:      2,
		Stderr:    &stderr,
		Progress:  func(p Progress) { progress = append(progress, p) },
	})
	if err != nil {
		t.Fatalf("Run() error = %v (stderr %q)", err, stderr.String())
	}
	if len(progress) != 4 || progress[3].Done != 4 || progress[3].Total != 4 {
		t.Fatalf("progress = %+v, want 4 calls ending at 4 of 4", progress)
	}
	// Executors are interleaved, the order rotating between repetitions.
	order := []string{progress[0].Executor, progress[1].Executor, progress[2].Executor, progress[3].Executor}
	if want := []string{"chanpool", "errgroup", "errgroup", "chanpool"}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("run order = %v, want %v", order, want)
	}
	rp := reports[0]
	if rp.Scenario != "noop" || rp.Params.N != 2000 || rp.Params.Conc != 4 || rp.Reps != 2 {
		t.Errorf("report = %s %+v reps %d, want noop, N 2000, Conc 4, 2 reps", rp.Scenario, rp.Params, rp.Reps)
	}
	for _, r := range rp.Results {
		if len(r.Errors) > 0 {
			t.Fatalf("%s: errors %v", r.Executor, r.Errors)
		}
		tps := r.Metrics["tasks_per_sec"]
		if !(tps.Min > 0 && tps.Min <= tps.Median && tps.Median <= tps.Max) {
			t.Errorf("%s: tasks_per_sec = %+v, want 0 < min <= median <= max", r.Executor, tps)
		}
	}
	// The JSON has the documented shape.
	b, err := json.Marshal(rp)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Scenario string         `json:"scenario"`
		Params   map[string]any `json:"params"`
		Machine  map[string]any `json:"machine"`
		Results  []struct {
			Executor string                        `json:"executor"`
			Metrics  map[string]map[string]float64 `json:"metrics"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatal(err)
	}
	m := shape.Results[0].Metrics["tasks_per_sec"]
	if _, ok := m["median"]; !ok || shape.Params["n"] == nil || shape.Machine["gomaxprocs"] == nil {
		t.Errorf("JSON = %s, want params.n, machine.gomaxprocs and metrics.tasks_per_sec.median", b)
	}
}

func TestNewPlanErrors(t *testing.T) {
	reg := NewRegistry()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no scenario", Options{}, "no scenario"},
		{"unknown scenario", Options{Scenarios: []string{"nope"}}, `unknown scenario "nope"`},
		{"unknown executor", Options{Scenarios: []string{"noop"}, Executors: []string{"nope"}}, `unknown executor "nope"`},
		{"bad params", Options{Scenarios: []string{"noop"}, Params: Params{Conc: -1}}, "Params.Conc = -1"},
		{"bad reps", Options{Scenarios: []string{"noop"}, Reps: -2}, "Options.Reps = -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(reg, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewPlan() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestPlanFiltersExecutors(t *testing.T) {
	plans, err := NewPlan(NewRegistry(), Options{Scenarios: []string{"all"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range plans {
		for _, f := range pl.Executors {
			if (pl.Scenario.Name == "noop" || pl.Scenario.Name == "sleep") && f.Mode == NonBlocking {
				t.Errorf("%s plans non-blocking %s", pl.Scenario.Name, f.Name)
			}
			if pl.Scenario.Name == "timers" && !f.Delays {
				t.Errorf("timers plans %s, which has no delays of its own", f.Name)
			}
			if len(f.Only) > 0 && !slices.Contains(f.Only, pl.Scenario.Name) {
				t.Errorf("%s plans %s, which runs only in %v", pl.Scenario.Name, f.Name, f.Only)
			}
		}
		if pl.Scenario.Name == "mixed" && !slices.ContainsFunc(pl.Executors, func(f Factory) bool { return f.Name == "priopool" }) {
			t.Errorf("mixed does not plan priopool")
		}
	}
}

func TestServeChildReportsFailures(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(`{"scenario":"nope","executor":"go"}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ServeChild(ctx, NewRegistry(), in, &out); err != nil {
		t.Fatalf("ServeChild() error = %v", err)
	}
	var res childResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || !strings.Contains(res.Error, "unknown scenario") {
		t.Errorf("ServeChild wrote %q, want an unknown scenario error", out.String())
	}
}
