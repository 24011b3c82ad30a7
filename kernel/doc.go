// Package kernel is ax's scheduler: it runs tasks on a bounded pool of executor
// goroutines, picks them from three priority buckets by quota so that Low work is
// never starved, bounds every attempt with a timeout, retries failures with
// backoff, refuses or waits when full, and reports what it does through metrics,
// stats and events.
//
//	k, err := kernel.New(kernel.Config{MaxConcurrency: 300}) // zero Config = defaults
//	if err != nil { ... }
//	defer k.Close()
//
//	h, err := k.TrySubmit(kernel.Task{
//		Priority: kernel.High,
//		Timeout:  2 * time.Second,
//		Run:      func(ctx context.Context) error { return call(ctx) },
//	})
//	err = h.Wait(ctx)
//
//	out, err := kernel.Map(ctx, k, urls, fetch, &kernel.BatchOptions{Priority: kernel.Low})
//	err = k.Shutdown(ctx) // stop intake, drain
//
// # The loop
//
// One goroutine per kernel, the loop, owns every scheduling decision: which task
// runs next, and how many run. Submitters append to an intake buffer and wake the
// loop only when it asked; executors count their starts and completions under the
// lock they take to pop their next task, and hand finished attempts back in
// batches. The loop moves picked tasks into a run queue ahead of the free slots
// (about as many as the slots in a large kernel, a quarter in a small one) so
// that an executor that finishes takes the next chosen task without waiting for
// the loop, even when a bunch of tasks end at once. An idle kernel, or one
// holding only far-future timers, does not wake up: a single timer is armed for
// the timing wheel's next expiry.
//
// A fire-and-forget task due now ([Kernel.TryGo] or [Kernel.Go] without a Delay,
// an At, a timeout or a Retry of its own, and no Config.OnEvent) is a light task:
// it goes through the intake, its bucket and the run queue as a 24-byte value,
// never as a record, so the loop moves it without touching memory another core
// wrote, and no record goes back and forth between the cores. It gets a record
// only if it fails and may be retried. Executors also damp their wake-up chain
// while they keep popping short tasks: short work runs on a few executors instead
// of dozens contending for the run queue's lock, and the loop restarts the chain
// if work waits with free slots while nobody takes any for 20 µs (all the awake
// executors took long tasks).
//
// While the loop is parked with nothing queued, a submitter hands a task that
// needs no wheel entry straight to the run queue (the fast lane) and, unless it
// submits in a burst, yields its P to the executor it woke, as a send on an
// unbuffered channel would: the loop still decides, opening the lane only when
// the arriving task is the only candidate, and closing it as it wakes. A lane
// submitter that finds an executor already on its way wakes another if that one is
// 3 µs late, not 20 (the OS holds a thread back now and then).
//
// The intake's and the run queue's locks try a while, yielding now and then,
// before they sleep; and one submitter waiting for room yields its P a few hundred
// times before it sleeps, so that a burst on a full kernel uses every P: a
// goroutine that slept on a lock held for nanoseconds, or was woken onto the P of
// the goroutine that woke it, would run its submitter, its loop and its executors
// in turn on one P while the others idle.
//
// A delayed fire-and-forget task ([Kernel.TryGo] or [Kernel.Go] with a Delay or an
// At, no ID, OnTimeout or Retry of its own, and no Config.OnEvent) waits in a
// compact form, 32 to 56 bytes and no allocation, and becomes a full task record
// only when it comes due. Such a task due after the loop's next wake-up does not
// wake it: the loop takes these in by the thousand, when its timer fires or a
// batch is full, and keeps a burst of far-future ones in the chunks they came in.
// Stats and metrics count them from their submission.
//
// # Priorities and admission
//
// Tasks wait in three bounded FIFO buckets (High, Normal, Low). What a caller can
// rely on: High runs first. A High task never waits for Normal or Low work, not
// even work the loop picked ahead of time: it overtakes those picks and starts in
// the next slot that frees, so its wait under saturation is the time to the next
// completion (the same holds for Normal over Low). When every priority has more
// work than the slots, the dispatches are shared by Config.Quotas: by default High
// gets up to 85 %, and Normal and Low keep floors of 10 % and 5 %, so neither
// starves; a priority with less work than its share leaves the rest to the others
// (no slot idles while work waits), and within a priority the order is FIFO.
// Reserve slots (Config.Reserve.High) when the next completion is too far for
// High: when Normal or Low tasks run much longer than a High task's deadline, only
// a slot no other priority may take starts it at once. Config.AgeAfter promotes
// tasks that waited too long by one level.
//
// Each priority may hold Config.Capacity tasks waiting (queued, delayed or
// retrying). [Kernel.TrySubmit] refuses at once with [ErrQueueFull] when the
// bucket is full, and with [ErrDegraded] for Normal and Low once the kernel holds
// more than Config.DegradeAt of its total capacity; [Kernel.Submit] waits for room
// until its context ends. With Config.EvictLow a High arrival that finds no room
// replaces the newest queued Low task, which ends with [ErrEvicted]; the High task
// holds that task's room. A retry re-enters its bucket without a check: an accepted
// task is never refused later.
//
// # Guarantees
//
// Every accepted task ends in exactly one terminal state — Succeeded, Failed,
// TimedOut, Canceled, Evicted or Abandoned — observable through [Handle.Done],
// [Handle.Wait] and [Handle.State], and counted once in [Kernel.Stats]. A task
// refused at submission is not a task: its caller gets the error and nothing runs.
//
// Without a store the kernel keeps tasks in memory only: a process crash loses
// queued, delayed and running tasks, so each task runs at most once per attempt
// across a crash, never twice. Durable tasks (below) trade that for at least once.
//
// A timeout cancels the attempt's context (whose Deadline is the attempt's start
// plus its timeout) at most one tick late, ends the attempt TimedOut for its
// caller at once, and may retry it. Go cannot stop a goroutine: a function that
// ignores its context keeps running. Up to Config.MaxZombies such functions
// ("zombies") give their slot to other tasks and are logged with their stack after
// Config.ZombieGrace ([Kernel.Zombies]); past that cap a timed-out function keeps
// its slot until it returns. Executor goroutines never exceed MaxConcurrency +
// MaxZombies (plus a constant for Goexit replacement).
//
// Panics and runtime.Goexit in a task function are recovered into a [*PanicError]
// with the stack; the executor survives (or is replaced) and the task ends Failed.
// Panics are not retried.
//
// No value [Config.Validate] accepts crashes the process or makes it allocate
// more than the work it holds: sizes have upper bounds (MaxConcurrencyMax,
// CapacityMax, ...), the run queue and the buckets grow with use, and every sum of
// durations saturates (a Delay of any size waits, it never wraps into the past).
// Every method that takes a context accepts a nil one as context.Background().
// Callbacks the kernel calls — Config.OnEvent, Task.OnTimeout,
// RetryPolicy.BackoffFunc, the handler of Config.Logger, a Store — are recovered
// when they panic or call runtime.Goexit (Stats.CallbackPanics). No goroutine
// the promises depend on (the loop, the executors, the journal) runs the OnEvent,
// OnTimeout or Logger callbacks: those run on goroutines of their own behind
// bounded queues (events and log records
// past the bound are dropped and counted, Stats.EventsDropped and
// Stats.LogsDropped), and Shutdown and Close wait for a blocked one only within
// their bounds (ctx, Config.ZombieGrace; Close gives the Logger's handler a
// ZombieGrace of its own to take Close's last records), then abandon it
// (Stats.CallbacksAbandoned).
//
// # What a caller must not do, and what happens if it does
//
//   - Call [Kernel.Shutdown] or [Kernel.Close] from a task's function, from an
//     OnEvent, OnTimeout or Logger handler callback, from a RetryPolicy.BackoffFunc or
//     from a method of Config.Store, and expect it to wait: it would wait for its
//     caller. The kernel detects it: the stop begins, the call returns
//     [ErrStopFromInside] at once, and the stop completes once the caller returns.
//     A Shutdown called from a goroutine that a task waits for cannot be detected:
//     it returns when its ctx ends or when Close begins.
//   - Block a task's function without watching its context: it becomes a zombie
//     at its timeout (Config.MaxZombies), or holds its slot; without a timeout it
//     holds the slot until it returns, and Shutdown waits for it.
//   - Block in OnEvent: events past Config.EventBuffer are dropped and counted.
//     Likewise, records past 256 waiting for a blocked Logger handler are dropped
//     and counted.
//   - Block in a RetryPolicy.BackoffFunc: the loop waits for it (on a short-lived
//     goroutine of the BackoffFunc's own), so all scheduling stalls until it
//     returns. Likewise the journal waits for a Store method that ignores its
//     context, and durable tasks' writes stall.
//   - Call runtime.Goexit in a callback: it ends only the goroutine the kernel
//     gave the callback, and counts as a panic (Stats.CallbackPanics). A
//     BackoffFunc's retry then waits the default rule's delay
//     ([DefaultBackoff]); a Store method's call fails with an error (a failed
//     commit: the store is taken as down and durable submits fail fast until it
//     answers); the OnEvent, OnTimeout or Logger goroutine is replaced and goes on
//     with the next callback. In a task's function it ends the task Failed, as a
//     panic does (above).
//   - Wait, inside a task, for other tasks of the same kernel that need a slot
//     (Handle.Wait, Batch.Wait, Map) while every slot may be taken by such
//     waiters: as with any bounded pool, that deadlocks until a timeout ends them.
//   - Keep the context of a TryGo or Go task after its function returned: the
//     kernel reuses it.
//
// # Retries
//
// A failed attempt is retried while the task has attempts left (Config.Retry per
// priority, or Task.Retry), its error is not [Permanent], and the kernel-wide
// Config.RetryBudget allows — retries are at most a fraction of recent first
// attempts, so an outage does not turn into a retry storm. The delay is
// exponential with full jitter by default and waits in the timing wheel.
//
// # Groups: per-key limits
//
// Config.Groups names groups of tasks, each with limits per key and in total
// ([GroupConfig]): concurrency, a rate ([Rate], a token bucket on Config.Clock),
// a bound on the tasks waiting per key (MaxWaiting, [ErrGroupFull]) and an optional
// breaker per key. A task joins one with Task.Group and Task.Key. It waits in its
// key's queue (by priority, FIFO within one) and enters its priority's bucket only
// once it holds a permit of its key and group; the permit returns when its
// function returns, so a zombie keeps it. A key that cannot start holds no place
// in the buckets: it never delays other keys nor the shares between priorities.
// Keys that wait only for the group's total take turns, one permit each. A key
// held back by its rate, a [RateLimitedError] or an open breaker has one timer,
// whatever the number of its tasks. A key nothing uses for KeyIdle is forgotten.
// Retries of a group's task wait for a permit again.
//
// Durable tasks join groups too (DurableTask.Group and Key). The store keeps the
// group and key with the task, so a task recovered after a restart, rescued from
// another process or requeued waits in its group's gate with its key again; one
// whose group is not in this kernel's Config.Groups is held (Stats.Store.Held)
// until an Update adds it. Limits are per process: each kernel enforces its own
// Config.Groups on the tasks it runs, and no limit is shared through the store, so
// N processes with PerKey.Concurrency 5 run up to 5N tasks of a key at once (and
// N times a Rate). Give each process its share of the limit where the total
// matters.
//
// [Kernel.Pause] and [Kernel.Resume] stop and restart the starts of a group, a
// key, a priority or a durable kind; paused tasks stay queued and in order.
//
// # Schedules
//
// [Kernel.Schedule] runs a function at each target of a [Schedule]: [ParseCron]
// (cron specs on a location's wall clock, with ax's rule for daylight saving time)
// or [Every] (a fixed interval). Each target is computed from the previous target,
// never from when a run started or ended. A schedule is one entry of the loop's
// timing wheel: no goroutine, no ticker; the loop alone decides when it fires, and
// the [Scheduled]'s methods (Pause, Resume, Trigger, Update, Remove) hand it
// messages. At a target the loop submits a task like any other (its priority,
// timeout, group, key and retry policy from [ScheduleOptions]; Capacity applies),
// without waiting: an occurrence without room is refused and counted. The task's
// function receives a [Fire]: its target and how many targets before it did not
// fire.
//
// Targets later than ScheduleOptions.Grace when the loop sees them (the kernel was
// saturated or blocked, the machine slept, the schedule was paused) follow the
// [Misfire] policy; an occurrence due while an earlier one is live follows the
// [Overlap] policy. A schedule stops firing when Shutdown or Close begins, and on
// Remove; an occurrence already submitted runs to its end, and Shutdown waits for
// it. Stats.Schedules reports each schedule; the ax_schedule* metrics add them all
// up, without a label per schedule, so that many schedules do not make many series.
//
// [Kernel.ScheduleDurable] keeps a schedule's next target in a [store.ScheduleStore]:
// every kernel on the store that adds it under the same name follows the stored
// time, and of those exactly one fires each occurrence (a compare-and-set of the
// stored time in the transaction that inserts the occurrence as a durable pool
// task); a kernel that starts catches up on the targets missed while every kernel
// was down by the misfire policy.
//
// # Stopping
//
// [Kernel.Shutdown] stops intake and drains queued and running tasks; delayed
// tasks not yet due end Abandoned. [Kernel.Close] ends everything at once. Both are
// idempotent; after either, submissions return [ErrClosed].
//
// # Durable tasks
//
// With Config.Store (mysqlstore.Store on MySQL/MariaDB, or storekit.MemoryStore in tests)
// a task may outlive the process. It names a kind registered with
// [Kernel.Register] and carries a []byte payload; [Kernel.SubmitDurable] (or
// [Kernel.SubmitDurableMany] for a backlog) stores it and schedules it. The store
// is a journal, not a queue: a durable task runs from memory like any other, and a
// goroutine of the kernel, the journal, writes its lifecycle — inserted, started
// (with a new fence per attempt), retried, ended — in group commits, many tasks per
// transaction. Nothing polls the table; [New] reads it back once.
//
// The promise: a durable task that SubmitDurable acknowledged runs at least once,
// whatever happens to the process. In acknowledged mode (the default) SubmitDurable
// returns after the commit that holds the task, so a crash (kill -9 included) loses
// no acknowledged task: the next kernel on the store runs tasks that were queued
// or delayed with their priority and due time (a due time that passed runs at
// once), and tasks that were running as a new attempt — they run again, which is
// the "at least once"; an attempt interrupted on its last try dead-letters the
// task. A task is stored running only while it holds, or is about to take, one of
// the slots: the durable attempts whose start is stored and whose end is not never
// outnumber MaxConcurrency, so a crash interrupts at most MaxConcurrency of them.
// A task submitted while a slot is free and no task is queued is stored started, in
// the commit that acknowledges it; the others have their start stored when they
// are picked, and run once that commit landed.
// While they fill the slots, the next durable task waits at the head of its bucket
// (and the tasks behind it with it); the other buckets go on. What a crash does
// lose is the record of completions not yet committed: those tasks run again. In
// periodic snapshot mode (Config.SnapshotEvery) a submit returns before its
// commit, and a crash loses what was submitted in the last interval; the bound on
// the tasks stored running holds there too (a start is journaled at the pick, and
// the store learns it at the next snapshot). Shutdown and Close leave durable tasks that did not finish live in
// the store for the next kernel (in this process their handles end Abandoned or
// Canceled with [ErrClosed]). Tasks that ended Failed, TimedOut, Evicted or
// Abandoned in the store are dead letters: [store.Store.DeadLetters], [store.Store.Requeue]
// and [store.Store.Purge] manage them. While the store does not answer, durable submits
// fail fast with [store.ErrStoreUnavailable] and the journal retries the rest.
//
// # Several kernels on one store
//
// A store that implements [store.SharedStore] (storekit.MemoryStore does) may be shared by
// kernels in one process or many. Each kernel is an owner: it joins at [New] under
// Config.Owner (by default a name held per host and store, see there) with a lease of
// Config.Lease (15 s by default) on the store's clock. Every group commit renews the
// lease in its own transaction, and an idle kernel renews it every Lease/5. Each task's
// row belongs to the kernel that submitted it, and only that kernel runs it while its
// lease lives: a second kernel on the store never takes a live owner's tasks. [New] and, every quarter lease, a
// rescuer goroutine take over the tasks of owners whose lease ended (a crashed or cut
// off process) or that left (Shutdown and Close leave): queued and delayed tasks as
// they are, running ones as a new attempt (the interrupted attempt is spent: it counts
// against MaxAttempts). So an orphaned task runs again within about Lease + Lease/3.
// Each rescue gives the tasks fences of a new epoch, so the late writes of the owner
// that lost them are refused ([store.ErrStaleFence], counted in Stats.Store.Refused), and a
// start the store refuses never runs: its handle ends Abandoned with [ErrTaskTaken].
// A kernel that could not renew for Lease − Lease/3 starts no durable attempt before
// a commit renewed its lease; once the store says its lease ended, it joins again as a
// new owner and rescues what it left. Once Lease − Lease/6 has passed without a
// renewal it cancels the contexts of its running durable attempts, so that they end
// before another kernel may rescue their tasks; their ends and retries go to the
// store, which refuses them if the task was taken over. A function that ignores its
// context runs on (a goroutine cannot be stopped): at least once, again.
//
// A process restarted on its host takes its own tasks back at once: with Config.Owner
// empty it takes the default owner name its dead predecessor held (a slot locked with
// flock(2), free once that process ended, kill -9 included), and joining under it ends
// the dead membership, whose tasks it rescues at [New]. Two live kernels of one host
// never share a default name. A replica that restarts on another host (a pod moved to
// another node) needs a stable Config.Owner to do the same; otherwise its tasks are
// rescued by the live kernels once its lease ended.
//
// Work is shared through the store's pool. A durable task goes to the pool instead of
// running where it was submitted when it asks ([DurableTask.Pool]), when
// Config.SharedPool says so, or when the kernel has no room for it (its Capacity: on
// a SharedStore a durable submit never waits for room). Kernels with free slots claim
// due pool tasks with [store.SharedStore.Claim] — claiming and starting in one write, with
// a fence of a new epoch, by priority and the kernel's Quotas — and poll with backoff
// from 50 ms to 2 s while the pool has nothing due for them (a kernel with due work
// waiting and no free slot claims again as soon as one frees). The handle of a pool
// task follows it wherever it runs: if its own kernel claims it, it runs on that
// handle; otherwise the handle ends as the store says the task ended, within about a
// poll. A Cancel of a pool task asks the store, and applies unless a kernel claimed it
// already. Shutdown drains the pool tasks its kernel follows (claiming while it
// follows any) and abandons the delayed ones; Close ends their handles Canceled and
// leaves them in the pool. Tasks queued in a kernel's own buckets are not shared:
// with Config.SharedPool every task is, at the price of a claim (a store
// transaction) per round of slots.
//
// # Observability
//
// [Kernel.Stats] returns the kernel's figures with percentiles; Config.OnEvent
// receives every state change on a goroutine of its own; [Kernel.WritePrometheus]
// writes the metrics in the Prometheus text format: ax_-prefixed counters by
// priority, gauges read at the scrape (depths, running, delayed, zombies,
// executors), wait and execution histograms (le buckets, _sum and _count) and,
// with a store, the journal's figures. Every family has one # HELP and one # TYPE
// line, and every series the label kernel="<Config.Name>" when the kernel is named.
//
// The same families are written by the kernel's metrics set ([Kernel.Metrics]),
// which is Config.Metrics or one of the kernel's own; the global set is never
// used, and nothing global (such as metrics.ExposeMetadata) is changed. To serve
// several kernels on one /metrics page, give them one Config.Metrics set and a
// Config.Name each, and write that set (or register it with metrics.RegisterSet):
// it writes each family once, with the series of every kernel. New refuses, with
// a [*ConfigError] for Config.Name, a kernel whose name another live kernel on the
// set has, and an unnamed kernel on a set shared with another (or a named one on a
// set an unnamed one holds), so a page never holds duplicate series, nor series
// with and without the kernel label. A kernel on a shared set leaves it when it
// stopped (Shutdown drained or Close ended its tasks), and its name is then free
// for a new kernel, whose counters start at zero: Prometheus reads that as a
// counter reset. Pages made by concatenating the output of several sets or
// WritePrometheus calls repeat the families, which strict parsers refuse.
package kernel
