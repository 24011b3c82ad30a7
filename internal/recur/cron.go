package recur

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Limits of [ParseCron].
const (
	// SpecMax is the longest spec ParseCron accepts, in bytes.
	SpecMax = 256
	// HorizonYears bounds how far ahead the Next of a [Cron] looks: it returns the
	// zero Time when no fire time lies within that many years after its argument.
	// Every spec that ParseCron accepts matches at least once in any 40 consecutive
	// years (the rarest, such as "0 0 29 2 */7", a 29 February that is a Sunday, come
	// back at least every 40 years), so this happens only near the end of the years
	// time.Time represents.
	HorizonYears = 41
)

// cronParser is robfig/cron's parser configured for 5 fields, or 6 with leading
// seconds, and the @ descriptors. Only its parser is used: ax computes the fire times.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a cron spec into a [Schedule] whose wall-clock times are read in loc
// (nil means UTC): a [*Cron], or an [Every] for "@every <duration>". It accepts
//
//   - 5 fields, "minute hour day-of-month month day-of-week", or 6 with a leading
//     seconds field, with robfig/cron's syntax: numbers, ranges a-b, steps */n and a-b/n,
//     lists, month and weekday names, and ? as *;
//   - the descriptors @yearly (or @annually), @monthly, @weekly, @daily (or @midnight)
//     and @hourly;
//   - @every <duration> (time.ParseDuration syntax, > 0): a fixed interval in absolute
//     time, not on the wall clock.
//
// A day matches the day-of-month and day-of-week fields by Vixie cron's rule: a field
// whose text starts with * or ? is unrestricted, a step such as */5 included. When
// both are restricted, a day matching either one matches; otherwise a day must match
// both. So "0 0 1,15 * Sun" runs on the 1st, the 15th and every Sunday, and
// "0 0 */10 * Sun" only on a Sunday that is the 1st, 11th, 21st or 31st.
//
// # Daylight saving time
//
// Fire times are wall-clock times in loc, with one rule for the hours that daylight
// saving time skips or repeats:
//
//   - A wall time that falls in a spring-forward gap fires at the transition instant,
//     once: on 2025-03-09 in America/New_York, a daily 02:30 job runs at 03:00 EDT, and
//     a job due at 02:00, 02:30 and 03:00 runs once, at 03:00 EDT.
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
// ParseCron returns an error whose text is the reason, for the caller to wrap, when the
// spec is empty, longer than [SpecMax] bytes, has a TZ= or CRON_TZ= prefix (the location
// is the loc argument), does not parse, or never matches a date (such as 30 February,
// "0 0 30 2 *", or 31 April, "0 0 31 4 *"). It never panics.
func ParseCron(spec string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	bad := errors.New
	s := strings.TrimSpace(spec)
	switch {
	case s == "":
		return nil, bad("must not be empty")
	case len(spec) > SpecMax:
		return nil, bad(fmt.Sprintf("%d bytes: must be at most %d bytes (CronSpecMax)", len(spec), SpecMax))
	case strings.HasPrefix(strings.ToUpper(s), "TZ=") || strings.HasPrefix(strings.ToUpper(s), "CRON_TZ="):
		return nil, bad("a TZ= or CRON_TZ= prefix is not accepted: pass the location as loc")
	}
	if rest, ok := strings.CutPrefix(s, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, bad("@every: " + err.Error())
		}
		if d <= 0 {
			return nil, bad("@every: the duration must be > 0")
		}
		return Every(d), nil
	}
	parsed, err := parseCronSafe(s)
	if err != nil {
		return nil, bad(err.Error())
	}
	spec6, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, bad(fmt.Sprintf("unexpected schedule type %T", parsed))
	}
	domStar, dowStar := spec6.Dom&cronStar != 0, spec6.Dow&cronStar != 0
	if f := strings.Fields(s); len(f) >= 5 {
		// Vixie cron's rule: a day field counts as unrestricted when its text starts
		// with * or ?, a step (*/5) included. robfig/cron's parser marks only * and ?
		// (and */1), so the marks are set from the text.
		f = f[len(f)-5:]
		domStar, dowStar = starts(f[2]), starts(f[4])
	}
	c := &Cron{
		second: spec6.Second,
		minute: spec6.Minute,
		hour:   spec6.Hour,
		dom:    withStar(spec6.Dom, domStar),
		month:  spec6.Month,
		dow:    withStar(spec6.Dow, dowStar),
		loc:    loc,
		spec:   s,
	}
	if !c.matchable() {
		return nil, bad("never matches: no month in the spec has the day of month it names")
	}
	return c, nil
}

// starts reports whether a field's text starts with * or ?.
func starts(field string) bool { return field[0] == '*' || field[0] == '?' }

// withStar returns field with its star bit set when star holds, and clear otherwise.
func withStar(field uint64, star bool) uint64 {
	if star {
		return field | cronStar
	}
	return field &^ cronStar
}

