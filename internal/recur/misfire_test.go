package recur

import (
	"math/rand/v2"
	"testing"
	"time"
)

// missedModel is the reference: it enumerates every target from next to now.
func missedModel(r Request) Result {
	if r.Next.IsZero() || r.Next.After(r.Now) {
		return Result{Next: r.Next, Carried: r.Carried}
	}
	k := r.MaxCatchUp
	if k <= 0 {
		k = CatchUpDefault
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
	case Skip:
		fire = onTime
	case All:
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
	res := Result{Next: t, Missed: skipped}
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

func sameResult(a, b Result) bool {
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
		r    Request
		want Result
	}{
		{"not due", Request{Schedule: everyMin, Next: at(1), Now: at(0)}, Result{Next: at(1)}},
		{"due now", Request{Schedule: everyMin, Next: at(0), Now: at(0), Grace: time.Minute}, Result{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"late within grace", Request{Schedule: everyMin, Next: at(0), Now: at(0).Add(59 * time.Second), Grace: time.Minute, Policy: Skip}, Result{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"at the grace", Request{Schedule: everyMin, Next: at(0), Now: at(1).Add(-time.Nanosecond), Grace: time.Minute, Policy: Skip}, Result{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"carried reported", Request{Schedule: everyMin, Next: at(0), Now: at(0), Carried: 3}, Result{Fires: []Fire{fire(0, 3)}, Next: at(1)}},
		// Down from 12:00 to 12:10:30 with a grace of 1 minute: 12:00..12:09 are late,
		// 12:10 is on time.
		{"once, one on time", Request{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: time.Minute}, Result{Fires: []Fire{fire(10, 10)}, Next: at(11), Missed: 10}},
		{"skip, one on time", Request{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: time.Minute, Policy: Skip}, Result{Fires: []Fire{fire(10, 10)}, Next: at(11), Missed: 10}},
		{"all, one on time", Request{Schedule: everyMin, Next: at(0), Now: at(2).Add(30 * time.Second), Grace: time.Minute, Policy: All}, Result{Fires: []Fire{fire(0, 0), fire(1, 0), fire(2, 0)}, Next: at(3)}},
		// With a grace of 10 s, every target is late.
		{"once, all late", Request{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: 10 * time.Second}, Result{Fires: []Fire{fire(10, 10)}, Next: at(11), Missed: 10}},
		{"skip, all late", Request{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: 10 * time.Second, Policy: Skip, Carried: 2}, Result{Next: at(11), Carried: 13, Missed: 11}},
		{"all, capped", Request{Schedule: everyMin, Next: at(0), Now: at(10).Add(30 * time.Second), Grace: 10 * time.Second, Policy: All, MaxCatchUp: 3}, Result{Fires: []Fire{fire(8, 8), fire(9, 0), fire(10, 0)}, Next: at(11), Missed: 8}},
		{"negative grace is zero", Request{Schedule: everyMin, Next: at(0), Now: at(0), Grace: -time.Hour, Policy: Skip}, Result{Fires: []Fire{fire(0, 0)}, Next: at(1)}},
		{"ended schedule", Request{Schedule: everyMin, Now: at(0), Carried: 1}, Result{Carried: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Missed(tt.r); !sameResult(got, tt.want) {
				t.Errorf("Missed() = %+v, want %+v", got, tt.want)
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
		req := Request{
			Schedule:   s,
			Next:       next,
			Now:        next.Add(time.Duration(r.Int64N(int64(2 * time.Hour)))),
			Policy:     Policy(r.IntN(4)),
			Grace:      time.Duration(r.Int64N(int64(10*time.Minute))) - time.Minute,
			MaxCatchUp: r.IntN(20) - 2,
			Carried:    r.IntN(3),
		}
		if got, want := Missed(req), missedModel(req); !sameResult(got, want) {
			t.Fatalf("#%d Missed(%+v) = %+v, model %+v", i, req, got, want)
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
		for _, p := range []Policy{Once, Skip, All} {
			t.Run(s.name+"/"+map[Policy]string{Once: "once", Skip: "skip", All: "all"}[p], func(t *testing.T) {
				res := Missed(Request{Schedule: s.s, Next: next, Now: now, Policy: p, Grace: time.Minute})
				if want := time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC); !res.Next.Equal(want) {
					t.Errorf("Next = %v, want %v", res.Next, want)
				}
				wantFires := map[Policy]int{Once: 60, Skip: 60, All: 100}[p]
				if len(res.Fires) != wantFires {
					t.Fatalf("len(Fires) = %d, want %d", len(res.Fires), wantFires)
				}
				if last := res.Fires[len(res.Fires)-1].Scheduled; !last.Equal(now.Truncate(time.Second)) {
					t.Errorf("last fire = %v, want %v", last, now.Truncate(time.Second))
				}
				if s.exact && res.Missed != total-wantFires {
					t.Errorf("Missed = %d, want %d", res.Missed, total-wantFires)
				}
				if !s.exact && (res.Missed < ScanMax || res.Missed > total-wantFires) {
					t.Errorf("Missed = %d, want between %d and %d", res.Missed, ScanMax, total-wantFires)
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
		req := Request{
			Schedule:   s,
			Next:       next,
			Now:        next.Add(time.Duration(r.Int64N(int64(4*time.Second))) - time.Second),
			Policy:     Policy(r.IntN(4)),
			Grace:      time.Duration(r.Int64N(int64(3*time.Second))) - time.Second,
			MaxCatchUp: r.IntN(5) - 1,
			Carried:    r.IntN(3),
		}
		after, ok := DueOne(s, req.Next, req.Now, req.Grace)
		if !ok {
			continue
		}
		ones++
		want := Result{Fires: []Fire{{Scheduled: next, Missed: req.Carried}}, Next: after}
		if got := Missed(req); !sameResult(got, want) {
			t.Fatalf("#%d DueOne(%+v) = %v, true; missed = %+v, want %+v", i, req, after, got, want)
		}
	}
	if ones < 500 {
		t.Fatalf("dueOne reported %d of 5000 requests, want at least 500", ones)
	}
}
