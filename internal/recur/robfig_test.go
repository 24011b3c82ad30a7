package recur

import (
	"strings"
	"testing"
	"time"
)

// robfigActivation is the case table of TestActivation in robfig/cron v3.0.1,
// spec_test.go (github.com/robfig/cron/v3@v3.0.1/spec_test.go), copied with only gofmt's re-indenting: a
// spec fires at time exactly when expected holds.
var robfigActivation = []struct {
	time, spec string
	expected   bool
}{
	// Every fifteen minutes.
	{"Mon Jul 9 15:00 2012", "0/15 * * * *", true},
	{"Mon Jul 9 15:45 2012", "0/15 * * * *", true},
	{"Mon Jul 9 15:40 2012", "0/15 * * * *", false},

	// Every fifteen minutes, starting at 5 minutes.
	{"Mon Jul 9 15:05 2012", "5/15 * * * *", true},
	{"Mon Jul 9 15:20 2012", "5/15 * * * *", true},
	{"Mon Jul 9 15:50 2012", "5/15 * * * *", true},

	// Named months
	{"Sun Jul 15 15:00 2012", "0/15 * * Jul *", true},
	{"Sun Jul 15 15:00 2012", "0/15 * * Jun *", false},

	// Everything set.
	{"Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", true},
	{"Sun Jul 15 08:30 2012", "30 08 15 Jul ?", true},
	{"Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", false},
	{"Mon Jul 16 08:30 2012", "30 08 15 Jul ?", false},

	// Predefined schedules
	{"Mon Jul 9 15:00 2012", "@hourly", true},
	{"Mon Jul 9 15:04 2012", "@hourly", false},
	{"Mon Jul 9 15:00 2012", "@daily", false},
	{"Mon Jul 9 00:00 2012", "@daily", true},
	{"Mon Jul 9 00:00 2012", "@weekly", false},
	{"Sun Jul 8 00:00 2012", "@weekly", true},
	{"Sun Jul 8 01:00 2012", "@weekly", false},
	{"Sun Jul 8 00:00 2012", "@monthly", false},
	{"Sun Jul 1 00:00 2012", "@monthly", true},

	// Test interaction of DOW and DOM.
	// If both are restricted, then only one needs to match.
	{"Sun Jul 15 00:00 2012", "* * 1,15 * Sun", true},
	{"Fri Jun 15 00:00 2012", "* * 1,15 * Sun", true},
	{"Wed Aug 1 00:00 2012", "* * 1,15 * Sun", true},
	{"Sun Jul 15 00:00 2012", "* * */10 * Sun", true}, // verifies #70

	// However, if one has a star, then both need to match.
	{"Sun Jul 15 00:00 2012", "* * * * Mon", false},
	{"Mon Jul 9 00:00 2012", "* * 1,15 * *", false},
	{"Sun Jul 15 00:00 2012", "* * 1,15 * *", true},
	{"Sun Jul 15 00:00 2012", "* * */2 * Sun", true},
}

