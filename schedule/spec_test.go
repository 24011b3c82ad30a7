package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/recur"
)

// The arithmetic of cron specs and intervals is tested in internal/recur; these tests
// check what package schedule adds: its errors, its panics and its limits.

func TestParseCronErrors(t *testing.T) {
	for _, tt := range []struct {
		name, spec, reason string
	}{
		// One spec per reason: the whole table of specs is internal/recur's
		// TestParseCronErrors; this one checks the wrapping of each reason.
		{"empty", "", "must not be empty"},
		{"too long", "0 0 * * *" + strings.Repeat(" ", CronSpecMax), "CronSpecMax"},
		{"TZ prefix", "TZ=UTC 0 0 * * *", "TZ="},
		{"robfig 554", "TZ=0", "TZ="},
		{"30 February", "0 0 30 2 *", "never matches"},
		{"too few fields", "0 0 *", "does not parse"},
		{"every zero", "@every 0s", "must be > 0"},
		{"every garbage", "@every soon", "@every"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseCron(tt.spec, nil)
			if err == nil || s != nil {
				t.Fatalf("ParseCron(%q) = %v, %v; want an error", tt.spec, s, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.HasPrefix(err.Error(), "schedule: ParseCron") {
				t.Errorf("ParseCron(%q) error = %q, want it to start with schedule: ParseCron and say %q", tt.spec, err, tt.reason)
			}
		})
	}
}

func TestEvery(t *testing.T) {
	s := Every(1500 * time.Millisecond)
	from := time.Date(2025, 3, 9, 6, 59, 59, 0, time.UTC)
	if got, want := s.Next(from), from.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Errorf("Next() = %v, want %v", got, want)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "schedule: Every") {
					t.Errorf("Every(%v) recovered %v, want a schedule: Every panic", d, r)
				}
			}()
			Every(d)
		}()
	}
}

// TestCronLimits: the limits schedule documents are internal/recur's.
func TestCronLimits(t *testing.T) {
	if CronSpecMax != recur.SpecMax || CronHorizonYears != recur.HorizonYears {
		t.Errorf("CronSpecMax, CronHorizonYears = %d, %d; recur has %d, %d", CronSpecMax, CronHorizonYears, recur.SpecMax, recur.HorizonYears)
	}
}

func TestMisfireString(t *testing.T) {
	for _, tt := range []struct {
		m    Misfire
		want string
	}{
		{MisfireDefault, "once"}, {MisfireOnce, "once"}, {MisfireSkip, "skip"}, {MisfireAll, "all"}, {Misfire(9), "misfire(9)"},
	} {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Misfire(%d).String() = %q, want %q", tt.m, got, tt.want)
		}
	}
	if Misfire(4).Valid() || !MisfireAll.Valid() || !MisfireDefault.Valid() {
		t.Error("Valid() accepts an unknown policy or refuses a defined one")
	}
}

// TestMisfireIsPolicy: schedule's misfire policies and limits are internal/recur's, value
// for value, as the scheduler converts one into the other.
func TestMisfireIsPolicy(t *testing.T) {
	for _, tt := range []struct {
		m Misfire
		p recur.Policy
	}{{MisfireDefault, recur.Default}, {MisfireOnce, recur.Once}, {MisfireSkip, recur.Skip}, {MisfireAll, recur.All}} {
		if recur.Policy(tt.m) != tt.p {
			t.Errorf("recur.Policy(%v) = %d, want %d", tt.m, recur.Policy(tt.m), tt.p)
		}
	}
	if maxCatchUpDefault != recur.CatchUpDefault {
		t.Errorf("maxCatchUpDefault = %d, recur.CatchUpDefault = %d", maxCatchUpDefault, recur.CatchUpDefault)
	}
	// Fire and recur.Fire convert into each other.
	if f := Fire(recur.Fire{Missed: 3}); f.Missed != 3 {
		t.Errorf("Fire(recur.Fire{Missed: 3}).Missed = %d", f.Missed)
	}
}
