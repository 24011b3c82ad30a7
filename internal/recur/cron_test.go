package recur

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	_ "time/tzdata" // the zones the tests use, whatever the machine has
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time.LoadLocation(%q) = %v", name, err)
	}
	return loc
}

func mustParseCron(t *testing.T, spec string, loc *time.Location) Schedule {
	t.Helper()
	s, err := ParseCron(spec, loc)
	if err != nil {
		t.Fatalf("ParseCron(%q) = %v", spec, err)
	}
	return s
}

// fires returns the first n fire times of s after from, each computed from the one
// before.
func fires(s Schedule, from time.Time, n int) []time.Time {
	var out []time.Time
	t := from
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

func wantTimes(t *testing.T, what string, got []time.Time, want []string) {
	t.Helper()
	var g []string
	for _, x := range got {
		g = append(g, x.Format(time.RFC3339))
	}
	if strings.Join(g, " ") != strings.Join(want, " ") {
		t.Errorf("%s = %v, want %v", what, g, want)
	}
}

func TestParseCronDescriptors(t *testing.T) {
	from := time.Date(2024, 2, 28, 13, 14, 15, 0, time.UTC) // a Wednesday, leap year
	for _, tt := range []struct {
		spec string
		want []string
	}{
		{"@yearly", []string{"2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}},
		{"@annually", []string{"2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}},
		{"@monthly", []string{"2024-03-01T00:00:00Z", "2024-04-01T00:00:00Z"}},
		{"@weekly", []string{"2024-03-03T00:00:00Z", "2024-03-10T00:00:00Z"}},
		{"@daily", []string{"2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"}},
		{"@midnight", []string{"2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"}},
		{"@hourly", []string{"2024-02-28T14:00:00Z", "2024-02-28T15:00:00Z"}},
		{"@every 90m", []string{"2024-02-28T14:44:15Z", "2024-02-28T16:14:15Z"}},
		{"  @daily  ", []string{"2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"}},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			wantTimes(t, "fires", fires(mustParseCron(t, tt.spec, nil), from, 2), tt.want)
		})
	}
}

func TestParseCronFields(t *testing.T) {
	from := time.Date(2024, 2, 28, 13, 14, 15, 0, time.UTC) // Wednesday
	for _, tt := range []struct {
		name, spec string
		want       []string
	}{
		{"every minute", "* * * * *", []string{"2024-02-28T13:15:00Z", "2024-02-28T13:16:00Z"}},
		{"seconds field", "*/20 * * * * *", []string{"2024-02-28T13:14:20Z", "2024-02-28T13:14:40Z", "2024-02-28T13:15:00Z"}},
		{"second 5 of minute 0", "5 0 * * * *", []string{"2024-02-28T14:00:05Z", "2024-02-28T15:00:05Z"}},
		{"names", "0 9 * feb-mar mon", []string{"2024-03-04T09:00:00Z", "2024-03-11T09:00:00Z"}},
		// Both restricted: the 1st of the month OR a Friday.
		{"dom or dow", "0 0 1 * fri", []string{"2024-03-01T00:00:00Z", "2024-03-08T00:00:00Z", "2024-03-15T00:00:00Z", "2024-03-22T00:00:00Z", "2024-03-29T00:00:00Z", "2024-04-01T00:00:00Z", "2024-04-05T00:00:00Z"}},
		// Day of week is *: the 13th, any weekday.
		{"dom and star dow", "0 0 13 * *", []string{"2024-03-13T00:00:00Z", "2024-04-13T00:00:00Z"}},
		// Day of month is ?: every Friday.
		{"question dom", "0 0 ? * 5", []string{"2024-03-01T00:00:00Z", "2024-03-08T00:00:00Z"}},
		// Day of month starts with *, so both must match: a March 1, 11, 21 or 31
		// that is a Sunday (Vixie cron's rule; robfig/cron ORs them).
		{"stepped dom and dow", "0 0 */10 3 sun", []string{"2024-03-31T00:00:00Z", "2026-03-01T00:00:00Z", "2027-03-21T00:00:00Z", "2029-03-11T00:00:00Z"}},
		// Day of week starts with *: a 13th that is a Sunday, Tuesday, Thursday or
		// Saturday.
		{"dom and stepped dow", "0 0 13 * */2", []string{"2024-04-13T00:00:00Z", "2024-06-13T00:00:00Z"}},
		{"leap day", "0 0 29 2 *", []string{"2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"last day of some months", "0 0 31 * *", []string{"2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z"}},
		{"30th skips February", "0 12 30 * *", []string{"2024-03-30T12:00:00Z", "2024-04-30T12:00:00Z"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantTimes(t, "fires", fires(mustParseCron(t, tt.spec, nil), from, len(tt.want)), tt.want)
		})
	}
}

func TestParseCronLeapDayAcross2100(t *testing.T) {
	// 2100 is no leap year: the next 29 February after 2096 is in 2104, eight years on.
	s := mustParseCron(t, "0 0 29 2 *", nil)
	got := s.Next(time.Date(2096, 3, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2104, 2, 29, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Next() = %v, want %v", got, want)
	}
}

func TestParseCronErrors(t *testing.T) {
	for _, tt := range []struct {
		name, spec, reason string
	}{
		{"empty", "", "must not be empty"},
		{"blank", "   ", "must not be empty"},
		{"too long", "0 0 * * *" + strings.Repeat(" ", SpecMax), "CronSpecMax"},
		{"TZ prefix", "TZ=UTC 0 0 * * *", "TZ="},
		{"CRON_TZ prefix", "CRON_TZ=Europe/Paris 0 0 * * *", "TZ="},
		{"lower tz prefix", "tz=UTC 0 0 * * *", "TZ="},
		// Inputs that panic robfig/cron v3.0.1's parser (robfig/cron#554, #470).
		{"robfig 554", "TZ=0", "TZ="},
		{"robfig 470", "TZ=TZ=TZ=", "TZ="},
		{"TZ only", "TZ=", "TZ="},
		{"CRON_TZ no fields", "CRON_TZ=UTC", "TZ="},
		{"30 February", "0 0 30 2 *", "never matches"},
		{"31 April", "0 0 31 4 *", "never matches"},
		{"31 of 30-day months", "0 0 31 4,6,9,11 *", "never matches"},
		{"too few fields", "0 0 *", "does not parse"},
		{"too many fields", "0 0 0 * * * *", "does not parse"},
		{"minute out of range", "60 * * * *", "does not parse"},
		{"day 0", "0 0 0 * *", "does not parse"},
		{"weekday 7", "0 0 * * 7", "does not parse"},
		{"bad step", "*/0 * * * *", "does not parse"},
		{"unknown descriptor", "@fortnightly", "does not parse"},
		{"every zero", "@every 0s", "must be > 0"},
		{"every negative", "@every -1m", "must be > 0"},
		{"every garbage", "@every soon", "@every"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseCron(tt.spec, nil)
			if err == nil {
				t.Fatalf("ParseCron(%q) = %v, nil; want an error", tt.spec, s)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("ParseCron(%q) error = %q, want it to say %q", tt.spec, err, tt.reason)
			}
		})
	}
}

// TestParseCronSafeRecovers checks the recover around robfig/cron's parser on the
// inputs known to panic it, which ParseCron itself refuses before parsing.
func TestParseCronSafeRecovers(t *testing.T) {
	for _, spec := range []string{"TZ=0", "TZ=TZ=TZ=", "CRON_TZ=UTC"} {
		if _, err := parseCronSafe(spec); err == nil || !strings.Contains(err.Error(), "panicked") {
			t.Errorf("parseCronSafe(%q) = %v, want an error saying the parser panicked", spec, err)
		}
	}
}

func TestEvery(t *testing.T) {
	var s Schedule = Every(1500 * time.Millisecond)
	from := time.Date(2025, 3, 9, 6, 59, 59, 0, time.UTC)
	got := fires(s, from, 2)
	if want := from.Add(1500 * time.Millisecond); !got[0].Equal(want) {
		t.Errorf("Next() = %v, want %v", got[0], want)
	}
	if want := from.Add(3 * time.Second); !got[1].Equal(want) {
		t.Errorf("Next(Next()) = %v, want %v", got[1], want)
	}
	if got := s.(Every).String(); got != "@every 1.5s" {
		t.Errorf("String() = %q, want @every 1.5s", got)
	}
}

// TestEveryIgnoresWallClock checks that @every counts absolute time across a DST
// transition.
func TestEveryIgnoresWallClock(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	s := mustParseCron(t, "@every 1h", ny)
	from := time.Date(2025, 3, 9, 1, 0, 0, 0, ny) // EST
	wantTimes(t, "fires", fires(s, from, 2), []string{"2025-03-09T03:00:00-04:00", "2025-03-09T04:00:00-04:00"})
}

func TestCronSpringForward(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	from := time.Date(2025, 3, 8, 12, 0, 0, 0, ny)
	for _, tt := range []struct {
		name, spec string
		n          int
		want       []string
	}{
		{"02:30 runs at the transition", "30 2 * * *", 3, []string{"2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00", "2025-03-11T02:30:00-04:00"}},
		{"01:30 unaffected", "30 1 * * *", 2, []string{"2025-03-09T01:30:00-05:00", "2025-03-10T01:30:00-04:00"}},
		{"03:30 unaffected", "30 3 * * *", 2, []string{"2025-03-09T03:30:00-04:00", "2025-03-10T03:30:00-04:00"}},
		{"02:00 02:30 03:00 collapse", "0,30 2,3 9 3 *", 3, []string{"2025-03-09T03:00:00-04:00", "2025-03-09T03:30:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"hourly", "0 * 9 3 *", 4, []string{"2025-03-09T00:00:00-05:00", "2025-03-09T01:00:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-09T04:00:00-04:00"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantTimes(t, "fires", fires(mustParseCron(t, tt.spec, ny), from, tt.n), tt.want)
		})
	}
}

func TestCronFallBack(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	from := time.Date(2025, 11, 1, 12, 0, 0, 0, ny)
	for _, tt := range []struct {
		name, spec string
		n          int
		want       []string
	}{
		{"01:30 once, first occurrence", "30 1 * * *", 3, []string{"2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"}},
		{"00:30 unaffected", "30 0 * * *", 2, []string{"2025-11-02T00:30:00-04:00", "2025-11-03T00:30:00-05:00"}},
		{"02:30 unaffected", "30 2 * * *", 2, []string{"2025-11-02T02:30:00-05:00", "2025-11-03T02:30:00-05:00"}},
		// The hour field allows every hour: the repeated hour runs in both passes,
		// 01:00 EDT, then 01:00 EST one hour later.
		{"hourly", "0 * 2 11 *", 4, []string{"2025-11-02T00:00:00-04:00", "2025-11-02T01:00:00-04:00", "2025-11-02T01:00:00-05:00", "2025-11-02T02:00:00-05:00"}},
		{"every 15 minutes", "*/15 * 2 11 *", 10, []string{"2025-11-02T00:00:00-04:00", "2025-11-02T00:15:00-04:00", "2025-11-02T00:30:00-04:00", "2025-11-02T00:45:00-04:00", "2025-11-02T01:00:00-04:00", "2025-11-02T01:15:00-04:00", "2025-11-02T01:30:00-04:00", "2025-11-02T01:45:00-04:00", "2025-11-02T01:00:00-05:00", "2025-11-02T01:15:00-05:00"}},
		// Hours 1 and 2 only: a wall time of the repeated hour fires in its first
		// pass only.
		{"hours 1-2", "0 1-2 2 11 *", 2, []string{"2025-11-02T01:00:00-04:00", "2025-11-02T02:00:00-05:00"}},
		{"every 20 minutes", "*/20 1-2 2 11 *", 5, []string{"2025-11-02T01:00:00-04:00", "2025-11-02T01:20:00-04:00", "2025-11-02T01:40:00-04:00", "2025-11-02T02:00:00-05:00", "2025-11-02T02:20:00-05:00"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantTimes(t, "fires", fires(mustParseCron(t, tt.spec, ny), from, tt.n), tt.want)
		})
	}
}

// TestCronFallBackFromSecondPass checks Next from instants in the repeated hour's
// second pass: for a spec that allows every hour, the next wall time of that pass;
// for others, the wall times there fired in the first pass, so the next fire is after
// the repetition.
func TestCronFallBackFromSecondPass(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	firstPass := time.Date(2025, 11, 2, 5, 10, 0, 0, time.UTC)  // 01:10 EDT
	secondPass := time.Date(2025, 11, 2, 6, 10, 0, 0, time.UTC) // 01:10 EST
	transition := time.Date(2025, 11, 2, 6, 0, 0, 0, time.UTC)  // 01:00 EST
	for _, tt := range []struct {
		name, spec string
		after      time.Time
		want       string
	}{
		{"minutely from first pass", "* * * * *", firstPass, "2025-11-02T01:11:00-04:00"},
		{"minutely from second pass", "* * * * *", secondPass, "2025-11-02T01:11:00-05:00"},
		{"minutely at the transition", "* * * * *", transition, "2025-11-02T01:01:00-05:00"},
		{"minutely just before the transition", "* * * * *", transition.Add(-time.Second), "2025-11-02T01:00:00-05:00"},
		{"hour 1 from first pass", "* 1 * * *", firstPass, "2025-11-02T01:11:00-04:00"},
		{"hour 1 from second pass", "* 1 * * *", secondPass, "2025-11-03T01:00:00-05:00"},
		{"hour 1 at the transition", "* 1 * * *", transition, "2025-11-03T01:00:00-05:00"},
		{"hour 1 just before the transition", "* 1 * * *", transition.Add(-time.Second), "2025-11-03T01:00:00-05:00"},
		{"01:30 from second pass", "30 1 * * *", secondPass, "2025-11-03T01:30:00-05:00"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParseCron(t, tt.spec, ny).Next(tt.after)
			if got.Format(time.RFC3339) != tt.want {
				t.Errorf("Next(%v) = %v, want %s", tt.after, got.Format(time.RFC3339), tt.want)
			}
		})
	}
}

// TestCronAgreesWithRobfigInUTC compares Next with robfig/cron's own SpecSchedule.Next
// over random specs and times in UTC, where there is no DST: they must agree.
func TestCronAgreesWithRobfigInUTC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20_000
	if testing.Short() || raceEnabled {
		n = 3_000
	}
	for i := range n {
		spec := randomSpec(r)
		ours, err := ParseCron(spec, time.UTC)
		if err != nil {
			continue // a spec that never matches, refused
		}
		theirs, err := cronParser.Parse(spec)
		if err != nil {
			t.Fatalf("robfig cannot parse %q, which ParseCron accepted: %v", spec, err)
		}
		sp := theirs.(*cron.SpecSchedule)
		sp.Location = time.UTC
		// robfig marks a day field unrestricted only when written * or ? (or */1);
		// ParseCron, as Vixie cron, when it starts with * or ?.
		f := strings.Fields(spec)
		sp.Dom = withStar(sp.Dom, starts(f[3]))
		sp.Dow = withStar(sp.Dow, starts(f[5]))
		at := time.Unix(r.Int64N(4_000_000_000), r.Int64N(2)*r.Int64N(1e9)).UTC()
		for j := 0; j < 5; j++ {
			got, want := ours.Next(at), theirs.Next(at)
			if want.IsZero() {
				// robfig looks 5 years ahead, ours HorizonYears.
				if !got.IsZero() && got.Before(at.AddDate(5, 0, 0)) {
					t.Fatalf("#%d %q: Next(%v) = %v, robfig found none", i, spec, at, got)
				}
				break
			}
			if !got.Equal(want) {
				t.Fatalf("#%d %q: Next(%v) = %v, robfig %v", i, spec, at, got, want)
			}
			at = got
		}
	}
}

// randomSpec returns a random 6-field spec, with a bias towards restricted fields.
func randomSpec(r *rand.Rand) string {
	field := func(lo, hi int) string {
		switch r.IntN(6) {
		case 0:
			return "*"
		case 1:
			return "*/" + strconv.Itoa(1+r.IntN(hi-lo+1))
		case 2:
			a := lo + r.IntN(hi-lo+1)
			b := a + r.IntN(hi-a+1)
			return strconv.Itoa(a) + "-" + strconv.Itoa(b)
		case 3:
			a, b := lo+r.IntN(hi-lo+1), lo+r.IntN(hi-lo+1)
			return strconv.Itoa(a) + "," + strconv.Itoa(b)
		case 4:
			if r.IntN(3) == 0 {
				return "?"
			}
			return strconv.Itoa(lo+r.IntN(hi-lo+1)) + "/" + strconv.Itoa(1+r.IntN(5))
		default:
			return strconv.Itoa(lo + r.IntN(hi-lo+1))
		}
	}
	return strings.Join([]string{field(0, 59), field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 6)}, " ")
}

// TestCronNextIncreasesAndEnds checks, over random specs, locations and times, that
// Next is strictly increasing, lies on a wall time the spec matches (or a
// spring-forward transition), and returns.
func TestCronNextIncreasesAndEnds(t *testing.T) {
	locs := []*time.Location{time.UTC}
	for _, name := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Sao_Paulo", "Asia/Kolkata"} {
		if l, err := time.LoadLocation(name); err == nil {
			locs = append(locs, l)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	n := 3_000
	if testing.Short() || raceEnabled {
		n = 500
	}
	for i := range n {
		spec := randomSpec(r)
		loc := locs[r.IntN(len(locs))]
		s, err := ParseCron(spec, loc)
		if err != nil {
			continue
		}
		at := time.Unix(r.Int64N(4_000_000_000), r.Int64N(1e9))
		for j := 0; j < 20; j++ {
			next := s.Next(at)
			if next.IsZero() {
				break
			}
			if !next.After(at) {
				t.Fatalf("#%d %q in %s: Next(%v) = %v, not after it", i, spec, loc, at, next)
			}
			if w := wallOf(next.In(loc)); !s.(*Cron).matchesWall(w) && !isTransition(next) {
				t.Fatalf("#%d %q in %s: Next(%v) = %v, a wall time the spec does not match", i, spec, loc, at, next)
			}
			at = next
		}
	}
}

// matchesWall reports whether the wall time w (in UTC) matches c.
func (c *Cron) matchesWall(w time.Time) bool {
	got, ok := c.nextWall(w, w.Year())
	return ok && got.Equal(w)
}

// isTransition reports whether t is the first instant of a zone period.
func isTransition(t time.Time) bool {
	start, _ := t.ZoneBounds()
	return start.Equal(t)
}

func BenchmarkCronNext(b *testing.B) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	for _, spec := range []string{"*/5 * * * *", "0 0 29 2 *", "0 9 * * mon-fri"} {
		s, err := ParseCron(spec, ny)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			at := time.Date(2025, 1, 1, 0, 0, 0, 0, ny)
			for b.Loop() {
				at = s.Next(at)
			}
		})
	}
}