// parseCronSafe runs robfig/cron's parser and turns a panic of it into an error.
func parseCronSafe(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("does not parse (the parser panicked: %v)", r)
		}
	}()
	s, err = cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	return s, nil
}

// cronStar is the bit robfig/cron sets in a field written * or ?. In the day fields
// of a [Cron], it marks a field whose text starts with * or ?.
const cronStar = 1 << 63

// Cron is a parsed cron spec: one bit per allowed value of each field, as robfig/cron's
// SpecSchedule holds them (bit 63: the field was * or ?). Immutable.
type Cron struct {
	second, minute, hour, dom, month, dow uint64
	loc                                   *time.Location
	spec                                  string // as parsed, trimmed
}

// Location returns the location the spec's wall-clock times are read in: the times
// Next returns are in it.
func (c *Cron) Location() *time.Location { return c.loc }

// String returns the spec the schedule was parsed from, and its location unless UTC.
func (c *Cron) String() string {
	if c.loc == time.UTC {
		return c.spec
	}
	return c.spec + " (" + c.loc.String() + ")"
}

// daysIn is the most days each month has (29 for February).
var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// matchable reports whether some date matches the spec's month and day fields.
func (c *Cron) matchable() bool {
	if c.second&^cronStar == 0 || c.minute&^cronStar == 0 || c.hour&^cronStar == 0 ||
		c.dom&^cronStar == 0 || c.month&^cronStar == 0 || c.dow&^cronStar == 0 {
		return false
	}
	if c.dom&cronStar == 0 && c.dow&cronStar == 0 {
		return true // either field may match, and every month has every weekday
	}
	if c.dom&cronStar != 0 {
		return true // every weekday occurs in every month
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) != 0 && c.dom&(1<<(daysIn[m]+1)-1) != 0 {
			return true
		}
	}
	return false
}

// Next returns the first fire time strictly after after, in c's location, or the zero
// Time when none lies within [HorizonYears] years. See [ParseCron] for the rule on
// daylight saving time.
func (c *Cron) Next(after time.Time) time.Time {
	after = after.In(c.loc)
	// The smallest wall time whose instant can lie after after: the next whole second.
	start := wallOf(after).Truncate(time.Second).Add(time.Second)
	if c.loc == time.UTC {
		w, ok := c.nextWall(start, start.Year()+HorizonYears)
		if !ok {
			return time.Time{}
		}
		return w // UTC has no transitions: the wall time is the instant
	}
	if c.hour&^cronStar == allHours {
		return c.nextEveryHour(after, start)
	}
	if w, ok := secondOccurrenceEnd(after); ok && w.After(start) {
		// after lies in the second pass of a repeated hour: every wall time of that
		// hour fired in its first pass, before after.
		start = w
	}
	w, ok := c.nextWall(start, start.Year()+HorizonYears)
	if !ok {
		return time.Time{}
	}
	return resolveWall(w, c.loc)
}

// allHours is the hour field that allows every hour.
const allHours = 1<<24 - 1

// nextEveryHour is Next for a spec that allows every hour: it fires at every instant
// whose wall time matches, so in both passes of a repeated hour, and once at the
// transition of a spring-forward gap holding a wall time that matches. start is the
// first wall time (in UTC) to consider: the second after after's wall time.
//
// It walks the zone periods from after's: within one, wall time and instant differ by
// one offset, so the first match from the period's first wall time on is the answer
// when its instant lies in the period.
func (c *Cron) nextEveryHour(after, start time.Time) time.Time {
	limit := start.Year() + HorizonYears
	period := after.Unix() // an instant; its offset holds until the next transition
	for {
		w, ok := c.nextWall(start, limit)
		if !ok {
			return time.Time{}
		}
		off := offsetAt(period, c.loc)
		at := time.Unix(w.Unix()-int64(off), int64(w.Nanosecond()))
		tr, ok := nextTransition(period, at.Unix(), off, c.loc)
		if !ok {
			return at.In(c.loc)
		}
		end := time.Unix(tr, 0).In(c.loc)
		endWall := wallOf(end)
		if offsetAt(tr, c.loc) > off && w.Before(endWall) {
			return end // w lies in the gap the transition skips
		}
		period, start = tr, endWall
	}
}

// transitionProbe is how far apart nextTransition probes loc's offset: less than any
// zone keeps an offset.
const transitionProbe = 7 * 86400

// nextTransition returns the first Unix second in (lo, hi] at which loc's offset is not
// off (its offset at lo), and false when there is none.
func nextTransition(lo, hi int64, off int, loc *time.Location) (int64, bool) {
	for lo < hi {
		p := min(lo+transitionProbe, hi)
		if offsetAt(p, loc) == off {
			lo = p
			continue
		}
		for p-lo > 1 { // off at lo, not at p
			mid := lo + (p-lo)/2
			if offsetAt(mid, loc) == off {
				lo = mid
			} else {
				p = mid
			}
		}
		return p, true
	}
	return 0, false
}

