package bench

import "testing"

func TestSchedulesScenarioOnAx(t *testing.T) {
	reg := NewRegistry()
	sc, ok := reg.Scenario("schedules")
	if !ok {
		t.Fatal(`Scenario("schedules") missing`)
	}
	f, ok := reg.Executor("ax")
	if !ok || !runsOn(sc, f) {
		t.Fatal("schedules does not run on ax")
	}
	if cp, _ := reg.Executor("chanpool"); runsOn(sc, cp) {
		t.Error("schedules runs on chanpool, which has no Schedules")
	}
	p := Params{N: 2000, Shrink: 120}.resolve(sc.Defaults)
	s, err := sc.Run(t.Context(), f, p)
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	m := s.Metrics
	t.Logf("metrics: %v; notes: %v", m, s.Notes)
	if m["schedules"] != 2000 || m["firing_schedules"] != 100 {
		t.Errorf("schedules = %v, firing_schedules = %v; want 2000, 100", m["schedules"], m["firing_schedules"])
	}
	// The window outlasts every schedule's first target: each fired.
	if m["unfired"] != 0 {
		t.Errorf("unfired = %v, want 0", m["unfired"])
	}
	if m["fires"] < m["firing_schedules"] {
		t.Errorf("fires = %v, want >= %v", m["fires"], m["firing_schedules"])
	}
	// In a test process other tests' garbage is collected between the scenario's
	// two heap readings, so bytes_per_schedule has no sign here; a fresh process
	// (axbench) measures it.
	for _, name := range []string{"bytes_per_schedule", "idle_cpu_pct", "lateness_p50_us", "lateness_p99_us", "wakeup_p99_us", "wakeup_any_p99_us", "add_ns_per_op", "cpu_ns_per_fire", "overdue_max_us"} {
		if _, ok := m[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}
