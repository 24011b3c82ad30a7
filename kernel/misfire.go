package kernel

import "time"

// Misfire says what a schedule does with the occurrences it missed: targets that
// passed more than the schedule's grace before they could fire (the process was down,
// the kernel was paused or saturated). A target that fires within the grace after its
// time is not misfired and fires normally under every policy. The zero value means
// [MisfireOnce].
type Misfire uint8

// The misfire policies.
const (
	// MisfireDefault is the zero value; the kernel treats it as [MisfireOnce].
	MisfireDefault Misfire = iota
	// MisfireOnce fires the missed targets as one: the latest of them fires, and its
	// [Fire.Missed] counts the others. When a target within the grace is due as well,
	// that one fires instead and counts every missed one.
	MisfireOnce
	// MisfireSkip fires none of the missed targets: the schedule resumes at its next
	// target, and the next [Fire.Missed] counts them.
	MisfireSkip
	// MisfireAll fires every missed target, in order, at most the schedule's catch-up
	// limit of them (the latest ones; [MaxCatchUpDefault] by default); the first fire's
	// [Fire.Missed] counts the earlier ones, which do not fire.
	MisfireAll
)

// Limits of the misfire policies.
const (
	// MaxCatchUpDefault is the most fires one catch-up makes when none is configured.
	MaxCatchUpDefault = 100
	// MaxCatchUpMax is the most fires one catch-up may be configured to make.
	MaxCatchUpMax = 10_000
	// MisfireGraceDefault is how late a target may fire and still count as on time when
	// no grace is configured.
	MisfireGraceDefault = time.Minute
)

// String returns "once", "skip" or "all" (the zero value is "once").
func (m Misfire) String() string {
	switch m {
	case MisfireOnce, MisfireDefault:
		return "once"
	case MisfireSkip:
		return "skip"
	case MisfireAll:
		return "all"
	default:
		return "misfire(" + itoa(int(m)) + ")"
	}
}

// Valid reports whether m is one of the defined policies (or the zero value).
func (m Misfire) Valid() bool { return m <= MisfireAll }

// Fire is one occurrence of a schedule, as its function receives it.
type Fire struct {
	// Scheduled is the occurrence's target time, which the schedule computed; the run
	// starts at it or later.
	Scheduled time.Time
	// Missed counts the targets between the previous fire and this one that did not fire
	// (misfired, skipped by the policy, or beyond the catch-up limit). For an [Every]
	// schedule it is exact. For other schedules, when more than 10,000 targets were
	// missed at once, it counts the first 10,000 and the latest ones, not those between.
	Missed int
}