// nextWall returns the first wall time at or after w (a wall time held in UTC) that
// matches c, or false when there is none before the year limit. It advances field by
// field, coarsest first, jumping to the next allowed value of each.
func (c *Cron) nextWall(w time.Time, limit int) (time.Time, bool) {
	for {
		y, mo, d := w.Date()
		if y > limit {
			return time.Time{}, false
		}
		if m, ok := nextBit(c.month, int(mo), 12); !ok {
			w = time.Date(y+1, time.January, 1, 0, 0, 0, 0, time.UTC)
			continue
		} else if m != int(mo) {
			w = time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !c.dayMatches(w) {
			w = time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		h, mi, s := w.Clock()
		if v, ok := nextBit(c.hour, h, 23); !ok {
			w = time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
			continue
		} else if v != h {
			w = time.Date(y, mo, d, v, 0, 0, 0, time.UTC)
			continue
		}
		if v, ok := nextBit(c.minute, mi, 59); !ok {
			w = time.Date(y, mo, d, h+1, 0, 0, 0, time.UTC)
			continue
		} else if v != mi {
			w = time.Date(y, mo, d, h, v, 0, 0, time.UTC)
			continue
		}
		if v, ok := nextBit(c.second, s, 59); !ok {
			w = time.Date(y, mo, d, h, mi+1, 0, 0, time.UTC)
			continue
		} else if v != s {
			w = time.Date(y, mo, d, h, mi, v, 0, time.UTC)
		}
		return w, true
	}
}

// dayMatches applies robfig/cron's rule: with either field * (or ?), a day must match
// both; with both restricted, either.
func (c *Cron) dayMatches(w time.Time) bool {
	domMatch := c.dom&(1<<w.Day()) != 0
	dowMatch := c.dow&(1<<w.Weekday()) != 0
	if c.dom&cronStar != 0 || c.dow&cronStar != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// nextBit returns the lowest set bit of field at or above from and at most max.
func nextBit(field uint64, from, limit int) (int, bool) {
	f := field &^ cronStar >> from << from
	if f == 0 {
		return 0, false
	}
	b := bits.TrailingZeros64(f)
	return b, b <= limit
}

// wallOf returns t's wall-clock reading in its location, as a time in UTC: a calendar
// without daylight saving time to do the field arithmetic in.
func wallOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

// secondOccurrenceEnd reports whether t falls in the second pass of wall times that a
// backward transition of its location repeats and, if so, returns the wall time (in UTC)
// at which the repetition ends: the first wall time after the repeated ones.
func secondOccurrenceEnd(t time.Time) (time.Time, bool) {
	first := resolveWall(wallOf(t), t.Location())
	if !first.Before(t) {
		return time.Time{}, false
	}
	// first and t show the same wall time: the clock went back by t - first between them.
	_, off := t.Zone()
	tr := firstWithOffset(first.Unix(), t.Unix(), off, t.Location())
	return wallOf(time.Unix(tr, 0).In(t.Location()).Add(t.Sub(first))), true
}

// resolveWall returns the instant at which the wall time w (held in UTC) happens in loc,
// by ax's rule: the first of the instants that show w, or, when no instant shows it (a
// spring-forward gap), the instant of the transition that skips it.
func resolveWall(w time.Time, loc *time.Location) time.Time {
	u := w.Unix()
	// The offsets in force within a day of w cover every instant that can show w.
	var offs [3]int
	for i, probe := range [3]int64{u - 86400, u, u + 86400} {
		offs[i] = offsetAt(probe, loc)
	}
	best := int64(0)
	found := false
	for _, o := range offs {
		x := u - int64(o)
		if offsetAt(x, loc) == o && (!found || x < best) {
			best, found = x, true
		}
	}
	if found {
		return time.Unix(best, int64(w.Nanosecond())).In(loc)
	}
	// A gap: the clock jumped from offs[0] to a larger offset over w. The instant w
	// would have had under the earlier offset lies after the jump, the one under the
	// later offset before it.
	after := u - int64(offs[0])
	before := u - int64(offsetAt(after, loc))
	return time.Unix(firstWithOffset(before, after, offsetAt(after, loc), loc), 0).In(loc)
}

// offsetAt returns loc's UTC offset, in seconds, at the Unix time u.
func offsetAt(u int64, loc *time.Location) int {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return off
}

// firstWithOffset returns the first Unix second in (lo, hi] at which loc's offset is
// off, given that it is off at hi and not at lo: the transition between them. Zone
// transitions fall on whole seconds.
func firstWithOffset(lo, hi int64, off int, loc *time.Location) int64 {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if offsetAt(mid, loc) == off {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Every is a [Schedule] that fires every so long in absolute time: Next(t) is t plus
// the interval, whatever the wall clock or daylight saving time do. Called with the
// previous target time, its fire times stay on the grid of the first one. The interval
// must be > 0; the caller checks it.
type Every time.Duration

// String returns "@every" and the interval.
func (e Every) String() string { return "@every " + time.Duration(e).String() }

// Next returns after plus the interval.
func (e Every) Next(after time.Time) time.Time { return after.Add(time.Duration(e)) }
