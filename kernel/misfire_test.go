package kernel

import (
	"math/rand/v2"
	"testing"
	"time"
)

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

// missedModel is the reference: it enumerates every target from next to now.
func missedModel(r misfireRequest) misfireResult {
	if r.Next.IsZero() || r.Next.After(r.Now) {
		return misfireResult{Next: r.Next, Carried: r.Carried}
	}
	k := r.MaxCatchUp
	if k <= 0 {
		k = MaxCatchUpDefault
	}
	cutoff := r.Now.Add(-max(r.Grace, 0))
	var late, onTime []time.Time
	t := r.Next
	for ; !t.IsZero() && !t.After(r.Now); t = r.Schedule.Next(t) {
		if t.Before(cutoff) {
			late = append(late, t)
		} else {
			onTime = append(onTime, t)
		}
	}
	var fire []time.Time
	switch r.Policy {
	case MisfireSkip:
		fire = onTime
	case MisfireAll:
		fire = append(append([]time.Time(nil), late...), onTime...)
	default:
		if len(onTime) > 0 {
			fire = onTime
		} else {
			fire = late[len(late)-1:]
		}
	}
	if len(fire) > k {
		fire = fire[len(fire)-k:]
	}
	skipped := len(late) + len(onTime) - len(fire)
	res := misfireResult{Next: t, Missed: skipped}
	if len(fire) == 0 {
		res.Carried = r.Carried + skipped
		return res
	}
	for _, x := range fire {
		res.Fires = append(res.Fires, Fire{Scheduled: x})
	}
	res.Fires[0].Missed = r.Carried + skipped
	return res
}

func sameResult(a, b misfireResult) bool {
	if !a.Next.Equal(b.Next) || a.Carried != b.Carried || a.Missed != b.Missed || len(a.Fires) != len(b.Fires) {
		return false
	}
	for i := range a.Fires {
		if !a.Fires[i].Scheduled.Equal(b.Fires[i].Scheduled) || a.Fires[i].Missed != b.Fires[i].Missed {
			return false
		}
	}
	return true
}

