package kernel_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
)

// TestGroupBreakerTripsAndRecovers runs the real breaker through the public API: a
// key that fails trips it after MinCalls, its next task waits (no attempt reaches
// the upstream) until OpenFor, one probe runs, and its success closes the breaker;
// another key of the group is never held back.
func TestGroupBreakerTripsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []kernel.BreakerState
		k := newTestKernel(t, kernel.Config{
			Groups: map[string]kernel.GroupConfig{"up": {
				PerKey:  kernel.Limits{Concurrency: 1},
				Breaker: &kernel.BreakerConfig{MinCalls: 2, FailureRatio: 0.5, OpenFor: time.Second},
			}},
			OnEvent: func(e kernel.Event) {
				if e.Breaker != 0 {
					mu.Lock()
					events = append(events, e.Breaker)
					mu.Unlock()
				}
			},
		})
		failing := true
		var calls []time.Time
		run := func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if failing {
				return errors.New("upstream 500")
			}
			return nil
		}
		once := &kernel.RetryPolicy{MaxAttempts: 1}
		t0 := time.Now()
		for range 2 {
			h, err := k.Submit(context.Background(), kernel.Task{Group: "up", Key: "bad", Run: run, Retry: once})
			if err != nil {
				t.Fatal(err)
			}
			_ = h.Wait(context.Background())
		}
		// Open: the next task of the key waits; another key runs at once.
		h3, err := k.Submit(context.Background(), kernel.Task{Group: "up", Key: "bad", Run: run, Retry: once})
		if err != nil {
			t.Fatal(err)
		}
		other, err := k.Submit(context.Background(), kernel.Task{Group: "up", Key: "good", Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Wait(context.Background()); err != nil {
			t.Fatalf("other key: %v", err)
		}
		if d := time.Since(t0); d >= time.Second {
			t.Fatalf("the other key waited %v behind the open breaker", d)
		}
		synctest.Wait()
		mu.Lock()
		if len(calls) != 2 || h3.State() != kernel.Queued {
			t.Fatalf("while open: %d calls, third task %v; want 2 calls and it queued", len(calls), h3.State())
		}
		failing = false
		mu.Unlock()
		if err := h3.Wait(context.Background()); err != nil {
			t.Fatalf("probe: %v", err)
		}
		synctest.Wait() // the events reach OnEvent
		mu.Lock()
		defer mu.Unlock()
		if got := calls[2].Sub(t0); got < time.Second {
			t.Errorf("the probe ran %v after the start, before OpenFor (1s)", got)
		}
		want := []kernel.BreakerState{kernel.BreakerOpen, kernel.BreakerHalfOpen, kernel.BreakerClosed}
		if !slices.Equal(events, want) {
			t.Errorf("breaker events %v, want %v", events, want)
		}
	})
}
