package schedule

import (
	"fmt"
	"time"

	"github.com/axsched/ax/internal/recur"
)

// Spec yields the target times of a schedule. Next returns the first target strictly
// after after, or the zero Time when there is none. A scheduler computes each target
// from the previous target, never from when a run started or ended, so a slow run
// does not shift the schedule. Next must be a pure function of after, return quickly
// and never block: the scheduler calls it from any point in time, for instance to
// catch up after a restart. Implementations must be safe for concurrent use.
type Spec interface {
	Next(after time.Time) time.Time
}

// Limits of [ParseCron].
const (
	// CronSpecMax is the longest spec ParseCron accepts, in bytes.
	CronSpecMax = recur.SpecMax
	// CronHorizonYears bounds how far ahead the Next of a parsed cron spec looks: it
	// returns the zero Time when no target lies within that many years after its
	// argument. Every spec that ParseCron accepts matches at least once in any 40
	// consecutive years (the rarest, such as "0 0 29 2 */7", a 29 February that is a
	// Sunday, come back at least every 40 years), so this happens only near the end
	// of the years time.Time represents.
	CronHorizonYears = recur.HorizonYears
)

// ParseCron parses a cron spec into a [Spec] whose wall-clock times are read in loc
// (nil means UTC). It accepts
//
//   - 5 fields, "minute hour day-of-month month day-of-week", or 6 with a leading
//     seconds field, with robfig/cron's syntax: numbers, ranges a-b, steps */n and
//     a-b/n, lists, month and weekday names, and ? as *;
//   - the descriptors @yearly (or @annually), @monthly, @weekly, @daily (or
//     @midnight) and @hourly;
//   - @every <duration> (time.ParseDuration syntax, > 0), which is [Every] of it: a
//     fixed interval in absolute time, not on the wall clock.
//
// A day matches the day-of-month and day-of-week fields by Vixie cron's rule: a field
// whose text starts with * or ? is unrestricted, a step such as */5 included. When
// both are restricted, a day matching either one matches; otherwise a day must match
// both. So "0 0 1,15 * Sun" runs on the 1st, the 15th and every Sunday, and
// "0 0 */10 * Sun" only on a Sunday that is the 1st, 11th, 21st or 31st.
//
// # Daylight saving time
//
// Targets are wall-clock times in loc, with one rule for the hours that daylight
// saving time skips or repeats:
//
//   - A wall time that falls in a spring-forward gap fires at the transition
//     instant, once: on 2025-03-09 in America/New_York, a daily 02:30 job runs at
//     03:00 EDT, and a job due at 02:00, 02:30 and 03:00 runs once, at 03:00 EDT.
//   - A job whose hour field allows every hour (*, ?, 0-23 or @hourly) runs at every
//     instant whose wall time it matches, so in both passes of an hour that a
//     fall-back transition repeats: on 2012-11-04 in America/New_York, an hourly job
//     runs at 01:00 EDT, 01:00 EST (one hour later) and 02:00 EST, and a job every
//     15 minutes runs 01:00 through 01:45 EDT, then 01:00 through 01:45 EST.
//   - Any other job runs a wall time that a fall-back transition repeats once, at
//     its first occurrence: on 2025-11-02 in America/New_York, a daily 01:30 job
//     runs at 01:30 EDT and not at 01:30 EST, and a job due at 01:00 and 02:00
//     runs at 01:00 EDT and 02:00 EST.
//
// # Differences from robfig/cron
//
// ParseCron uses robfig/cron's parser, and its Next agrees with robfig/cron's
// SpecSchedule.Next but for these deliberate differences (the test of robfig's own
// TestNext and TestActivation tables lists each case):
//
//   - A day field starting with * (such as */5) is unrestricted, as in Vixie cron;
//     robfig treats it as restricted and ORs the day fields. With "0 0 0 */5 Aug Mon",
//     robfig runs on 1 August 2012, a Wednesday; ParseCron on 6 August, a Monday.
//   - A wall time in a spring-forward gap fires at the transition; robfig skips it.
//   - A fixed-time job runs once in a repeated hour; robfig runs it in both passes.
//   - A TZ= or CRON_TZ= prefix is refused: the location is the loc argument.
//
// ParseCron returns an error starting "schedule: ParseCron" when the spec is empty,
// longer than [CronSpecMax] bytes, has a TZ= or CRON_TZ= prefix (the location is the
// loc argument), does not parse, or never matches a date (such as 30 February, "0 0
// 30 2 *", or 31 April, "0 0 31 4 *"). It never panics.
func ParseCron(spec string, loc *time.Location) (Spec, error) {
	s, err := recur.ParseCron(spec, loc)
	if err != nil {
		if len(spec) > 64 {
			spec = spec[:64] + "..."
		}
		return nil, fmt.Errorf("schedule: ParseCron %q: %w", spec, err)
	}
	return s, nil
}

// Every returns a [Spec] that fires every d in absolute time: Next(t) is t + d,
// whatever the wall clock or daylight saving time do. The scheduler calls Next with
// the previous target, so the targets stay on the grid of the first one.
//
// Every panics when d <= 0, as [time.NewTicker] does: it is a programming error. To
// accept an interval from configuration, check it first or use ParseCron with
// "@every <duration>", which returns an error.
func Every(d time.Duration) Spec {
	if d <= 0 {
		panic("schedule: Every: non-positive interval " + d.String())
	}
	return recur.Every(d)
}

// Fire is one occurrence of a schedule, as its function receives it.
type Fire struct {
	// Scheduled is the occurrence's target time, which the schedule computed; the
	// run starts at it or later.
	Scheduled time.Time
	// Missed counts the targets between the previous fire and this one that did not
	// fire (misfired, skipped by the overlap policy, refused by the kernel, or beyond
	// the catch-up limit). For an [Every] schedule it is exact. For other schedules,
	// when more than 10,000 targets were missed at once, it counts the first 10,000
	// and the latest ones, not those between.
	Missed int
}
