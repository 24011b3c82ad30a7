package kernel_test

import (
	"fmt"
	"time"

	"github.com/axsched/ax/kernel"
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
		s, err := kernel.ParseCron(c.spec, ny)
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
	_, err = kernel.ParseCron("0 0 30 2 *", ny)
	fmt.Println(err)
	// Output:
	// 30 2 * * * → 2025-03-09 03:00 EDT
	// 30 2 * * * → 2025-03-10 02:30 EDT
	// 30 1 * * * → 2025-11-02 01:30 EDT
	// 30 1 * * * → 2025-11-03 01:30 EST
	// kernel: ParseCron: spec = "0 0 30 2 *": never matches: no month in the spec has the day of month it names
}
