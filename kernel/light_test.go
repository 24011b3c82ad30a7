package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// terminal sums the terminal counts of one priority's stats.
func terminal(p PriorityStats) uint64 {
	return p.Succeeded + p.Failed + p.TimedOut + p.Evicted + p.Canceled + p.Abandoned
}

// TestLightTasksKeepOrderLimitsAndRetries submits light tasks (TryGo, due now,
// no timeout) through the loop, not the fast lane: they run in submission order
// within the limit, a failure is retried under the priority's policy on a record
// made for it, and a panic and a Goexit end the task Failed.
func TestLightTasksKeepOrderLimitsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, Retry: ByPriority[RetryPolicy]{
			Normal: RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Jitter: JitterNone},
		}})
		g := make(gate)
		if err := k.TryGo(Task{Run: g.run}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var mu sync.Mutex
		var order []int
		for i := range 5 {
			if err := k.TryGo(Task{Run: func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			}}); err != nil {
				t.Fatal(err)
			}
		}
		var calls atomic.Int32
		flaky := func(context.Context) error {
			if calls.Add(1) < 3 {
				return errors.New("not yet")
			}
			return nil
		}
		for _, run := range []func(context.Context) error{
			flaky,
			func(context.Context) error { panic("light panic") },
			func(context.Context) error { runtime.Goexit(); return nil },
		} {
			if err := k.TryGo(Task{Run: run}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if st := k.Stats(); st.Running != 1 || st.Queued.Normal+st.Dispatched != 8 {
			t.Fatalf("running %d, queued %d + dispatched %d; want 1 and 8 (the limit holds)", st.Running, st.Queued.Normal, st.Dispatched)
		}
		g.open()
		advance(time.Second)
		if fmt.Sprint(order) != "[0 1 2 3 4]" {
			t.Fatalf("order %v, want submission order", order)
		}
		if calls.Load() != 3 {
			t.Fatalf("the flaky task ran %d times, want 3 (two retries)", calls.Load())
		}
		st := k.Stats().ByPriority.Normal
		if st.Submitted != 9 || st.Started != 11 || st.Succeeded != 7 || st.Failed != 2 ||
			st.Panics != 2 || st.Retried != 2 || terminal(st) != st.Submitted {
			t.Fatalf("stats %+v, want 9 submitted, 11 started, 7 succeeded, 2 failed (2 panics), 2 retried", st)
		}
		if st.Wait.Count != 11 || st.Exec.Count != 11 {
			t.Fatalf("wait/exec observed %d/%d attempts, want 11", st.Wait.Count, st.Exec.Count)
		}
	})
}

// TestLightTasksEndOnClose closes a kernel holding light tasks in a bucket, in
// the run queue and running: each ends once, Canceled, and a running one sees
// its context end.
func TestLightTasksEndOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := New(Config{MaxConcurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		var ctxEnded atomic.Int32
		var ran atomic.Int32
		block := func(ctx context.Context) error {
			ran.Add(1)
			<-ctx.Done()
			ctxEnded.Add(1)
			return ctx.Err()
		}
		for range 2 {
			if err := k.TryGo(Task{Run: block}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		for range 10 {
			if err := k.TryGo(Task{Run: block}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != 2 || ctxEnded.Load() != 2 {
			t.Fatalf("%d ran and %d saw their context end, want 2 and 2", ran.Load(), ctxEnded.Load())
		}
		st := k.Stats().ByPriority.Normal
		if st.Submitted != 12 || st.Canceled != 12 || terminal(st) != 12 {
			t.Fatalf("stats %+v, want 12 submitted, 12 canceled, nothing else", st)
		}
		if err := k.TryGo(Task{Run: noop}); !errors.Is(err, ErrClosed) {
			t.Fatalf("TryGo after Close = %v, want ErrClosed", err)
		}
	})
}

// TestLightTasksEvictAndAreEvicted: a High light task may evict the newest Low
// one (EvictLow), which ends Evicted; every task is accounted for.
func TestLightTasksEvictAndAreEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{
			MaxConcurrency: 1, EvictLow: true, DegradeAt: 1,
			Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 2},
		})
		g := make(gate)
		if err := k.TryGo(Task{Run: g.run}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var lows atomic.Int32
		for range 2 {
			if err := k.TryGo(Task{Priority: Low, Run: func(context.Context) error { lows.Add(1); return nil }}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the loop publishes the Low tasks as evictable
		for range 2 {   // the second finds High full and evicts a Low task
			if err := k.TryGo(Task{Priority: High, Run: noop}); err != nil {
				t.Fatalf("TryGo(High) = %v, want accepted", err)
			}
		}
		g.open()
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := k.Stats().ByPriority
		if st.Low.Evicted != 1 || lows.Load() != 1 || st.High.Succeeded != 2 {
			t.Fatalf("low evicted %d, low ran %d, high succeeded %d; want 1, 1, 2", st.Low.Evicted, lows.Load(), st.High.Succeeded)
		}
		for _, p := range []PriorityStats{st.High, st.Normal, st.Low} {
			if terminal(p) != p.Submitted {
				t.Fatalf("stats %+v: terminal %d != submitted %d", p, terminal(p), p.Submitted)
			}
		}
	})
}

// TestLightTaskContext: a light task's context carries no deadline and ends with
// Close.
func TestLightTaskContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1})
		got := make(chan context.Context, 1)
		if err := k.TryGo(Task{Run: func(ctx context.Context) error { got <- ctx; return nil }}); err != nil {
			t.Fatal(err)
		}
		ctx := <-got
		if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
			t.Fatalf("a light task's context has a deadline or ended: %v", ctx.Err())
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("after Close the context's Err() = %v, want Canceled", ctx.Err())
		}
	})
}
