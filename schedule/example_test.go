package schedule_test

// The README and docs/schedules.md show the bodies of these examples;
// internal/doccheck fails the tests when a block and the body it names differ.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store/storekit"
)

// ExampleParseCron shows ax's rule for daylight saving time: a daily 02:30 job runs at
// the transition on the day the clock skips 02:30, and a daily 01:30 job runs once, at
// the first 01:30, on the day the clock shows 01:30 twice.
func ExampleParseCron() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []struct {
		spec string
		from time.Time
	}{
		{"30 2 * * *", time.Date(2025, 3, 8, 12, 0, 0, 0, ny)},
		{"30 1 * * *", time.Date(2025, 11, 1, 12, 0, 0, 0, ny)},
	} {
		s, err := schedule.ParseCron(c.spec, ny)
		if err != nil {
			fmt.Println(err)
			return
		}
		t := c.from
		for range 2 {
			t = s.Next(t)
			fmt.Println(c.spec, "→", t.Format("2006-01-02 15:04 MST"))
		}
	}
	_, err = schedule.ParseCron("0 0 30 2 *", ny)
	fmt.Println(err)
	// Output:
	// 30 2 * * * → 2025-03-09 03:00 EDT
	// 30 2 * * * → 2025-03-10 02:30 EDT
	// 30 1 * * * → 2025-11-02 01:30 EDT
	// 30 1 * * * → 2025-11-03 01:30 EST
	// schedule: ParseCron "0 0 30 2 *": never matches: no month in the spec has the day of month it names
}

// A nightly job on New York's wall clock.
func Example_readme() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }() // the scheduler stops with its kernel
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		panic(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	nightly, err := schedule.ParseCron("30 2 * * *", ny) // or schedule.Every(5*time.Minute)
	if err != nil {
		panic(err)
	}
	_, err = s.Add(nightly, func(ctx context.Context, f schedule.Fire) error {
		return nil // f.Scheduled is the target, f.Missed the targets that did not fire
	}, &schedule.Options{Name: "report", Misfire: schedule.MisfireOnce, Overlap: schedule.OverlapSkip})
	fmt.Println(err, nightly.Next(time.Date(2025, 3, 8, 12, 0, 0, 0, ny))) // no 02:30 on 9 March: 03:00
	// Output:
	// <nil> 2025-03-09 03:00:00 -0400 EDT
}

// A nightly job on the wall clock of New York, and a refresh every 10 ms that never
// runs twice at once.
func Example() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	nightly, err := schedule.ParseCron("30 2 * * *", ny)
	if err != nil {
		panic(err)
	}
	// 02:30 does not exist on 9 March 2025 (spring forward): it runs at 03:00.
	fmt.Println(nightly.Next(time.Date(2025, 3, 8, 12, 0, 0, 0, ny)))
	report, err := s.Add(nightly, func(ctx context.Context, f schedule.Fire) error {
		return nil // f.Scheduled is the target; f.Missed the targets that did not fire
	}, &schedule.Options{Name: "report", Misfire: schedule.MisfireOnce, Timeout: time.Hour})
	if err != nil {
		panic(err)
	}
	defer report.Remove()

	fires := make(chan schedule.Fire, 8)
	refresh, err := s.Add(schedule.Every(10*time.Millisecond), func(ctx context.Context, f schedule.Fire) error {
		fires <- f
		return nil
	}, &schedule.Options{
		Name:       "refresh",
		RunOnStart: true,                 // fire once at once
		Overlap:    schedule.OverlapSkip, // never two at once
		Jitter:     time.Millisecond,     // each fire up to 1 ms late, spread
		Priority:   kernel.High,
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		<-fires
	}
	refresh.Remove() // fires no more; a running occurrence completes
	fmt.Println(s.Stats()["report"].Fires, len(s.Stats()))
	// Output:
	// 2025-03-09 03:00:00 -0400 EDT
	// 0 1
}

// A durable schedule: two kernels (replicas) on one store follow it, and each
// occurrence fires once, in one of them.
func Example_durable() {
	store := storekit.NewMemoryStore() // in production: a mysqlstore.Store, one table for every replica
	ran := make(chan time.Time, 8)
	report := func(ctx context.Context, payload []byte) error {
		_, target, _ := schedule.OccurrenceOf(ctx) // the occurrence's target
		select {
		case ran <- target:
		default:
		}
		return nil
	}
	for _, owner := range []string{"replica-1", "replica-2"} {
		k, err := kernel.New(kernel.Config{Store: store, Owner: owner})
		if err != nil {
			panic(err)
		}
		defer func() { _ = k.Close() }()
		if err := k.Register("report", report); err != nil {
			panic(err)
		}
		s, err := schedule.New(k, schedule.Config{Store: store})
		if err != nil {
			panic(err)
		}
		defer s.Stop()
		_, err = s.AddDurable(schedule.Every(20*time.Millisecond), "report", []byte("weekly"), &schedule.Options{
			Name:    "report", // required: the schedule's identity in the store
			Misfire: schedule.MisfireOnce,
			Grace:   time.Minute,
		})
		if err != nil {
			panic(err)
		}
	}
	targets := []time.Time{<-ran, <-ran, <-ran}
	slices.SortFunc(targets, time.Time.Compare) // the replicas run them side by side
	// Distinct targets of the schedule: none fired twice.
	apart := true
	for i := 1; i < len(targets); i++ {
		gap := targets[i].Sub(targets[i-1])
		apart = apart && gap > 0 && gap%(20*time.Millisecond) == 0
	}
	fmt.Println(apart)
	// Output:
	// true
}
