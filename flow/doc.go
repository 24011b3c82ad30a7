// Package flow runs flows and sharded jobs on an ax kernel: named stages that
// wait for the stages they depend on, each stage one task of the kernel or a
// fan-out of shard tasks whose count is asked for when the stage starts.
//
//	f := flow.New("etl").
//		Stage("fetch", fetch, nil).
//		Sharded("clean", countRows, cleanShard, &flow.ShardOptions{
//			StageOptions: flow.StageOptions{After: []string{"fetch"}, Priority: kernel.Low},
//			MaxShards:    256,
//		}).
//		Stage("store", store, &flow.StageOptions{After: []string{"clean"}})
//	h, err := flow.Run(ctx, k, f, nil) // a bad definition: a *DefError naming the stage
//	if err != nil { ... }
//	err = h.Wait(ctx) // nil, a *StageError, or kernel.ErrCanceled (wrapped)
//
// # A client of the kernel
//
// A run uses the kernel's public API only, as package schedule does: each
// stage, each shard and each shard count is a [kernel.Task] with the stage's
// Priority, Timeout, Group, Key and Retry, so a flow's bulk stage obeys the
// same quotas, limits, breakers and retries as any task of its priority and
// group, and a failed shard is retried alone. A run advances from the
// [kernel.Task.OnEnd] calls of its tasks; it has no goroutine of its own, except
// one that waits for room while the kernel refuses its tasks as full.
//
// # Stages, results and failures
//
// [Run] validates the definition (no stage, two of one name, a dependency on an
// unknown stage, a cycle, a bad option: a [*DefError] naming the stage, nothing
// submitted). A stage starts when every stage it depends on succeeded; the
// []byte a plain stage returns is readable by the stages after it
// ([Inputs.Result]) and by the caller ([Handle.Result]). A sharded stage first
// runs its [CountFunc]: a count below 1, above ShardOptions.MaxShards, or a panic
// fails the stage ([ErrShardCount]) with none of its shards started; otherwise
// it runs the shards, each with its [Shard] (index and total), and succeeds when
// every shard did. [Options].OnFailure says what a failed stage does to the
// rest: [FailFast] cancels the run's tasks and starts nothing more,
// [ContinueIndependent] skips only the stages that depend on it. Every run ends
// in exactly one terminal state ([Handle.Wait]); [Handle.Cancel] ends it
// Canceled.
//
// # Durable flows
//
// A run of [Run] lives in memory: a crash loses it. With a store,
// [Register] makes a flow durable on a kernel: [Durable.Start] stores a run
// and returns its ID once stored, and the run goes on after a crash in
// whichever process on the store has the flow registered.
//
//	// In every process that runs the flow, at its start:
//	d, err := flow.Register(k, st, f, &flow.DurableOptions{Pool: true})
//	run, err := d.Start(ctx, input, nil)
//	err = d.Wait(ctx, run) // from any process; d.Inspect, d.List, d.Cancel, d.RetryStage too
//
// A run is a set of durable tasks whose unique keys are made of the run's ID
// (its head "axflow/<run>", a stage's task or count "axflow/<run>/<stage>", a
// shard "axflow/<run>/<stage>#<index>"), each key held for
// DurableOptions.Retention after its task ended, so that a stage or shard
// whose success was stored is never submitted again; stage results are the
// tasks' stored results ([kernel.SetResult]). The run's state is computed from
// its stored tasks, the same way in every process, by the rules of a run in
// memory. A reconciler goroutine per [Register] (no kernel slot) reads the
// live runs (store.KeyReader, store.TaskLister), submits their due tasks,
// cancels a cancelled run's tasks, and makes a run's head due once the run
// ended, to end with its outcome. This design keeps the kernel unchanged: a
// durable run is made only of durable tasks, their keys and their results, so
// recovery, rescue by other replicas, the shared pool, retries and dead
// letters are the kernel's own. docs/flows.md, "Durable flows", says more:
// what is stored, FailFast's and RetryStage's meaning for a stored run, and
// the limits.
//
// # Rules
//
// A stage's function must watch its context. A task that waits for a flow of
// its own kernel ([RunWait] in a task or a schedule's occurrence) holds a slot
// while it waits: a kernel whose every slot holds such a waiter deadlocks, as
// in any bounded pool.
package flow
