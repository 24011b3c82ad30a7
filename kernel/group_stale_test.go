package kernel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupRetryAfterKeyForgotten: a task whose retry waits longer than its key's
// KeyIdle, so that the key is forgotten meanwhile, comes back to the key's state
// in force, not to the forgotten one: PerKey.Concurrency still holds against a
// task of the key that started meanwhile.
func TestGroupRetryAfterKeyForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, KeyIdle: time.Second}}})
		var running, most atomic.Int32
		enter := func() {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
		}
		var tries atomic.Int32
		failOnce := func(context.Context) error {
			enter()
			defer running.Add(-1)
			if tries.Add(1) == 1 {
				return errors.New("first attempt fails")
			}
			<-time.After(time.Minute)
			return nil
		}
		a := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{Base: 10 * time.Second, Jitter: JitterNone}, Run: failOnce})
		advance(5 * time.Second) // the key is forgotten after 1 s idle
		b := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: func(context.Context) error {
			enter()
			defer running.Add(-1)
			<-time.After(time.Minute)
			return nil
		}})
		advance(20 * time.Second) // a's retry is due at 10 s, while b runs
		if m := most.Load(); m != 1 {
			t.Errorf("most attempts of the key at once = %d, want 1 (PerKey.Concurrency)", m)
		}
		waitAll(t, []*Handle{a, b})
	})
}
