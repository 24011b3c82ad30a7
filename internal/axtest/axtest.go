// Package axtest holds test helpers shared by ax's packages.
package axtest

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// WaitTimeoutDefault is how long [WaitOrTimeout] waits before it fails the test.
const WaitTimeoutDefault = 10 * time.Second

// WaitOrTimeout blocks until ch is closed or receives a value, and fails the test
// with msg when that takes longer than [WaitTimeoutDefault]. It is the way tests
// wait for a signal; they never sleep to let something happen.
func WaitOrTimeout[T any](tb testing.TB, ch <-chan T, msg string) T {
	tb.Helper()
	timer := time.NewTimer(WaitTimeoutDefault)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("timed out after %v waiting for %s", WaitTimeoutDefault, msg)
		var zero T
		return zero
	}
}

// Eventually polls cond until it returns true, failing the test with msg after
// [WaitTimeoutDefault]. Each poll yields with a short timer wait, so it suits
// conditions that no channel announces (a gauge returning to zero).
func Eventually(tb testing.TB, cond func() bool, msg string) {
	tb.Helper()
	deadline := time.Now().Add(WaitTimeoutDefault)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", WaitTimeoutDefault, msg)
		}
		t := time.NewTimer(100 * time.Microsecond)
		<-t.C
	}
}

// SkewClock is Clock shifted by Off: the clock of a kernel whose time runs Off
// ahead of (or, negative, behind) the store's. Its timers wait on Clock.
type SkewClock struct {
	clock.Clock
	Off time.Duration
}

// Now returns Clock's time plus Off.
func (c SkewClock) Now() time.Time { return c.Clock.Now().Add(c.Off) }

// Since returns the time elapsed since t on the shifted clock.
func (c SkewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the time until t on the shifted clock.
func (c SkewClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
