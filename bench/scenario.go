package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
)

// Scenario is one workload. Run measures one executor once, in the calling
// process; [Run] (the package function) repeats it in fresh processes.
type Scenario struct {
	// Name is the scenario's name on the command line and in reports.
	Name string
	// Doc is a one-line description for axbench -list.
	Doc string
	// Key is the scenario's headline metric; the charts of a result show the
	// repetition where it is the median.
	Key string
	// Defaults are the scenario's parameters where [Params] leaves a zero.
	Defaults Params
	// Fix, if not nil, adjusts the resolved params (a size that follows from
	// another); reports show the adjusted ones.
	Fix func(p Params) Params
	// Durable is true when the scenario runs on the durable-task
	// configurations ([Factory.Durable]) instead of the executors.
	Durable bool
	// Keyed is true when the scenario runs on the keyed executors
	// ([Factory.Keyed]) instead of the plain ones.
	Keyed bool
	// Schedules is true when the scenario runs on the recurring schedulers
	// ([Factory.Schedules]) instead of the executors.
	Schedules bool
	// Accepts reports whether the scenario can run on f, one of the factories
	// of its kind (executors, or durable configurations when Durable). If
	// nil, it runs on all of them.
	Accepts func(f Factory) bool
	// Run measures f once with resolved params p.
	Run func(ctx context.Context, f Factory, p Params) (*Sample, error)
}

// Scenarios returns the scenarios in the order `-scenario all` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		noopScenario(),
		sleepScenario(),
		latencyScenario(),
		latencyYieldScenario(),
		burstScenario(),
		mixedScenario(),
		saturationScenario(),
		floodScenario(),
		slowUpstreamScenario(),
		retryStormScenario(),
		timersScenario(),
		durableScenario(),
		durableMultiScenario(),
		durableTxScenario(),
		groupsScenario(),
		schedulesScenario(),
		flowsScenario(),
		flowsDurableScenario(),
	}
}

// runsOn reports whether sc runs on f: f is of sc's kind, runs in sc (its
// Only) and sc accepts it.
func runsOn(sc Scenario, f Factory) bool {
	switch {
	case sc.Durable != (f.Durable != nil):
		return false
	case sc.Keyed && f.Keyed == nil, sc.Schedules && f.Schedules == nil,
		!sc.Keyed && !sc.Durable && !sc.Schedules && f.New == nil:
		return false
	}
	if len(f.Only) > 0 && !slices.Contains(f.Only, sc.Name) {
		return false
	}
	return sc.Accepts == nil || sc.Accepts(f)
}

// closedLoop accepts executors that make a fast submitter wait (or never
// refuse): a throughput run of a non-blocking one would only count refusals.
func closedLoop(f Factory) bool { return f.Mode != NonBlocking }

// build makes the executor of a run and checks it.
func build(ctx context.Context, f Factory, p Params) (Executor, error) {
	ex, err := f.New(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("bench: new %s: %w", f.Name, err)
	}
	return ex, nil
}

// noteMode adds the notes every report of an unusual executor needs.
func noteMode(s *Sample, f Factory, p Params) {
	if f.Mode == Unbounded {
		s.note(fmt.Sprintf("never waits nor refuses: past concurrency %d it queues (or spawns goroutines) without bound", p.Conc))
	}
}

// checkLost sets lost = accepted - executed and explains a non-zero figure.
func checkLost(s *Sample, accepted, executed int64) {
	lost := accepted - executed
	s.Metrics["accepted"] = float64(accepted)
	s.Metrics["executed"] = float64(executed)
	s.Metrics["lost"] = float64(lost)
	if lost != 0 {
		s.note(fmt.Sprintf("lost %d: accepted %d tasks but ran %d", lost, accepted, executed))
	}
}

// memStats reads the allocation counters after a collection, so that the
// counts of a measured section start from a quiet heap.
func memStats(gc bool) runtime.MemStats {
	if gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}
