// Package console serves a kernel's figures and controls to operators: an
// [http.Handler] with server-rendered pages (overview, groups, schedules,
// zombies, the durable tasks of Options.Store, and the runs of the durable flows
// of Options.Flows) and a versioned JSON API with the same data, under any path
// prefix, and lists the other kernels that share its store.
//
//	h, err := console.New(console.Options{Kernel: k, Scheduler: s})
//	if err != nil { ... }
//	mux.Handle("/console/", http.StripPrefix("/console", h))
//
// # What it reads
//
// The console is a client of the kernel's and the scheduler's public API, as any
// user: a page reads [kernel.Kernel.Stats] (and [kernel.Kernel.Zombies],
// [schedule.Scheduler.Stats]) when it is served, never the loop's state, and a
// goroutine of the console samples Stats at Options.Interval to compute rates
// and draw charts from the last Options.History samples. It stops when the
// kernel's Shutdown or Close begins; the pages go on serving the last figures.
// The Tasks pages read Options.Store through [store.TaskLister]: a page of
// tasks is one [store.TaskLister.ListTasks] call, keyset-paged, which a store
// serves from its indexes. The Flows pages read each flow of Options.Flows
// through [FlowRuns] (a *flow.Durable): a page of runs is one List call per flow
// shown, a run's page one Inspect; cancel and retry call Cancel and RetryStage.
//
// # Replicas
//
// With Options.Store a [store.ReplicaStore], the overview and api/v1/replicas list
// every live kernel on that store with the figures it published there
// ([store.ReplicaFigures]): each process serves its own console, and each shows
// them all. The console reads the store at most once an interval.
//
// # Safety
//
// The handler is read-only unless Options.Actions is set. Options.Authorize sees
// every request, with the action it asks for ([ActionRead] for every GET).
// An action is a POST that carries the handler's token (in the pages' forms, and
// from GET api/v1/token) and passes [http.CrossOriginProtection]'s same-origin
// check. Every response carries a Content-Security-Policy that allows no inline
// script, no framing and no origin but the console's own. Strings that came from
// tasks or users are escaped by html/template in pages and by encoding/json in
// the API. The guide is docs/console.md in the repository.
package console
