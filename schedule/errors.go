package schedule

import "errors"

var (
	// ErrExists is returned (wrapped) by [Scheduler.Add] and [Scheduler.AddDurable]
	// when a live schedule of the scheduler has the name.
	ErrExists = errors.New("schedule: a schedule of that name exists")

	// ErrRemoved is returned by the methods of an [Entry] that was removed.
	ErrRemoved = errors.New("schedule: the schedule was removed")

	// ErrStopped is returned by [Scheduler.Add], [Scheduler.AddDurable] and the
	// methods of an [Entry] once the scheduler stopped ([Scheduler.Stop], or the
	// kernel's Shutdown or Close began).
	ErrStopped = errors.New("schedule: the scheduler stopped")

	// ErrStuck is the Err of the event of a schedule whose Spec returned a target
	// not after the one it was computed from: the due target fired, last, and the
	// schedule ended.
	ErrStuck = errors.New("schedule: the schedule's Next did not move forward")
)
