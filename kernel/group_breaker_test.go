package kernel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/kernel/internal/check"
)

// breakerKernel starts a kernel whose group "g" gives each key a breaker that
// opens after three failures in a row (every call failing), for a second each
// time, then admits one probe at a time; and returns a function that finds the
// breaker of a key of "g".
func breakerKernel(t *testing.T, failFast bool, cfg Config) (*Kernel, func(key string) *breaker.Breaker) {
	if cfg.Groups == nil {
		cfg.Groups = map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, Breaker: tripsAtThree(failFast)}}
	}
	k := newTestKernel(t, cfg)
	return k, func(key string) *breaker.Breaker {
		synctest.Wait() // the loop is parked: its state may be read
		return k.ls.gate.groups["g"].keys[key].br
	}
}

// tripsAtThree is the breaker of breakerKernel.
func tripsAtThree(failFast bool) *BreakerConfig {
	return &BreakerConfig{MinCalls: 3, FailureRatio: 1, OpenFor: time.Second, MaxOpenFor: time.Second, Probes: 1, FailFast: failFast}
}

func TestBreakerParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var notes []BreakerState
		k, _ := breakerKernel(t, false, Config{OnEvent: func(e Event) {
			if e.Note == NoteBreaker {
				mu.Lock()
				notes = append(notes, e.Breaker)
				mu.Unlock()
			}
		}, Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, Breaker: tripsAtThree(false)}}})
		start := time.Now()
		var calls []time.Duration
		failing := func(context.Context) error {
			mu.Lock()
			calls = append(calls, time.Since(start))
			mu.Unlock()
			return errors.New("down")
		}
		var hs []*Handle
		for range 6 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "bad", Retry: &RetryPolicy{MaxAttempts: 1}, Run: failing}))
		}
		good := mustSubmit(t, k, Task{Group: "g", Key: "good", Run: noop})
		if err := good.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		advance(500 * time.Millisecond)
		mu.Lock()
		if len(calls) != 3 {
			t.Fatalf("calls before the open time ended = %d, want 3 (the breaker opened)", len(calls))
		}
		mu.Unlock()
		for _, h := range hs[3:] {
			if s := h.State(); s != Queued {
				t.Fatalf("task behind an open breaker: State() = %v, want queued (parked)", s)
			}
		}
		if st := k.Stats().Groups["g"]; st.OpenBreakers != 1 || st.BreakerOpened != 1 {
			t.Fatalf("Stats = %+v, want 1 open breaker", st)
		}
		waitAll(t, hs)
		mu.Lock()
		defer mu.Unlock()
		// Then one probe a second, each failing: the breaker opens again.
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			if got := calls[3+i]; got < want || got > want+2*time.Millisecond {
				t.Errorf("probe %d at %v, want %v", i, got, want)
			}
		}
		// Each probe half-opens the breaker, and its failure opens it again.
		if len(notes) < 3 || notes[0] != BreakerOpen || notes[1] != BreakerHalfOpen || notes[2] != BreakerOpen {
			t.Errorf("breaker notes = %v, want open, half-open, open, ...", notes)
		}
	})
}

func TestBreakerFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := breakerKernel(t, true, Config{})
		var hs []*Handle
		for range 6 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "bad", Retry: &RetryPolicy{MaxAttempts: 1}, Run: func(context.Context) error { return errors.New("down") }}))
		}
		waitAll(t, hs)
		n := 0
		for _, h := range hs[3:] {
			if errors.Is(h.Err(), ErrCircuitOpen) && h.State() == Failed && h.Attempts() == 0 {
				n++
			}
		}
		if n != 3 {
			t.Fatalf("%d tasks failed fast with ErrCircuitOpen without an attempt, want 3", n)
		}
		synctest.Wait()
		if st := k.Stats().Groups["g"]; st.CircuitOpenFailed != 3 {
			t.Errorf("CircuitOpenFailed = %d, want 3", st.CircuitOpenFailed)
		}
	})
}

// TestBreakerOutcomes: what the breaker hears of each kind of end, and when, as
// the key's window counts it (calls, failures, slow) after each task.
func TestBreakerOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, br := breakerKernel(t, false, Config{Groups: map[string]GroupConfig{"g": {Breaker: &BreakerConfig{
			MinCalls:  check.BreakerMinCallsMax, // never trips: the window keeps every outcome
			SlowCall:  50 * time.Millisecond,
			IsFailure: func(err error) bool { return err.Error() != "not found" },
		}}}})
		type counts struct{ calls, failures, slow uint64 }
		check := func(what string, want counts) {
			t.Helper()
			var got counts
			got.calls, got.failures, got.slow = br("k").Window(time.Now())
			if got != want {
				t.Errorf("after %s: window = %+v, want %+v", what, got, want)
			}
		}
		run := func(fn func(context.Context) error, timeout time.Duration) *Handle {
			h := mustSubmit(t, k, Task{Group: "g", Key: "k", Timeout: timeout, Retry: &RetryPolicy{MaxAttempts: 1}, Run: fn})
			<-h.Done()
			synctest.Wait()
			return h
		}
		run(noop, 0)
		check("a success", counts{1, 0, 0})
		run(stubborn(100*time.Millisecond), 0)
		check("a slow success", counts{2, 0, 1})
		run(func(context.Context) error { return errors.New("not found") }, 0)
		check("an error IsFailure refuses", counts{3, 0, 1})
		run(func(context.Context) error { return errors.New("boom") }, 0)
		check("a failure", counts{4, 1, 1})
		var once sync.Once
		run(func(context.Context) error {
			var err error
			once.Do(func() { err = &RateLimitedError{} })
			return err
		}, 0)
		check("a RateLimitedError (ignored), then a success", counts{5, 1, 1})
		start := time.Now()
		run(stubborn(time.Second), 10*time.Millisecond)
		// The timed-out attempt was judged at its timeout, not when it returned.
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("timed-out attempt ended at %v, want at its timeout", d)
		}
		check("a timeout, its function running on", counts{6, 2, 1})
		hung := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: gate(make(chan struct{})).run})
		synctest.Wait()
		hung.Cancel()
		<-hung.Done()
		synctest.Wait()
		check("a cancellation (ignored)", counts{6, 2, 1})
	})
}
