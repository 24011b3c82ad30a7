package bench

import (
	"context"
	"fmt"
	"slices"
)

// Registry holds the executors and scenarios a run can name. It is not safe
// for concurrent modification; build it before [Run].
type Registry struct {
	execs     []Factory
	scenarios []Scenario
}

// NewRegistry returns a registry with every scenario, ax, the standard
// baselines ([Baselines]) and ax's in-memory durable configuration
// ([DurableFactories]); cmd/axbench adds the third-party pools and the
// database-backed durable configurations with [Registry.Add].
func NewRegistry() *Registry {
	r := &Registry{scenarios: Scenarios()}
	r.execs = append(r.execs, AxFactories()...)
	r.execs = append(r.execs, Baselines()...)
	r.execs = append(r.execs, DurableFactories()...)
	return r
}

// Add registers executors (or durable configurations) after those already
// there. A name used twice is an error.
func (r *Registry) Add(fs ...Factory) error {
	for _, f := range fs {
		if f.Name == "" || f.Mode == 0 || (f.New == nil && f.Keyed == nil && f.Schedules == nil) == (f.Durable == nil) {
			return fmt.Errorf("bench: executor %q: Name, Mode and one of New (or Keyed or Schedules) or Durable are required", f.Name)
		}
		if _, ok := r.Executor(f.Name); ok {
			return fmt.Errorf("bench: executor %q registered twice", f.Name)
		}
		r.execs = append(r.execs, f)
	}
	return nil
}

// Executors returns the registered executors in registration order.
func (r *Registry) Executors() []Factory { return slices.Clone(r.execs) }

// Executor returns the executor called name.
func (r *Registry) Executor(name string) (Factory, bool) {
	i := slices.IndexFunc(r.execs, func(f Factory) bool { return f.Name == name })
	if i < 0 {
		return Factory{}, false
	}
	return r.execs[i], true
}

// Scenarios returns the scenarios in the order `all` runs them.
func (r *Registry) Scenarios() []Scenario { return slices.Clone(r.scenarios) }

// Scenario returns the scenario called name.
func (r *Registry) Scenario(name string) (Scenario, bool) {
	i := slices.IndexFunc(r.scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return r.scenarios[i], true
}

// Baselines returns the executors built from the standard library and x/sync:
// go, errgroup, semaphore, chanpool and chanpool-nb, and the strict-priority
// pools priopool (in mixed, saturation and flood only) and priopool-nb (in
// mixed only).
func Baselines() []Factory {
	return []Factory{
		{
			Name: "go", Mode: Unbounded, Delays: true,
			Doc: "a goroutine per task (`go f()` and a WaitGroup); delays through time.AfterFunc",
			New: func(context.Context, Params) (Executor, error) {
				return goDelayer{Emulate(&goPool{})}, nil
			},
		},
		{
			Name: "errgroup", Mode: Blocking,
			Doc: "golang.org/x/sync/errgroup with SetLimit(conc)",
			New: func(_ context.Context, p Params) (Executor, error) {
				return Emulate(newErrgroupPool(p.Conc)), nil
			},
		},
		{
			Name: "semaphore", Mode: Blocking,
			Doc: "golang.org/x/sync/semaphore of conc guarding `go f()`",
			New: func(_ context.Context, p Params) (Executor, error) {
				return Emulate(newSemaphorePool(p.Conc)), nil
			},
		},
		{
			Name: "chanpool", Mode: Blocking,
			Doc: "hand-written pool: conc workers ranging over a channel of queue funcs; a full channel blocks",
			New: func(_ context.Context, p Params) (Executor, error) {
				return Emulate(newChanPool(p.Conc, p.Queue, false)), nil
			},
		},
		{
			Name: "chanpool-nb", Mode: NonBlocking,
			Doc: "chanpool refusing a task when its channel is full (select with default)",
			New: func(_ context.Context, p Params) (Executor, error) {
				return Emulate(newChanPool(p.Conc, p.Queue, true)), nil
			},
		},
		{
			Name: "priopool", Mode: Blocking, Priorities: true, Only: priorityScenarios,
			Doc: "hand-written strict-priority pool: conc workers always taking High before Normal before Low, one channel of queue funcs per priority; a full channel blocks (mixed, saturation and flood only)",
			New: func(_ context.Context, p Params) (Executor, error) {
				return Emulate(newPrioPool(p.Conc, p.Queue, false)), nil
			},
		},
		{
			Name: "priopool-nb", Mode: NonBlocking, Priorities: true, Only: []string{"mixed"},
			Doc: "priopool refusing a task when its priority's channel is full (mixed only)",
			New: func(_ context.Context, p Params) (Executor, error) {
				return Emulate(newPrioPool(p.Conc, p.Queue, true)), nil
			},
		},
	}
}

// priorityScenarios are the scenarios where priopool runs: those whose figures
// are per priority under saturation.
var priorityScenarios = []string{"mixed", "saturation", "flood"}
