package timewheel_test

import (
	"fmt"
	"time"

	"github.com/axsched/ax/timewheel"
)

func Example() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := timewheel.New[string](time.Millisecond, start)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Schedule(start.Add(1500*time.Microsecond), "retry")
	w.Schedule(start.Add(2*time.Second), "timeout")
	h := w.Schedule(start.Add(time.Hour), "delayed")
	fmt.Println("cancelled:", w.Cancel(h), "pending:", w.Len())

	// A caller arms its one timer for Next() and advances the wheel when it fires.
	for {
		next, ok := w.Next()
		if !ok {
			break
		}
		w.Advance(next, func(v string) {
			fmt.Printf("%v: %s\n", next.Sub(start), v)
		})
	}
	// Output:
	// cancelled: true pending: 2
	// 2ms: retry
	// 2s: timeout
}

func ExampleWheel_Advance() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w, _ := timewheel.New[int](time.Millisecond, start)
	for i := range 5 {
		w.Schedule(start.Add(time.Duration(i)*time.Second), i)
	}
	n := w.Advance(start.Add(2500*time.Millisecond), func(v int) { fmt.Println("fired", v) })
	fmt.Println(n, "fired,", w.Len(), "pending")
	// Output:
	// fired 0
	// fired 1
	// fired 2
	// 3 fired, 2 pending
}

func ExampleWheel_Clear() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w, _ := timewheel.New[string](time.Millisecond, start)
	w.Schedule(start.Add(time.Minute), "a")
	w.Schedule(start.Add(time.Minute), "b")
	dropped := 0
	w.Clear(func(string) { dropped++ })
	fmt.Println(dropped, w.Len())
	// Output: 2 0
}
