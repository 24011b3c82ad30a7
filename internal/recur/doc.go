// Package recur is the arithmetic of periodic schedules: the fire times of a cron spec
// or a fixed interval ([ParseCron], [Every]), with ax's rule for daylight saving time,
// and the misfire computation ([Missed]) that says which occurrences of a late schedule
// fire under a policy and where it resumes. Every function is pure: it reads its
// arguments and the clock it is given, never the time of day, and holds no state.
package recur

import "time"

// Schedule yields the fire times of a periodic job. Next returns the first fire time
// strictly after after, or the zero Time when there is none. Next must be a pure
// function of after and safe for concurrent use.
type Schedule interface {
	Next(after time.Time) time.Time
}
