// Package bench holds the workloads, baselines and reports behind axbench: the
// figures that compare ax with raw goroutines, errgroup, x/sync/semaphore, a
// hand-written channel pool, a hand-written strict-priority pool (the ideal
// for High's latency, which starves Low) and (from the cmd/axbench module)
// ants, pond, conc and workerpool, each measured in the same run on the same
// workload.
//
// # Executors
//
// Every scheduler under test is an [Executor]: it takes tasks, runs each one it
// accepts exactly once, and waits for all of them. A [Factory] builds one for a
// [Params] and names its [Mode]: blocking executors make the submitter wait for
// room, non-blocking ones refuse a task at once with [ErrRejected], unbounded
// ones never do either. Pools that know only "run this func" implement [Pool];
// [Emulate] gives them the priorities, timeouts, delays and retries of [Task]
// the way a user of such a pool would write them by hand (one FIFO, a context
// with a deadline, time.AfterFunc, resubmission after a backoff); a
// [PriorityPool] keeps each task's priority. An executor that matters only
// where priorities do names its scenarios in [Factory.Only].
//
// # Durable configurations
//
// The durable scenario measures durable tasks end to end (acknowledged submit,
// run, completion stored) and runs on durable configurations instead of
// executors: factories whose [Factory.Durable] opens a fresh store
// ([DurableSetup]) for a kernel of the scenario's own. [DurableFactories] gives
// ax-memstore, the in-memory baseline; cmd/axbench adds ax on MariaDB, since
// this module never imports a SQL driver, and river and asynq as peers
// ([DurablePeer]).
//
// # Keyed executors
//
// The groups scenario runs tasks with a key under per-key limits (5 at once
// and 100/s per upstream host) on keyed executors ([KeyedExecutor]), built by a
// factory's [Factory.Keyed]: ax, whose kernel holds the limits and a circuit
// breaker per key in its groups, and (from cmd/axbench, since this module
// never imports golang.org/x/time/rate) chanpool-keyed, the hand-written
// baseline of per-key semaphores and rate limiters in front of a channel pool.
//
// # Scenarios
//
// A [Scenario] runs one executor once and returns raw figures ([Sample]). [Run]
// repeats every scenario on every executor in fresh processes (the executable
// re-runs itself with [ChildArg]), interleaving the executors, and folds the
// repetitions into a [Report]: the median with min and max of each metric.
//
//	reg := bench.NewRegistry()          // ax and the standard baselines
//	reports, err := bench.Run(ctx, reg, bench.Options{Scenarios: []string{"noop"}, Reps: 3})
//
// Scenarios measure from the caller's side only; they never look inside an
// executor except through the optional [Stater] interface (queue depth, zombies).
//
// # Usage rules
//
// Scenarios start goroutines, servers on 127.0.0.1 and timers, and stop all of
// them before they return. Run them one at a time: they measure the whole process
// (heap, goroutines, CPU), so two at once would disturb each other.
package bench
