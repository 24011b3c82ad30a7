package kernel

import (
	"fmt"
	"time"

	"github.com/axsched/ax/internal/recur"
)

// Schedule yields the fire times of a periodic job. Next returns the first fire time
// strictly after after, or the zero Time when there is none. The kernel computes each
// fire time from the previous target time, never from when a run started or ended, so
// a slow run does not shift the schedule. Next must be a pure function of after: the
// kernel calls it from any point in time, for instance to catch up after a restart.
// Implementations must be safe for concurrent use.
type Schedule interface {
	Next(after time.Time) time.Time
}

// Limits of [ParseCron].
const (
	// CronSpecMax is the longest spec ParseCron accepts, in bytes.
	CronSpecMax = 256
	// CronHorizonYears bounds how far ahead the Next of a parsed cron schedule looks:
	// it returns the zero Time when no fire time lies within that many years after its
	// argument. Every spec that ParseCron accepts matches at least once in any eight
	// consecutive years (a 29 February comes back at least every eight years), so this
	// happens only near the end of the years time.Time represents.
	CronHorizonYears = 9
)

// ParseCron parses a cron spec into a [Schedule] whose wall-clock times are read in loc
// (nil means UTC). It accepts
//
//   - 5 fields, "minute hour day-of-month month day-of-week", or 6 with a leading
//     seconds field, with robfig/cron's syntax: numbers, ranges a-b, steps */n and a-b/n,
//     lists, month and weekday names, and ? as *;
//   - the descriptors @yearly (or @annually), @monthly, @weekly, @daily (or @midnight)
//     and @hourly;
//   - @every <duration> (time.ParseDuration syntax, > 0), which is [Every] of it: a
//     fixed interval in absolute time, not on the wall clock.
//
// A day matches the day-of-month and day-of-week fields as in robfig/cron and Vixie
// cron: when both are restricted (neither starts with * or ?), a day matching either
// one matches; otherwise a day must match both.
//
// # Daylight saving time
//
// Fire times are wall-clock times in loc, with one rule for the hours that daylight
// saving time skips or repeats:
//
//   - A wall time that falls in a spring-forward gap fires at the transition instant,
//     once: on 2025-03-09 in America/New_York, a daily 02:30 job runs at 03:00 EDT, and
//     a job due at 02:00, 02:30 and 03:00 runs once, at 03:00 EDT.
//   - A wall time that a fall-back transition repeats fires once, at its first
//     occurrence: on 2025-11-02 in America/New_York, a daily 01:30 job runs at 01:30 EDT
//     and not at 01:30 EST. So does every wall time of the repeated hour: an hourly job
//     runs at 01:00 EDT and next at 02:00 EST, two hours later, and a job every 15
//     minutes runs 01:00 through 01:45 EDT, then 02:00 EST.
//
// So a schedule fires at most once per wall-clock time, never twice for one wall time.
//
// ParseCron returns a [*ConfigError] for the argument "spec" when the spec is empty,
// longer than [CronSpecMax] bytes, has a TZ= or CRON_TZ= prefix (the location is the
// loc argument), does not parse, or never matches a date (such as 30 February,
// "0 0 30 2 *", or 31 April, "0 0 31 4 *"). It never panics.
func ParseCron(spec string, loc *time.Location) (Schedule, error) {
	s, err := recur.ParseCron(spec, loc)
	if err != nil {
		return nil, &ConfigError{Field: "ParseCron: spec", Value: fmt.Sprintf("%q", truncateSpec(spec)), Reason: err.Error()}
	}
	return s, nil
}

func truncateSpec(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Every returns a [Schedule] that fires every d in absolute time: Next(t) is t + d,
// whatever the wall clock or daylight saving time do. The kernel calls Next with the
// previous target time, so the fire times stay on the grid of the first one.
//
// Every panics when d <= 0, as [time.NewTicker] does: it is a programming error. To
// accept an interval from configuration, check it first or use ParseCron with
// "@every <duration>", which returns an error.
func Every(d time.Duration) Schedule {
	if d <= 0 {
		panic("kernel: Every: non-positive interval " + d.String())
	}
	return recur.Every(d)
}
