package fuzz

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/axsched/ax/schedule"
)

// cronSeeds are the table cases FuzzParseCron starts from.
var cronSeeds = []struct {
	spec string
	at   int64 // unix seconds
}{
	{"*/5 * * * *", 1_741_500_000},
	{"30 2 * * *", 1_741_478_400},     // 2025-03-09, America/New_York springs forward
	{"30 1 * * *", 1_762_041_600},     // 2025-11-02, America/New_York falls back
	{"0 0 29 2 *", 4_102_444_800},     // 2100, no 29 February
	{"0 0 1 * fri", 1_700_000_000},    // day of month or day of week
	{"*/20 * * * * *", 1_700_000_000}, // seconds
	{"@weekly", 0},
	{"@every 90m", 1_700_000_000},
	{"0 0 30 2 *", 0}, // never matches
	{"TZ=0", 0},       // panics robfig/cron's parser
	{"TZ=TZ=TZ=", 0},
	{"CRON_TZ=UTC * * * * * *", 0},
}

// FuzzParseCron checks that ParseCron never panics and that an accepted spec's Next,
// from any time, is strictly increasing and returns. In UTC, where there is no daylight
// saving time, robfig/cron's own SpecSchedule.Next is the reference: they agree
// wherever it finds a time (it looks 5 years ahead, schedule.CronHorizonYears further).
func FuzzParseCron(f *testing.F) {
	for _, s := range cronSeeds {
		f.Add(s.spec, s.at, false)
		f.Add(s.spec, s.at, true)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("EST", -5*3600)
	}
	parser := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	f.Fuzz(func(t *testing.T, spec string, at int64, inNY bool) {
		loc := time.UTC
		if inNY {
			loc = ny
		}
		s, err := schedule.ParseCron(spec, loc)
		if err != nil {
			return
		}
		from := time.Unix(at%8_000_000_000, 0) // years 1716 to 2223
		var model cron.Schedule
		if !inNY {
			if m, err := parser.Parse(spec); err == nil {
				if ss, ok := m.(*cron.SpecSchedule); ok {
					ss.Location = time.UTC
					// robfig marks a day field unrestricted only when written * or ?
					// (or */1); ParseCron, as Vixie cron, when it starts with * or ?.
					if f := strings.Fields(spec); len(f) >= 5 && !strings.HasPrefix(spec, "@") {
						dom, dow := f[len(f)-3], f[len(f)-1]
						ss.Dom = withStar(ss.Dom, dom[0] == '*' || dom[0] == '?')
						ss.Dow = withStar(ss.Dow, dow[0] == '*' || dow[0] == '?')
					}
					model = ss
				}
			}
		}
		for range 10 {
			next := s.Next(from)
			if model != nil {
				want := model.Next(from)
				if !want.IsZero() && !next.Equal(want) {
					t.Fatalf("%q: Next(%v) = %v, robfig/cron %v", spec, from, next, want)
				}
			}
			if next.IsZero() {
				return
			}
			if !next.After(from) {
				t.Fatalf("%q in %s: Next(%v) = %v, not after it", spec, loc, from, next)
			}
			from = next
		}
	})
}

// cronStar is robfig/cron's mark of an unrestricted field (its starBit).
const cronStar = 1 << 63

// withStar returns field with its star bit set when star holds, and clear otherwise.
func withStar(field uint64, star bool) uint64 {
	if star {
		return field | cronStar
	}
	return field &^ cronStar
}
