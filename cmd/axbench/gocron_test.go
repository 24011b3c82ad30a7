package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/axsched/ax/bench"
)

func TestSchedulesOnGocron(t *testing.T) {
	reg, err := registry()
	if err != nil {
		t.Fatalf("registry() error = %v", err)
	}
	sc, ok := reg.Scenario("schedules")
	if !ok {
		t.Fatal(`Scenario("schedules") missing`)
	}
	f, ok := reg.Executor("gocron")
	if !ok || f.Schedules == nil {
		t.Fatal("registry has no gocron scheduler")
	}
	p := bench.Params{N: 2000, Shrink: 120, Scale: 1, Seed: 1}
	s, err := sc.Run(t.Context(), f, p)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	m := s.Metrics
	t.Logf("metrics: %v; notes: %v", m, s.Notes)
	if m["unfired"] != 0 || m["fires"] < m["firing_schedules"] || m["firing_schedules"] != 100 {
		t.Errorf("unfired = %v, fires = %v, firing_schedules = %v; want 0, >= 100, 100", m["unfired"], m["fires"], m["firing_schedules"])
	}
	for _, name := range []string{"bytes_per_schedule", "idle_cpu_pct", "lateness_p50_us", "lateness_p99_us", "wakeup_p99_us"} {
		if _, ok := m[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}

// schedulesFixture is a schedules report of ax and gocron.
func schedulesFixture() bench.Report {
	m := func(bytes, idle, p50, p99, wake float64) map[string]float64 {
		return map[string]float64{
			"bytes_per_schedule": bytes, "add_ns_per_op": 5182, "idle_cpu_pct": idle,
			"lateness_p50_us": p50, "lateness_p99_us": p99, "wakeup_p99_us": wake,
			"cpu_ns_per_fire": 15400, "unfired": 0,
		}
	}
	return bench.Report{
		Scenario: "schedules", Doc: "interval schedules", Reps: 1,
		Params: bench.Params{N: 100000, Conc: 500, Queue: 10000, Scale: 1, Shrink: 40},
		Results: []bench.Result{
			fixtureResult("ax", "blocking", m(493, 0.073, 640, 1500, 685)),
			fixtureResult("gocron", "unbounded", m(828, 0.233, 738, 37000, 775)),
		},
	}
}

func TestSchedulesConclusion(t *testing.T) {
	got := strings.Join(schedulesConclusion(schedulesFixture()), "\n")
	for _, w := range []string{
		"ax 493 B, gocron 828 B: ratio 0.60 (target <= 0.25)",
		"Lateness p99: ax 1.50ms (p50 640µs), gocron 37.0ms (p50 738µs); target one tick + wake-up p99 = 1.69ms: met.",
		"ax 0.073 % of a core, gocron 0.233 %",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("schedulesConclusion() = %q, want it to contain %q", got, w)
		}
	}
	var b bytes.Buffer
	if err := writeTables(&b, []bench.Report{schedulesFixture()}); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(b.String(), "\n") {
		if n := utf8.RuneCountInString(l); n > textWidth {
			t.Errorf("line %d has %d runes, want at most %d: %q", i+1, n, textWidth, l)
		}
	}
}
