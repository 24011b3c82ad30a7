package schedule

import "time"

// Note says what an [Event] reports.
type Note uint8

// The notes of events.
const (
	// NoteFired: an occurrence was submitted (TaskID names its task).
	NoteFired Note = iota + 1
	// NoteSkipped: an occurrence was not submitted because of the overlap policy.
	NoteSkipped
	// NoteMisfired: targets did not fire because they were late (the misfire
	// policy), or the schedule ended because its Spec panicked (Err is a
	// *kernel.PanicError) or did not move forward (Err is [ErrStuck]).
	NoteMisfired
	// NoteRefused: the kernel had no room for an occurrence (Err says why), or a
	// durable schedule's store call failed.
	NoteRefused
	// NoteClockStep: the wall clock stepped by at least max(1 s, 2 Config.Tick)
	// against the monotonic clock (Step says how far: forward > 0), and the
	// scheduler placed the schedule's next target again on the stepped wall clock:
	// one event per such schedule and step.
	// Only schedules whose targets are wall-clock times get it: a cron or custom
	// [Spec], or a durable schedule; not an [Every].
	NoteClockStep
)

// String returns the note's name.
func (n Note) String() string {
	switch n {
	case NoteFired:
		return "fired"
	case NoteSkipped:
		return "skipped"
	case NoteMisfired:
		return "misfired"
	case NoteRefused:
		return "refused"
	case NoteClockStep:
		return "clock-step"
	default:
		return "note(?)"
	}
}

// Event is what Config.OnEvent receives about a schedule.
type Event struct {
	Time     time.Time // on the kernel's clock
	Schedule string    // the schedule's name
	Note     Note
	TaskID   string // NoteFired: the occurrence's task
	Err      error
	Step     time.Duration // NoteClockStep: the wall clock's step, wall-clock minus monotonic time elapsed
}
