// Package schedule fires schedules into an ax kernel: cron specs and fixed
// intervals, each occurrence an ordinary task of the kernel, with misfire and
// overlap policies, in memory or kept in a store so that several processes fire
// each occurrence exactly once.
//
//	k, err := kernel.New(kernel.Config{})
//	if err != nil { ... }
//	defer k.Close()
//	s, err := schedule.New(k, schedule.Config{})
//	if err != nil { ... }
//	nightly, err := schedule.ParseCron("30 2 * * *", ny)
//	if err != nil { ... }
//	e, err := s.Add(nightly, func(ctx context.Context, f schedule.Fire) error {
//		return report(ctx, f.Scheduled)
//	}, &schedule.Options{Name: "report", Timeout: time.Hour})
//
// # A client of the kernel
//
// A [Scheduler] uses the kernel's public API only, as any user does: it submits
// each occurrence with [kernel.Kernel.TrySubmit], learns whether an occurrence is
// still live, and how it ended ([Entry.Last]), from its [kernel.Handle] at the next
// fire or when asked (or, under [OverlapQueueOne] and [OverlapAllow], from
// [kernel.Task.OnEnd] as it ends), reads time on [kernel.Kernel.Clock], stops with the kernel
// ([kernel.Kernel.Stopping]), and, for a durable schedule, inserts the
// occurrences into the store's pool and wakes the kernel's claimer
// ([kernel.Kernel.Poll]). The kernel knows nothing of schedules: an occurrence
// travels, waits, retries and ends as any task of its priority and group.
//
// # Targets, misfires and overlaps
//
// A [Spec] gives a schedule's targets: [ParseCron] reads cron specs on a time
// zone's wall clock, with one rule for the hours daylight saving time skips or
// repeats, and [Every] fixed intervals. Each target follows the previous target,
// never the end of a run. The scheduler follows steps of the wall clock (an NTP
// step, a suspend and resume) for the schedules whose targets are wall-clock
// times ([NoteClockStep]). A target that could not fire within Options.Grace
// follows Options.Misfire ([MisfireOnce], [MisfireSkip], [MisfireAll]); an
// occurrence due while an earlier one is live follows Options.Overlap
// ([OverlapSkip], [OverlapQueueOne], [OverlapAllow], [OverlapReplace]). The
// task's function receives a [Fire]: its target and the count of targets missed
// before it.
//
// # Cost
//
// One goroutine per scheduler serves every schedule's timer from one
// timewheel.Wheel; a schedule costs a timer and a small record, no goroutine.
//
// # Durable schedules
//
// [Scheduler.AddDurable] keeps a schedule's next target in a
// store.ScheduleStore (Config.Store): it survives restarts, and of the
// schedulers on the store that add it, in one process or several, exactly one
// fires each occurrence, with no leader. Its occurrences are durable tasks of a
// registered kind, run by whichever kernel on the store claims them.
//
// # Rules
//
// A Spec's Next must be quick and a pure function of its argument. Config.OnEvent
// must not block nor call the methods that fire. A scheduler stops with its
// kernel; [Scheduler.Stop] stops it sooner and waits for its goroutines.
package schedule
