// Package kernel is ax's task scheduler: it runs tasks on a bounded pool of
// goroutines inside your process. It picks them from three priority buckets by
// quota, so that High work goes first and Low work is never starved; bounds every
// attempt with a timeout and retries failures with backoff under a retry budget;
// limits work per key (an upstream host, a tenant) with concurrency limits, rates
// and circuit breakers; refuses or waits when full; and reports what it does through stats, events and Prometheus metrics.
// With a store (Config.Store; mysqlstore keeps tasks in MySQL or MariaDB), tasks
// outlive the process and several processes share them. Package schedule fires
// cron and interval schedules into a kernel through this package's API.
//
//	k, err := kernel.New(kernel.Config{MaxConcurrency: 100}) // the zero Config is valid too
//	if err != nil { ... }
//	defer k.Close()
//
//	h, err := k.TrySubmit(kernel.Task{
//		Priority: kernel.High,
//		Timeout:  2 * time.Second, // per attempt
//		Run:      func(ctx context.Context) error { return call(ctx) },
//	})
//	if err != nil { ... } // ErrQueueFull or ErrDegraded: no room for it now
//	err = h.Wait(ctx)
//
//	out, err := kernel.Map(ctx, k, urls, fetch, &kernel.BatchOptions{Priority: kernel.Low})
//	err = k.Shutdown(ctx) // stop intake, let what was accepted finish
//
// # Lifecycle
//
// [New] validates the [Config] and starts the kernel, ready on return: the zero
// Config is valid, and a bad field comes back as a [*ConfigError] naming it. A
// [Task] needs only Run; submit it with one of the calls below. A [Handle] follows
// one task: [Handle.Wait], [Handle.Done], [Handle.Err], [Handle.State],
// [Handle.Attempts] and [Handle.Cancel]. [Kernel.Update] changes the limits while
// the kernel runs. [Kernel.Shutdown] stops intake and drains the queued and running
// tasks; [Kernel.Close] cancels everything now. Both are idempotent; after either
// one every submit returns [ErrClosed]. The kernel's methods are safe for
// concurrent use.
//
// # Submitting
//
//	call                          blocks                          without room
//	TrySubmit(t) (*Handle, error) never                           ErrQueueFull, ErrDegraded
//	Submit(ctx, t)                until there is room             waits; ctx.Err() when ctx ends
//	TryGo(t) error                never                           ErrQueueFull, ErrDegraded
//	Go(ctx, t) error              until there is room             waits; ctx.Err() when ctx ends
//	SubmitDurable(ctx, t)         for room, then for the commit   waits; on a SharedStore, to the pool
//	Map(ctx, k, items, fn, opts)  until every member ended        waits, or refuses with NoWait
//
// [ErrQueueFull] means the bucket of the task's priority holds Config.Capacity
// waiting tasks; [ErrDegraded] refuses a Normal or Low task while the kernel holds
// more than Config.DegradeAt of its total capacity, so that the room left goes to
// High. Every call also refuses a task with a bad field (a [*ConfigError]) and an
// in-memory task of a group whose key holds GroupConfig.MaxWaiting tasks
// ([ErrGroupFull]). A refused task never runs; an accepted one is never refused
// later. [Kernel.TryGo]
// and [Kernel.Go] return no handle: fire-and-forget work, the cheapest way through
// the kernel. A task never inherits the cancellation or deadline of the context it
// was submitted with; [Kernel.Submit] passes on its values.
//
// # Guarantees
//
//   - Every accepted task ends in exactly one terminal state (Succeeded, Failed,
//     TimedOut, Canceled, Evicted or Abandoned), observable through its Handle and
//     counted once in [Kernel.Stats].
//   - A High task never waits for Normal or Low work, queued or already picked:
//     under saturation it starts in the next slot that frees. When every priority
//     has more work than slots, Config.Quotas shares the starts (by default High
//     up to 85 %, floors of 10 % for Normal and 5 % for Low); no slot idles while
//     work waits, and each priority is FIFO.
//   - Waiting tasks are bounded by Config.Capacity per priority, running ones by
//     Config.MaxConcurrency, executor goroutines by MaxConcurrency plus
//     Config.MaxZombies. No value [Config.Validate] accepts makes the kernel
//     allocate beyond the work it holds.
//   - An attempt's context ends at its timeout, at most one Config.Tick late, and
//     the attempt ends TimedOut at once. A function that ignores its context keeps
//     running (Go cannot stop a goroutine): up to MaxZombies such zombies give
//     their slot back, and [Kernel.Zombies] lists them.
//   - A panic or runtime.Goexit in a task's function ends the task Failed with a
//     [*PanicError]; it is not retried. Panics in callbacks are recovered and
//     counted; OnEvent, OnTimeout, Task.OnEnd and the Logger's handler run on
//     goroutines of their own, never on the scheduler's (OnEnd calls are never
//     dropped; the others wait behind bounded queues).
//   - Without a store, tasks live in memory: a crash loses them, and an attempt
//     runs at most once. A durable task that [Kernel.SubmitDurable] acknowledged
//     runs at least once, whatever happens to the process.
//
// # Rules
//
// A task's function must watch its context. Do not call Shutdown or Close from a
// task or a callback of the same kernel and expect them to wait: they return
// [ErrStopFromInside] and the stop goes on in the background. Do not keep the
// context of a TryGo or Go task after its function returned: the kernel reuses it.
// A task that waits for other tasks of its kernel can deadlock when every slot is
// taken by such waiters, as in any bounded pool.
//
// # Guides
//
// The docs directory of the repository holds one guide per capability:
// docs/tasks.md (submitting, handles, Map and Batch, a task's context),
// docs/priorities.md (quotas, reserved slots, aging, admission and eviction),
// docs/retries.md (timeouts, zombies, retry policies, the retry budget),
// docs/groups.md (per-key limits, rates, circuit breakers, pause and resume),
// docs/schedules.md (cron and intervals with package schedule, misfires,
// overlap, durable schedules), docs/flows.md (stages and sharded jobs, package flow),
// docs/durable.md (durable tasks, several processes on one store, the shared pool),
// docs/operations.md (stats, events, metrics, Update, stopping, what a caller
// must not do) and docs/otel.md (tracing through Config.Hooks with module axotel).
// docs/design.md describes how the kernel works inside.
package kernel