// robfigNext is the case table of TestNext in robfig/cron v3.0.1, spec_test.go,
// copied as robfigActivation is: Next(time) of spec is expected ("" for none).
var robfigNext = []struct {
	time, spec string
	expected   string
}{
	// Simple cases
	{"Mon Jul 9 14:45 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"},
	{"Mon Jul 9 14:59 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"},
	{"Mon Jul 9 14:59:59 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"},

	// Wrap around hours
	{"Mon Jul 9 15:45 2012", "0 20-35/15 * * * *", "Mon Jul 9 16:20 2012"},

	// Wrap around days
	{"Mon Jul 9 23:46 2012", "0 */15 * * * *", "Tue Jul 10 00:00 2012"},
	{"Mon Jul 9 23:45 2012", "0 20-35/15 * * * *", "Tue Jul 10 00:20 2012"},
	{"Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * * * *", "Tue Jul 10 00:20:15 2012"},
	{"Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 * * *", "Tue Jul 10 01:20:15 2012"},
	{"Mon Jul 9 23:35:51 2012", "15/35 20-35/15 10-12 * * *", "Tue Jul 10 10:20:15 2012"},

	{"Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 */2 * *", "Thu Jul 11 01:20:15 2012"},
	{"Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 * *", "Wed Jul 10 00:20:15 2012"},
	{"Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 Jul *", "Wed Jul 10 00:20:15 2012"},

	// Wrap around months
	{"Mon Jul 9 23:35 2012", "0 0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"},
	{"Mon Jul 9 23:35 2012", "0 0 0 */5 Apr,Aug,Oct Mon", "Tue Aug 1 00:00 2012"},
	{"Mon Jul 9 23:35 2012", "0 0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"},

	// Wrap around years
	{"Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon", "Mon Feb 4 00:00 2013"},
	{"Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"},

	// Wrap around minute, hour, day, month, and year
	{"Mon Dec 31 23:59:45 2012", "0 * * * * *", "Tue Jan 1 00:00:00 2013"},

	// Leap year
	{"Mon Jul 9 23:35 2012", "0 0 0 29 Feb ?", "Mon Feb 29 00:00 2016"},

	// Daylight savings time 2am EST (-5) -> 3am EDT (-4)
	{"2012-03-11T00:00:00-0500", "TZ=America/New_York 0 30 2 11 Mar ?", "2013-03-11T02:30:00-0400"},

	// hourly job
	{"2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T01:00:00-0500"},
	{"2012-03-11T01:00:00-0500", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T03:00:00-0400"},
	{"2012-03-11T03:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T04:00:00-0400"},
	{"2012-03-11T04:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T05:00:00-0400"},

	// hourly job using CRON_TZ
	{"2012-03-11T00:00:00-0500", "CRON_TZ=America/New_York 0 0 * * * ?", "2012-03-11T01:00:00-0500"},
	{"2012-03-11T01:00:00-0500", "CRON_TZ=America/New_York 0 0 * * * ?", "2012-03-11T03:00:00-0400"},
	{"2012-03-11T03:00:00-0400", "CRON_TZ=America/New_York 0 0 * * * ?", "2012-03-11T04:00:00-0400"},
	{"2012-03-11T04:00:00-0400", "CRON_TZ=America/New_York 0 0 * * * ?", "2012-03-11T05:00:00-0400"},

	// 1am nightly job
	{"2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 1 * * ?", "2012-03-11T01:00:00-0500"},
	{"2012-03-11T01:00:00-0500", "TZ=America/New_York 0 0 1 * * ?", "2012-03-12T01:00:00-0400"},

	// 2am nightly job (skipped)
	{"2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 2 * * ?", "2012-03-12T02:00:00-0400"},

	// Daylight savings time 2am EDT (-4) => 1am EST (-5)
	{"2012-11-04T00:00:00-0400", "TZ=America/New_York 0 30 2 04 Nov ?", "2012-11-04T02:30:00-0500"},
	{"2012-11-04T01:45:00-0400", "TZ=America/New_York 0 30 1 04 Nov ?", "2012-11-04T01:30:00-0500"},

	// hourly job
	{"2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-11-04T01:00:00-0400"},
	{"2012-11-04T01:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-11-04T01:00:00-0500"},
	{"2012-11-04T01:00:00-0500", "TZ=America/New_York 0 0 * * * ?", "2012-11-04T02:00:00-0500"},

	// 1am nightly job (runs twice)
	{"2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 1 * * ?", "2012-11-04T01:00:00-0400"},
	{"2012-11-04T01:00:00-0400", "TZ=America/New_York 0 0 1 * * ?", "2012-11-04T01:00:00-0500"},
	{"2012-11-04T01:00:00-0500", "TZ=America/New_York 0 0 1 * * ?", "2012-11-05T01:00:00-0500"},

	// 2am nightly job
	{"2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 2 * * ?", "2012-11-04T02:00:00-0500"},
	{"2012-11-04T02:00:00-0500", "TZ=America/New_York 0 0 2 * * ?", "2012-11-05T02:00:00-0500"},

	// 3am nightly job
	{"2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 3 * * ?", "2012-11-04T03:00:00-0500"},
	{"2012-11-04T03:00:00-0500", "TZ=America/New_York 0 0 3 * * ?", "2012-11-05T03:00:00-0500"},

	// hourly job
	{"TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 * * * ?", "2012-11-04T01:00:00-0400"},
	{"TZ=America/New_York 2012-11-04T01:00:00-0400", "0 0 * * * ?", "2012-11-04T01:00:00-0500"},
	{"TZ=America/New_York 2012-11-04T01:00:00-0500", "0 0 * * * ?", "2012-11-04T02:00:00-0500"},

	// 1am nightly job (runs twice)
	{"TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 1 * * ?", "2012-11-04T01:00:00-0400"},
	{"TZ=America/New_York 2012-11-04T01:00:00-0400", "0 0 1 * * ?", "2012-11-04T01:00:00-0500"},
	{"TZ=America/New_York 2012-11-04T01:00:00-0500", "0 0 1 * * ?", "2012-11-05T01:00:00-0500"},

	// 2am nightly job
	{"TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 2 * * ?", "2012-11-04T02:00:00-0500"},
	{"TZ=America/New_York 2012-11-04T02:00:00-0500", "0 0 2 * * ?", "2012-11-05T02:00:00-0500"},

	// 3am nightly job
	{"TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 3 * * ?", "2012-11-04T03:00:00-0500"},
	{"TZ=America/New_York 2012-11-04T03:00:00-0500", "0 0 3 * * ?", "2012-11-05T03:00:00-0500"},

	// Unsatisfiable
	{"Mon Jul 9 23:35 2012", "0 0 0 30 Feb ?", ""},
	{"Mon Jul 9 23:35 2012", "0 0 0 31 Apr ?", ""},

	// Monthly job
	{"TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 3 3 * ?", "2012-12-03T03:00:00-0500"},

	// Test the scenario of DST resulting in midnight not being a valid time.
	// https://github.com/robfig/cron/issues/157
	{"2018-10-17T05:00:00-0400", "TZ=America/Sao_Paulo 0 0 9 10 * ?", "2018-11-10T06:00:00-0500"},
	{"2018-02-14T05:00:00-0500", "TZ=America/Sao_Paulo 0 0 9 22 * ?", "2018-02-22T07:00:00-0500"},
}

// robfigNextDiffers lists the deliberate differences from robfig's TestNext table,
// by time and spec: ParseCron's answer, and why (ParseCron's doc lists them too).
var robfigNextDiffers = map[[2]string]struct{ want, why string }{
	{"Mon Jul 9 23:35 2012", "0 0 0 */5 Apr,Aug,Oct Mon"}: {
		"2012-08-06T00:00:00Z",
		"a day field starting with * (*/5) is unrestricted, as in Vixie cron, so a day must match both: a Monday in 1, 6, 11, ...; robfig treats */5 as restricted and ORs the fields (Aug 1)",
	},
	{"2012-03-11T00:00:00-0500", "TZ=America/New_York 0 30 2 11 Mar ?"}: {
		"2012-03-11T03:00:00-04:00",
		"a wall time in a spring-forward gap fires at the transition; robfig skips it (to the next year)",
	},
	{"2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 2 * * ?"}: {
		"2012-03-11T03:00:00-04:00",
		"a wall time in a spring-forward gap fires at the transition; robfig skips it (to the next day)",
	},
	{"2012-11-04T01:45:00-0400", "TZ=America/New_York 0 30 1 04 Nov ?"}: {
		"2013-11-04T01:30:00-05:00",
		"a fixed-time job runs once in a repeated hour, at the first 01:30 (before 01:45 EDT); robfig runs it again at 01:30 EST",
	},
	{"2012-11-04T01:00:00-0400", "TZ=America/New_York 0 0 1 * * ?"}: {
		"2012-11-05T01:00:00-05:00",
		"a fixed-time job runs once in a repeated hour; robfig runs it twice (01:00 EDT and EST)",
	},
	{"TZ=America/New_York 2012-11-04T01:00:00-0400", "0 0 1 * * ?"}: {
		"2012-11-05T01:00:00-05:00",
		"a fixed-time job runs once in a repeated hour; robfig runs it twice (01:00 EDT and EST)",
	},
}

// robfigActivationDiffers lists the deliberate differences from robfig's
// TestActivation table, by time and spec: why ParseCron's answer is the opposite.
var robfigActivationDiffers = map[[2]string]string{
	{"Sun Jul 15 00:00 2012", "* * */10 * Sun"}: "a day field starting with * (*/10) is unrestricted, as in Vixie cron, so a day must match both: Sunday the 15th is not in 1, 11, 21, 31; robfig treats */10 as restricted and ORs the fields (robfig/cron issue #70)",
}

// robfigTime parses a time of robfig's tables as its getTime does, with UTC in
// place of time.Local: "" is the zero Time; a "TZ=<zone> " prefix gives the zone.
func robfigTime(t *testing.T, value string) time.Time {
	t.Helper()
	if value == "" {
		return time.Time{}
	}
	loc := time.UTC
	if zone, rest, ok := strings.Cut(value, " "); ok && strings.HasPrefix(zone, "TZ=") {
		loc, value = mustLoad(t, zone[len("TZ="):]), rest
	}
	for _, layout := range []string{"Mon Jan 2 15:04 2006", "Mon Jan 2 15:04:05 2006", "2006-01-02T15:04:05-0700"} {
		if tm, err := time.ParseInLocation(layout, value, loc); err == nil {
			return tm
		}
	}
	t.Fatalf("cannot parse the time %q", value)
	return time.Time{}
}

// robfigSpec returns spec without its TZ= or CRON_TZ= prefix, which ParseCron refuses,
// and the location to pass instead: the prefix's zone, or else at's location, as
// robfig's Next reads a spec without a zone in its argument's.
func robfigSpec(t *testing.T, spec string, at time.Time) (string, *time.Location) {
	t.Helper()
	for _, p := range []string{"TZ=", "CRON_TZ="} {
		if rest, ok := strings.CutPrefix(spec, p); ok {
			zone, s, _ := strings.Cut(rest, " ")
			return s, mustLoad(t, zone)
		}
	}
	return spec, at.Location()
}

// TestRobfigNext runs robfig/cron's TestNext table through ParseCron and Next: the
// answers agree but for the differences of robfigNextDiffers.
func TestRobfigNext(t *testing.T) {
	for _, c := range robfigNext {
		at := robfigTime(t, c.time)
		spec, loc := robfigSpec(t, c.spec, at)
		want := robfigTime(t, c.expected)
		if d, ok := robfigNextDiffers[[2]string{c.time, c.spec}]; ok {
			w, err := time.Parse(time.RFC3339, d.want)
			if err != nil {
				t.Fatal(err)
			}
			if w.Equal(want) {
				t.Errorf("%s, %q: listed as a difference, but robfig's answer is the same", c.time, c.spec)
			}
			want = w
		}
		s, err := ParseCron(spec, loc)
		if want.IsZero() && err != nil {
			continue // never matches: ParseCron refuses it, robfig's Next returns zero
		}
		if err != nil {
			t.Errorf("ParseCron(%q) = %v", spec, err)
			continue
		}
		got := s.Next(at)
		if !got.Equal(want) {
			t.Errorf("%s, %q: Next() = %v, want %v", c.time, c.spec, got, want)
		}
	}
}

// TestRobfigActivation runs robfig/cron's TestActivation table through ParseCron and
// Next: a spec fires at the time exactly when robfig's does, but for the differences
// of robfigActivationDiffers.
func TestRobfigActivation(t *testing.T) {
	for _, c := range robfigActivation {
		at := robfigTime(t, c.time)
		spec, loc := robfigSpec(t, c.spec, at)
		s, err := ParseCron(spec, loc)
		if err != nil {
			t.Errorf("ParseCron(%q) = %v", spec, err)
			continue
		}
		want := c.expected
		if _, ok := robfigActivationDiffers[[2]string{c.time, c.spec}]; ok {
			want = !want
		}
		if got := s.Next(at.Add(-time.Second)).Equal(at); got != want {
			t.Errorf("%q fires at %s: %v, want %v (robfig %v)", c.spec, c.time, got, want, c.expected)
		}
	}
}
