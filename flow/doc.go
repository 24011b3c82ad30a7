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
// # Not durable
//
// A run lives in memory: its stages are in-memory tasks and their results are
// kept by the run's [Handle]. A crash loses the run.
//
// # Rules
//
// A stage's function must watch its context. A task that waits for a flow of
// its own kernel ([RunWait] in a task or a schedule's occurrence) holds a slot
// while it waits: a kernel whose every slot holds such a waiter deadlocks, as
// in any bounded pool.
package flow
