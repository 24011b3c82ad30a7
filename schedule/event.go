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
}