// TestCronDayFieldStartingWithStar checks Vixie cron's rule: a day-of-month or
// day-of-week field whose text starts with * or ? (a step such as */5 included) is
// unrestricted, so a day must match both fields.
func TestCronDayFieldStartingWithStar(t *testing.T) {
	for _, tt := range []struct {
		name, spec string
		after      time.Time
		want       string
	}{
		// Aug 1 is in */5 but no Monday; Aug 6 is both.
		{"stepped dom and Monday", "0 0 0 */5 Apr,Aug,Oct Mon", time.Date(2012, 7, 9, 23, 35, 0, 0, time.UTC), "2012-08-06T00:00:00Z"},
		// Sunday 15 July is not in */10 (1, 11, 21, 31): the first Sunday that is,
		// is 21 October.
		{"stepped dom and Sunday", "0 * * */10 * Sun", time.Date(2012, 7, 14, 23, 59, 0, 0, time.UTC), "2012-10-21T00:00:00Z"},
		{"question dom and Sunday", "0 0 ? * Sun", time.Date(2012, 7, 14, 0, 0, 0, 0, time.UTC), "2012-07-15T00:00:00Z"},
		// Neither starts with *: either matches.
		{"listed dom or Sunday", "0 0 1,15 * Sun", time.Date(2012, 7, 9, 0, 0, 0, 0, time.UTC), "2012-07-15T00:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParseCron(t, tt.spec, nil).Next(tt.after)
			if got.Format(time.RFC3339) != tt.want {
				t.Errorf("Next(%v) = %v, want %s", tt.after, got.Format(time.RFC3339), tt.want)
			}
		})
	}
}
