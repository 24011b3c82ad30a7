package bench

import (
	"context"
	"runtime"
	"time"
)

// spinBelow is the gap under which the open-loop generator yields in a loop
// instead of sleeping: a sleep here overshoots by up to a millisecond, which
// would bunch arrivals that the schedule spaces by microseconds.
const spinBelow = 2 * time.Millisecond

// yieldAhead is how long before an arrival [OpenLoopYield] stops sleeping
// and starts yielding, as a busy service thread waits for its next piece of
// work.
const yieldAhead = 300 * time.Microsecond

// OpenLoop calls fire(i, due) for i = 0 … n-1, each no earlier than its due
// time start + i/rate, whatever the previous calls cost: a late generator
// catches up at once instead of stretching the schedule, and the callee
// measures from due (not from the call) so a slow submission is not hidden
// (no coordinated omission). Gaps shorter than a couple of milliseconds are
// waited out by yielding, longer ones by sleeping.
//
// It blocks until the n calls are made or ctx is done, and returns ctx.Err()
// in that case (checked between calls), else nil. rate must be > 0.
func OpenLoop(ctx context.Context, start time.Time, n int, rate float64, fire func(i int, due time.Duration)) error {
	return openLoop(ctx, start, n, rate, spinBelow, spinBelow/2, fire)
}

// OpenLoopYield is [OpenLoop] waiting for each arrival the way a busy service
// thread does: it sleeps until about 300 µs before the due time, then yields
// (runtime.Gosched) until it is due.
func OpenLoopYield(ctx context.Context, start time.Time, n int, rate float64, fire func(i int, due time.Duration)) error {
	return openLoop(ctx, start, n, rate, yieldAhead, yieldAhead, fire)
}

// openLoop is OpenLoop sleeping through gaps longer than sleepAbove, until
// wakeEarly before the due time, and yielding through the rest.
func openLoop(ctx context.Context, start time.Time, n int, rate float64, sleepAbove, wakeEarly time.Duration, fire func(i int, due time.Duration)) error {
	interval := 1e9 / rate
	for i := range n {
		if i&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		due := time.Duration(float64(i) * interval)
		for {
			gap := due - time.Since(start)
			if gap <= 0 {
				break
			}
			if gap > sleepAbove {
				time.Sleep(gap - wakeEarly)
				continue
			}
			runtime.Gosched()
		}
		fire(i, due)
	}
	return nil
}
