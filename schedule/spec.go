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
	// argument. Every spec that ParseCron accepts matches at least once in any eight
	// consecutive years (a 29 February comes back at least every eight years), so
	// this happens only near the end of the years time.Time represents.
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
// A day matches the day-of-month and day-of-week fields as in robfig/cron and Vixie
// cron: when both are restricted (neither starts with * or ?), a day matching either
// one matches; otherwise a day must match both.
//
// # Daylight saving time
//
// Targets are wall-clock times in loc, with one rule for the hours that daylight
// saving time skips or repeats:
//
//   - A wall time that falls in a spring-forward gap fires at the transition
//     instant, once: on 2025-03-09 in America/New_York, a daily 02:30 job runs at
//     03:00 EDT, and a job due at 02:00, 02:30 and 03:00 runs once, at 03:00 EDT.
//   - A wall time that a fall-back transition repeats fires once, at its first
//     occurrence: on 2025-11-02 in America/New_York, a daily 01:30 job runs at
//     01:30 EDT and not at 01:30 EST. So does every wall time of the repeated hour:
//     an hourly job runs at 01:00 EDT and next at 02:00 EST, two hours later, and a
//     job every 15 minutes runs 01:00 through 01:45 EDT, then 02:00 EST.
//
// So a schedule fires at most once per wall-clock time, never twice for one wall
// time.
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