func TestMissed(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	everyMin := Every(time.Minute)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	fire := func(m, missed int) Fire { return Fire{Scheduled: at(m), Missed: missed} }
	for _, tt := range []struct {
		name string
		r    misfireRequest
		want misfireResult
	}{
		{"not due", misfireRequest{Schedule: everyMin, Next: at(1), Now: at(0)}, misfireResult{Next: at(1)}},
		{"due now", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(0), Grace: time.Minute}, misfireResult{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"late within grace", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(0).Add(59 * time.Second), Grace: time.Minute, Policy: MisfireSkip}, misfireResult{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"at the grace", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(1).Add(-time.Nanosecond), Grace: time.Minute, Policy: MisfireSkip}, misfireResult{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"carried reported", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(0), Carried: 3}, misfireResult{Fires: []Fire{fire(0, 3)}, Next: at(1)}},
		// Down from 12:00 to 12:10:30 with a grace of 1 minute: 12:00..12:09 are late,
		// 12:10 is on time.
		{"once, one on time", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: time.Minute}, misfireResult{Fires: []Fire{fire(10, 10)}, Next: at(11), Missed: 10}},
		{"skip, one on time", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: time.Minute, Policy: MisfireSkip}, misfireResult{Fires: []Fire{fire(10, 10)}, Next: at(11), Missed: 10}},
		{"all, one on time", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(2).Add(30 * time.Second), Grace: time.Minute, Policy: MisfireAll}, misfireResult{Fires: []Fire{fire(0, 0), fire(1, 0), fire(2, 0)}, Next: at(3)}},
		// With a grace of 10 s, every target is late.
		{"once, all late", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: 10 * time.Second}, misfireResult{Fires: []Fire{fire(10, 10)}, Next: at(11), Missed: 10}},
		{"skip, all late", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: 10 * time.Second, Policy: MisfireSkip, Carried: 2}, misfireResult{Next: at(11), Carried: 13, Missed: 11}},
		{"all, capped", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: 10 * time.Second, Policy: MisfireAll, MaxCatchUp: 3}, misfireResult{Fires: []Fire{fire(8, 8), fire(9, 0), fire(10, 0)}, Next: at(11), Missed: 8}},
		{"negative grace is zero", misfireRequest{Schedule: everyMin, Next: at(0), Now: at(0), Grace: -time.Hour, Policy: MisfireSkip}, misfireResult{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"ended schedule", misfireRequest{Schedule: everyMin, Now: at(0), Carried: 1}, misfireResult{Carried: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := missed(tt.r); !sameResult(got, tt.want) {
				t.Errorf("missed() = %+v, want %+v", got, tt.want)
			}
			if got := missedModel(tt.r); !sameResult(got, tt.want) {
				t.Errorf("missedModel() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMissedAgreesWithModel compares missed with the enumerating model over random
// schedules, gaps (at most 7,200 targets: below the scan bound, where missed is
// exact), graces and policies.
func TestMissedAgreesWithModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.UTC
	}
	specs := []string{"* * * * * *", "*/7 * * * * *", "0 */5 * * * *", "30 2 * * *", "0 * * * *", "0 0 29 2 *", "@every 13s"}
	for i := range 2000 {
		var s Schedule
		if r.IntN(3) == 0 {
			s = Every(time.Duration(1+r.IntN(5000)) * time.Millisecond * 7)
		} else {
			var err error
			if s, err = ParseCron(specs[r.IntN(len(specs))], ny); err != nil {
				t.Fatal(err)
			}
		}
		next := s.Next(time.Unix(1_700_000_000+r.Int64N(100_000_000), 0))
		req := misfireRequest{
			Schedule:   s,
			Next:       next,
			Now:        next.Add(time.Duration(r.Int64N(int64(2 * time.Hour)))),
			Policy:     Misfire(r.IntN(4)),
			Grace:      time.Duration(r.Int64N(int64(10*time.Minute))) - time.Minute,
			MaxCatchUp: r.IntN(20) - 2,
			Carried:    r.IntN(3),
		}
		if got, want := missed(req), missedModel(req); !sameResult(got, want) {
			t.Fatalf("#%d missed(%+v) = %+v, model %+v", i, req, got, want)
		}
	}
}

// TestMissedBounded checks a 1-second schedule ten years late under each policy: the
// answer comes at once, with the latest targets and the next one after now.
func TestMissedBounded(t *testing.T) {
	next := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2025, 1, 1, 0, 0, 0, 500_000_000, time.UTC)
	total := int(now.Sub(next)/time.Second) + 1
	cron1s, err := ParseCron("* * * * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name  string
		s     Schedule
		exact bool
	}{{"every", Every(time.Second), true}, {"cron", cron1s, false}} {
		for _, p := range []Misfire{MisfireOnce, MisfireSkip, MisfireAll} {
			t.Run(s.name+"/"+p.String(), func(t *testing.T) {
				res := missed(misfireRequest{Schedule: s.s, Next: next, Now: now, Policy: p, Grace: time.Minute})
				if want := time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC); !res.Next.Equal(want) {
					t.Errorf("Next = %v, want %v", res.Next, want)
				}
				wantFires := map[Misfire]int{MisfireOnce: 60, MisfireSkip: 60, MisfireAll: 100}[p]
				if len(res.Fires) != wantFires {
					t.Fatalf("len(Fires) = %d, want %d", len(res.Fires), wantFires)
				}
				if last := res.Fires[len(res.Fires)-1].Scheduled; !last.Equal(now.Truncate(time.Second)) {
					t.Errorf("last fire = %v, want %v", last, now.Truncate(time.Second))
				}
				if s.exact && res.Missed != total-wantFires {
					t.Errorf("Missed = %d, want %d", res.Missed, total-wantFires)
				}
				if !s.exact && (res.Missed < misfireScanMax || res.Missed > total-wantFires) {
					t.Errorf("Missed = %d, want between %d and %d", res.Missed, misfireScanMax, total-wantFires)
				}
				if res.Fires[0].Missed != res.Missed {
					t.Errorf("Fires[0].Missed = %d, want %d", res.Fires[0].Missed, res.Missed)
				}
			})
		}
	}
}

// TestDueOneAgreesWithMissed: when dueOne reports a target alone due and on time,
// missed fires it alone, with Carried as its Missed, under every policy.
func TestDueOneAgreesWithMissed(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	specs := []string{"* * * * * *", "*/7 * * * * *", "0 */5 * * * *", "@every 13s"}
	ones := 0
	for i := range 5000 {
		var s Schedule
		if r.IntN(2) == 0 {
			s = Every(time.Duration(1+r.IntN(3000)) * time.Millisecond)
		} else if s, err = ParseCron(specs[r.IntN(len(specs))], ny); err != nil {
			t.Fatal(err)
		}
		next := s.Next(time.Unix(1_700_000_000+r.Int64N(100_000_000), r.Int64N(1e9)))
		req := misfireRequest{
			Schedule:   s,
			Next:       next,
			Now:        next.Add(time.Duration(r.Int64N(int64(4*time.Second))) - time.Second),
			Policy:     Misfire(r.IntN(4)),
			Grace:      time.Duration(r.Int64N(int64(3*time.Second))) - time.Second,
			MaxCatchUp: r.IntN(5) - 1,
			Carried:    r.IntN(3),
		}
		after, ok := dueOne(s, req.Next, req.Now, req.Grace)
		if !ok {
			continue
		}
		ones++
		want := misfireResult{Fires: []Fire{{Scheduled: next, Missed: req.Carried}}, Next: after}
		if got := missed(req); !sameResult(got, want) {
			t.Fatalf("#%d dueOne(%+v) = %v, true; missed = %+v, want %+v", i, req, after, got, want)
		}
	}
	if ones < 500 {
		t.Fatalf("dueOne reported %d of 5000 requests, want at least 500", ones)
	}
}
