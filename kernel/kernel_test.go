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
	"unsafe"
)

func TestSubmitRunsAndReportsSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 2})
		var ran atomic.Int32
		h := mustSubmit(t, k, Task{ID: "one", Run: func(context.Context) error { ran.Add(1); return nil }})
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("Wait() = %v, want nil", err)
		}
		if h.State() != Succeeded || h.Attempts() != 1 || ran.Load() != 1 || h.ID() != "one" {
			t.Fatalf("state=%v attempts=%d ran=%d id=%q, want succeeded/1/1/one", h.State(), h.Attempts(), ran.Load(), h.ID())
		}
		h2 := mustSubmit(t, k, Task{Run: noop})
		<-h2.Done()
		if h2.ID() == "" || h2.ID() == h.ID() {
			t.Fatalf("generated ID() = %q", h2.ID())
		}
	})
}

func TestFailureRetriesThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 2})
		boom := errors.New("boom")
		var calls atomic.Int32
		start := time.Now()
		h := mustSubmit(t, k, Task{
			Retry: &RetryPolicy{MaxAttempts: 3, Base: 100 * time.Millisecond, Jitter: JitterNone},
			Run:   func(context.Context) error { calls.Add(1); return boom },
		})
		err := h.Wait(context.Background())
		if !errors.Is(err, boom) || h.State() != Failed || calls.Load() != 3 || h.Attempts() != 3 {
			t.Fatalf("Wait() = %v state=%v calls=%d attempts=%d; want boom/failed/3/3", err, h.State(), calls.Load(), h.Attempts())
		}
		// Backoff 100 ms then 200 ms, each at most a tick late.
		if el := time.Since(start); el < 300*time.Millisecond || el > 303*time.Millisecond {
			t.Fatalf("retries took %v, want 300 ms (+ ticks)", el)
		}
		st := k.Stats()
		if st.ByPriority.Normal.Retried != 2 || st.ByPriority.Normal.Failed != 1 {
			t.Fatalf("Stats retried=%d failed=%d, want 2/1", st.ByPriority.Normal.Retried, st.ByPriority.Normal.Failed)
		}
	})
}

func TestPermanentStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{})
		var calls atomic.Int32
		h := mustSubmit(t, k, Task{Run: func(context.Context) error { calls.Add(1); return Permanent(errors.New("bad request")) }})
		err := h.Wait(context.Background())
		if !IsPermanent(err) || calls.Load() != 1 || h.State() != Failed {
			t.Fatalf("Wait() = %v calls=%d state=%v, want a permanent error after 1 call", err, calls.Load(), h.State())
		}
	})
}

func TestPanicAndGoexitRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1})
		h1 := mustSubmit(t, k, Task{Run: func(context.Context) error { panic("kaboom") }})
		h2 := mustSubmit(t, k, Task{Run: func(context.Context) error { runtime.Goexit(); return nil }})
		h3 := mustSubmit(t, k, Task{Run: noop})
		var pe *PanicError
		if err := h1.Wait(context.Background()); !errors.As(err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
			t.Fatalf("panic task Wait() = %v, want *PanicError{kaboom} with a stack", err)
		}
		if err := h2.Wait(context.Background()); !errors.As(err, &pe) || !pe.Goexit {
			t.Fatalf("Goexit task Wait() = %v, want *PanicError{Goexit}", err)
		}
		if err := h3.Wait(context.Background()); err != nil {
			t.Fatalf("after panics Wait() = %v", err)
		}
		if h1.State() != Failed || h2.State() != Failed || h1.Attempts() != 1 {
			t.Fatalf("states %v %v attempts %d, want failed, failed, 1 (panics are not retried)", h1.State(), h2.State(), h1.Attempts())
		}
	})
}

func TestCapacitySurvivesFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 8, Capacity: ByPriority[int]{Normal: 20_000}})
		var hs []*Handle
		for i := range 10_000 {
			hs = append(hs, mustSubmit(t, k, Task{Run: func(context.Context) error { panic(i) }}))
		}
		for range 1_000 {
			hs = append(hs, mustSubmit(t, k, Task{Run: func(context.Context) error { runtime.Goexit(); return nil }}))
		}
		if got := waitAll(t, hs); got[Failed] != 11_000 {
			t.Fatalf("faulty tasks ended %v, want 11000 failed", got)
		}
		var ok []*Handle
		for range 1_000 {
			ok = append(ok, mustSubmit(t, k, Task{Run: noop}))
		}
		if got := waitAll(t, ok); got[Succeeded] != 1_000 {
			t.Fatalf("normal tasks ended %v, want 1000 succeeded", got)
		}
		synctest.Wait()
		st := k.Stats()
		if st.Running != 0 || st.Executors > 8 || st.ByPriority.Normal.Panics != 11_000 {
			t.Fatalf("Stats running=%d executors=%d panics=%d, want 0, <= 8, 11000", st.Running, st.Executors, st.ByPriority.Normal.Panics)
		}
	})
}

func TestTimeoutEndsStubbornTaskAndBoundsZombies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conc, maxZ = 4, 3
		var onTimeout atomic.Int32
		k := newTestKernel(t, Config{MaxConcurrency: conc, MaxZombies: maxZ, ZombieGrace: time.Hour})
		base := runtime.NumGoroutine()
		var hs []*Handle
		for range 10 {
			hs = append(hs, mustSubmit(t, k, Task{
				Timeout:   50 * time.Millisecond,
				Retry:     &RetryPolicy{MaxAttempts: 1},
				OnTimeout: func(int) { onTimeout.Add(1) },
				Run:       stubborn(10 * time.Second),
			}))
		}
		start := time.Now()
		maxZombies, maxG := 0, 0
		for _, h := range hs {
			for {
				select {
				case <-h.Done():
				case <-time.After(time.Millisecond):
					st := k.Stats()
					maxZombies = max(maxZombies, st.Zombies)
					maxG = max(maxG, runtime.NumGoroutine()-base)
					continue
				}
				break
			}
			if !errors.Is(h.Err(), ErrTimeout) || h.State() != TimedOut {
				t.Fatalf("Err() = %v state=%v, want ErrTimeout/timed_out", h.Err(), h.State())
			}
		}
		// 4 slots: the first 4 time out at 50 ms and 3 of them become zombies,
		// freeing 3 slots; the 4th keeps its slot (cap reached) for 10 s.
		if maxZombies > maxZ {
			t.Fatalf("zombies peaked at %d, want <= %d", maxZombies, maxZ)
		}
		if maxG > conc+maxZ+8 {
			t.Fatalf("goroutines grew by %d, want <= MaxConcurrency+MaxZombies+8 = %d", maxG, conc+maxZ+8)
		}
		_ = start
		synctest.Wait()
		if onTimeout.Load() != 10 {
			t.Fatalf("OnTimeout ran %d times, want 10", onTimeout.Load())
		}
	})
}

func TestTimeoutWithinTwoTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 16, MaxZombies: 100})
		for _, to := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, 3 * time.Second} {
			type start struct {
				at, deadline time.Time
				ok           bool
			}
			started := make(chan start, 1)
			h := mustSubmit(t, k, Task{Timeout: to, Retry: &RetryPolicy{MaxAttempts: 1}, Run: func(ctx context.Context) error {
				dl, ok := ctx.Deadline()
				started <- start{time.Now(), dl, ok}
				t := time.NewTimer(to + 50*time.Millisecond) // ignores ctx, returns later
				<-t.C
				return nil
			}})
			<-h.Done()
			s := <-started
			late := time.Since(s.at) - to
			if h.State() != TimedOut || late < 0 || late > 2*tickDefault {
				t.Fatalf("timeout %v: state %v after %v late, want timed_out within 2 ticks", to, h.State(), late)
			}
			if !s.ok || !s.deadline.Equal(s.at.Add(to)) {
				t.Fatalf("ctx.Deadline() = %v, %v; want start+%v", s.deadline, s.ok, to)
			}
		}
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1})
		g := make(gate)
		running := mustSubmit(t, k, Task{Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }})
		queued := mustSubmit(t, k, Task{Run: g.run})
		delayed := mustSubmit(t, k, Task{Delay: time.Hour, Run: g.run})
		synctest.Wait()
		if running.State() != Running || queued.State() != Queued || delayed.State() != Delayed {
			t.Fatalf("states %v %v %v, want running queued delayed", running.State(), queued.State(), delayed.State())
		}
		queued.Cancel()
		delayed.Cancel()
		running.Cancel()
		for _, h := range []*Handle{running, queued, delayed} {
			if err := h.Wait(context.Background()); !errors.Is(err, ErrCanceled) || h.State() != Canceled {
				t.Fatalf("Wait() = %v state=%v, want ErrCanceled/canceled", err, h.State())
			}
		}
		running.Cancel() // no-op on a terminal task
		st := k.Stats()
		if st.ByPriority.Normal.Canceled != 3 || st.Delayed != 0 || st.Queued.Normal != 0 {
			t.Fatalf("Stats canceled=%d delayed=%d queued=%d, want 3/0/0", st.ByPriority.Normal.Canceled, st.Delayed, st.Queued.Normal)
		}
	})
}

func TestDelayAndAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{})
		start := time.Now()
		var ranAt [2]time.Time
		h1 := mustSubmit(t, k, Task{Delay: 250 * time.Millisecond, Run: func(context.Context) error { ranAt[0] = time.Now(); return nil }})
		h2 := mustSubmit(t, k, Task{At: start.Add(90 * time.Second), Run: func(context.Context) error { ranAt[1] = time.Now(); return nil }})
		h3 := mustSubmit(t, k, Task{At: start.Add(-time.Hour), Run: noop})
		for _, h := range []*Handle{h1, h2, h3} {
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []time.Duration{250 * time.Millisecond, 90 * time.Second} {
			got := ranAt[i].Sub(start)
			if got < want || got > want+tickDefault {
				t.Errorf("task %d ran after %v, want %v (at most a tick late)", i, got, want)
			}
		}
	})
}

func TestAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, Capacity: ByPriority[int]{High: 2, Normal: 4, Low: 4}, DegradeAt: 0.5})
		g := make(gate)
		defer func() { g.open() }()
		mustSubmit(t, k, Task{Run: g.run}) // occupies the slot
		synctest.Wait()
		for range 4 {
			mustSubmit(t, k, Task{Priority: Normal, Run: g.run})
		}
		// total capacity 10, degrade at 5: Normal is full at 4 waiting.
		if _, err := k.TrySubmit(Task{Priority: Normal, Run: noop}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("TrySubmit(Normal, full) = %v, want ErrQueueFull", err)
		}
		mustSubmit(t, k, Task{Priority: Low, Run: g.run}) // 5 waiting: at the degrade line
		if _, err := k.TrySubmit(Task{Priority: Low, Run: noop}); !errors.Is(err, ErrDegraded) {
			t.Fatalf("TrySubmit(Low, degraded) = %v, want ErrDegraded", err)
		}
		mustSubmit(t, k, Task{Priority: High, Run: g.run})
		mustSubmit(t, k, Task{Priority: High, Run: g.run})
		if _, err := k.TrySubmit(Task{Priority: High, Run: noop}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("TrySubmit(High, full) = %v, want ErrQueueFull", err)
		}
		if err := k.TryGo(Task{Priority: High, Run: noop}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("TryGo(High, full) = %v, want ErrQueueFull", err)
		}
		// Submit waits: with a short context it gives up with the context's error...
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		if _, err := k.Submit(ctx, Task{Priority: High, Run: noop}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Submit(full, short ctx) = %v, want DeadlineExceeded", err)
		}
		cancel()
		// ...and succeeds once room frees up.
		done := make(chan *Handle)
		go func() {
			h, err := k.Submit(context.Background(), Task{Priority: High, Run: noop})
			if err != nil {
				t.Errorf("Submit() = %v", err)
			}
			done <- h
		}()
		synctest.Wait()
		g.open()
		g = make(gate)
		h := <-done
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("waited submit Wait() = %v", err)
		}
		st := k.Stats()
		if st.ByPriority.High.Rejected != 3 || st.ByPriority.Normal.Rejected != 1 || st.ByPriority.Low.Rejected != 1 {
			t.Fatalf("rejected h/n/l = %d/%d/%d, want 3/1/1", st.ByPriority.High.Rejected, st.ByPriority.Normal.Rejected, st.ByPriority.Low.Rejected)
		}
	})
}

func TestEvictLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, EvictLow: true, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 3}, DegradeAt: 1})
		g := make(gate)
		mustSubmit(t, k, Task{Run: g.run})
		synctest.Wait()
		var lows []*Handle
		for range 3 {
			lows = append(lows, mustSubmit(t, k, Task{Priority: Low, Run: noop}))
		}
		h1 := mustSubmit(t, k, Task{Priority: High, Run: noop})
		synctest.Wait()
		h2, err := k.TrySubmit(Task{Priority: High, Run: noop}) // High full: evicts the newest Low
		if err != nil {
			t.Fatalf("TrySubmit(High) with EvictLow = %v, want accepted", err)
		}
		if err := lows[2].Wait(context.Background()); !errors.Is(err, ErrEvicted) || lows[2].State() != Evicted {
			t.Fatalf("newest Low Wait() = %v state=%v, want ErrEvicted", err, lows[2].State())
		}
		g.open()
		for _, h := range []*Handle{h1, h2, lows[0], lows[1]} {
			if err := h.Wait(context.Background()); err != nil {
				t.Fatalf("Wait() = %v", err)
			}
		}
	})
}

func TestReserveLetsHighStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 4, Reserve: Reserve{High: 1}})
		g := make(gate)
		defer g.open()
		for range 20 {
			mustSubmit(t, k, Task{Priority: Low, Run: g.run})
		}
		synctest.Wait()
		if st := k.Stats(); st.Running != 3 {
			t.Fatalf("Running = %d with 4 slots and 1 reserved, want 3", st.Running)
		}
		started := make(chan struct{})
		mustSubmit(t, k, Task{Priority: High, Run: func(context.Context) error { close(started); return nil }})
		synctest.Wait()
		select {
		case <-started:
		default:
			t.Fatal("High task did not start while Low filled every other slot")
		}
	})
}

// TestFairnessShares checks the picking shares over 100,000 dispatches with every
// bucket saturated, through the whole kernel.
func TestFairnessShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := Quotas{High: 5, Normal: 3, LowGuaranteed: 1}
		n := 100_000
		if raceEnabled {
			n = 30_000
		}
		k := newTestKernel(t, Config{
			MaxConcurrency: 1, Quotas: q, DegradeAt: 1,
			Capacity: ByPriority[int]{High: n, Normal: n, Low: n},
		})
		g := make(gate)
		mustSubmit(t, k, Task{Priority: High, Run: g.run})
		synctest.Wait()
		var mu sync.Mutex
		var order []Priority
		rec := func(p Priority) func(context.Context) error {
			return func(context.Context) error { mu.Lock(); order = append(order, p); mu.Unlock(); return nil }
		}
		for _, p := range []Priority{High, Normal, Low} {
			for range n * 6 / 10 {
				if err := k.TryGo(Task{Priority: p, Run: rec(p)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		synctest.Wait()
		g.open()
		for {
			synctest.Wait()
			if st := k.Stats(); st.Queued.High+st.Queued.Normal+st.Queued.Low == 0 && st.Running == 0 {
				break
			}
		}
		counts := map[Priority]int{}
		for _, p := range order[:n] {
			counts[p]++
		}
		total := float64(q.High + q.Normal + q.LowGuaranteed)
		for p, want := range map[Priority]float64{High: 5 / total, Normal: 3 / total, Low: 1 / total} {
			got := float64(counts[p]) / float64(n)
			if got < want-0.01 || got > want+0.01 {
				t.Errorf("share of %v = %.4f, want %.4f ± 0.01", p, got, want)
			}
		}
	})
}

func TestAgingPromotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, AgeAfter: time.Second, Quotas: Quotas{High: 1, Normal: 100, LowGuaranteed: 1}})
		g := make(gate)
		mustSubmit(t, k, Task{Run: g.run})
		var mu sync.Mutex
		var order []string
		rec := func(s string) func(context.Context) error {
			return func(context.Context) error { mu.Lock(); order = append(order, s); mu.Unlock(); return nil }
		}
		mustSubmit(t, k, Task{Priority: Low, Run: rec("low")})
		t2 := time.NewTimer(2 * time.Second)
		<-t2.C // the Low task ages
		for range 50 {
			mustSubmit(t, k, Task{Priority: Normal, Run: rec("normal")})
		}
		synctest.Wait()
		g.open()
		for {
			synctest.Wait()
			mu.Lock()
			n := len(order)
			mu.Unlock()
			if n == 51 {
				break
			}
		}
		// Without aging, Low would come after the cycle's Normal picks (or at best
		// second); aged, it takes Normal's first pick.
		if order[0] != "low" {
			t.Fatalf("first picks %v, want the aged low task first", order[:3])
		}
	})
}

func TestShutdownAccountsForEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := New(Config{MaxConcurrency: 100})
		if err != nil {
			t.Fatal(err)
		}
		g := make(gate)
		var hs []*Handle
		for range 100 {
			hs = append(hs, mustSubmit(t, k, Task{Run: g.run}))
		}
		for range 1_000 {
			hs = append(hs, mustSubmit(t, k, Task{Run: noop}))
		}
		for i := range 500 {
			hs = append(hs, mustSubmit(t, k, Task{Delay: time.Duration(i+1) * time.Minute, Run: noop}))
		}
		synctest.Wait()
		// The tasks picked for the run queue still wait: Queued counts them.
		if st := k.Stats(); st.Running != 100 || st.Queued.Normal != 1_000 || st.Dispatched > 1_000 || st.Delayed != 500 {
			t.Fatalf("before shutdown running=%d queued=%d (dispatched %d) delayed=%d, want 100/1000 (≤ 1000)/500", st.Running, st.Queued.Normal, st.Dispatched, st.Delayed)
		}
		done := make(chan error)
		go func() { done <- k.Shutdown(context.Background()) }()
		synctest.Wait()
		if _, err := k.TrySubmit(Task{Run: noop}); !errors.Is(err, ErrClosed) {
			t.Fatalf("TrySubmit during shutdown = %v, want ErrClosed", err)
		}
		g.open()
		if err := <-done; err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
		got := waitAll(t, hs)
		if got[Succeeded] != 1_100 || got[Abandoned] != 500 || len(hs) != 1_600 {
			t.Fatalf("terminal states %v, want 1100 succeeded and 500 abandoned", got)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatalf("second Shutdown() = %v", err)
		}
		if err := k.Close(); err != nil {
			t.Fatalf("Close after Shutdown = %v", err)
		}
	})
}

func TestShutdownDeadlineThenClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := New(Config{MaxConcurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		var hs []*Handle
		for range 5 {
			hs = append(hs, mustSubmit(t, k, Task{Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = k.Shutdown(ctx)
		var se *ShutdownError
		if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || se.Running != 2 || se.Queued != 3 {
			t.Fatalf("Shutdown() = %v, want a ShutdownError with 2 running and 3 queued", err)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		got := waitAll(t, hs)
		if got[Canceled] != 5 {
			t.Fatalf("after Close states %v, want 5 canceled", got)
		}
		for _, h := range hs {
			if !errors.Is(h.Err(), ErrClosed) {
				t.Fatalf("Err() = %v, want ErrClosed", h.Err())
			}
		}
	})
}

func TestLifecycleCycles(t *testing.T) {
	for cycle := range 50 {
		synctest.Test(t, func(t *testing.T) {
			k, err := New(Config{MaxConcurrency: 8})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var accepted []*Handle
			var refused int
			for s := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						h, err := k.TrySubmit(Task{Priority: Priority(1 + (s+i)%3), Run: noop})
						mu.Lock()
						switch {
						case err == nil:
							accepted = append(accepted, h)
						case errors.Is(err, ErrClosed):
							refused++
						default:
							t.Errorf("cycle %d: TrySubmit() = %v, want nil or ErrClosed", cycle, err)
						}
						mu.Unlock()
					}
				}()
			}
			if err := k.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown() = %v", err)
			}
			wg.Wait()
			for _, h := range accepted {
				if !h.State().Terminal() {
					t.Fatalf("cycle %d: accepted task in state %v after Shutdown", cycle, h.State())
				}
			}
			if len(accepted)+refused != 800 {
				t.Fatalf("cycle %d: %d accepted + %d refused, want 800", cycle, len(accepted), refused)
			}
		})
	}
}

func TestLiveUpdateUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 4})
		var hs []*Handle
		var peak atomic.Int32
		var cur atomic.Int32
		run := func(context.Context) error {
			n := cur.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			tm := time.NewTimer(time.Millisecond)
			<-tm.C
			cur.Add(-1)
			return nil
		}
		for i := range 3_000 {
			hs = append(hs, mustSubmit(t, k, Task{Priority: Priority(1 + i%3), Run: run}))
			switch i {
			case 1_000:
				if err := k.Update(func(c *Config) { c.MaxConcurrency = 16; c.Quotas = Quotas{High: 1, Normal: 1, LowGuaranteed: 5} }); err != nil {
					t.Fatal(err)
				}
			case 2_000:
				if err := k.Update(func(c *Config) { c.MaxConcurrency = 2 }); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				peak.Store(0)
			}
		}
		got := waitAll(t, hs)
		if got[Succeeded] != 3_000 {
			t.Fatalf("states %v, want 3000 succeeded", got)
		}
		if p := peak.Load(); p > 16 {
			t.Fatalf("peak concurrency %d, want <= 16", p)
		}
	})
}

func TestEventsEveryStateChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var evs []Event
		k, err := New(Config{OnEvent: func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		h := mustSubmit(t, k, Task{ID: "e", Retry: &RetryPolicy{MaxAttempts: 2, Base: time.Millisecond}, Run: func(ctx context.Context) error {
			return fmt.Errorf("fail")
		}})
		<-h.Done()
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.From.String()+">"+e.To.String())
		}
		want := fmt.Sprint([]string{"state(0)>queued", "queued>running", "running>retrying", "retrying>queued", "queued>running", "running>failed"})
		if fmt.Sprint(got) != want {
			t.Fatalf("events %v, want %v", got, want)
		}
	})
}

func TestBatchAndMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 8})
		items := make([]int, 1_000)
		for i := range items {
			items[i] = i
		}
		out, err := Map(context.Background(), k, items, func(_ context.Context, v int) (int, error) { return v * v, nil }, nil)
		if err != nil {
			t.Fatalf("Map() = %v", err)
		}
		for i, v := range out {
			if v != i*i {
				t.Fatalf("Map()[%d] = %d, want %d", i, v, i*i)
			}
		}
		// The first error cancels the rest.
		boom := errors.New("boom")
		var canceled atomic.Int32
		_, err = Map(context.Background(), k, items, func(ctx context.Context, v int) (int, error) {
			if v == 3 {
				return 0, Permanent(boom)
			}
			select {
			case <-ctx.Done():
				canceled.Add(1)
				return 0, ctx.Err()
			case <-time.After(time.Second):
				return v, nil
			}
		}, nil)
		if !errors.Is(err, boom) {
			t.Fatalf("Map() = %v, want boom", err)
		}
		// errgroup shape
		b := k.NewBatch(context.Background(), &BatchOptions{Priority: High})
		var n atomic.Int32
		for range 600 {
			b.Go(func(context.Context) error { n.Add(1); return nil })
		}
		if err := b.Wait(); err != nil || n.Load() != 600 {
			t.Fatalf("Batch.Wait() = %v with %d runs, want nil and 600", err, n.Load())
		}
		// The batch's context cancels its members.
		ctx, cancel := context.WithCancel(context.Background())
		b = k.NewBatch(ctx, nil)
		for range 20 {
			b.Go(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		}
		_ = b.Flush()
		synctest.Wait()
		cancel()
		if err := b.Wait(); !errors.Is(err, ErrCanceled) && !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Batch.Wait() = %v, want a cancellation", err)
		}
	})
}

// New returns once the loop has parked: the first tasks of a new kernel take the
// fast lane instead of queuing behind the loop's first pass.
func TestNewReturnsWithTheFastLaneOpen(t *testing.T) {
	for i := range 50 {
		k, err := New(Config{})
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		open := k.fastOpen.Load()
		_ = k.Close()
		if !open {
			t.Fatalf("kernel %d: the fast lane is closed when New returns", i)
		}
	}
}

// An idle kernel starts a task on the fast lane (without a loop pass); the lane
// keeps the concurrency limit, the submission order, the accounting and retries.
func TestFastLaneKeepsLimitsOrderAndAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, Retry: ByPriority[RetryPolicy]{Normal: RetryPolicy{MaxAttempts: 2, Base: time.Millisecond}}})
		if !k.fastOpen.Load() {
			t.Fatal("an idle kernel did not open the fast lane")
		}
		g := make(gate)
		first := mustSubmit(t, k, Task{Run: g.run})
		var order []int
		var mu sync.Mutex
		var hs []*Handle
		for i := range 3 {
			hs = append(hs, mustSubmit(t, k, Task{Run: func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			}}))
		}
		synctest.Wait()
		if st := k.Stats(); st.Running != 1 || st.Queued.Normal != 3 {
			t.Fatalf("running %d queued %d, want 1 and 3 (the limit holds)", st.Running, st.Queued.Normal)
		}
		g.open()
		waitAll(t, append(hs, first))
		if fmt.Sprint(order) != "[0 1 2]" {
			t.Fatalf("order %v, want submission order", order)
		}
		// A failing fast-lane task is retried by the loop.
		synctest.Wait()
		var calls atomic.Int32
		h := mustSubmit(t, k, Task{Run: func(context.Context) error {
			if calls.Add(1) == 1 {
				return errors.New("once")
			}
			return nil
		}})
		if err := h.Wait(context.Background()); err != nil || calls.Load() != 2 {
			t.Fatalf("Wait() = %v after %d calls, want a retry", err, calls.Load())
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := k.Stats().ByPriority.Normal
		if st.Submitted != 5 || st.Started != 6 || st.Succeeded != 5 || st.Retried != 1 {
			t.Fatalf("stats %+v, want 5 submitted, 6 started, 5 succeeded, 1 retried", st)
		}
	})
}

// TestBucketsGrowOnDemand queues more tasks than a bucket starts with room for,
// then lowers the capacity below what is queued: nothing is lost.
func TestBucketsGrowOnDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, Capacity: ByPriority[int]{Normal: 100_000}, DegradeAt: 1})
		g := make(gate)
		hs := []*Handle{mustSubmit(t, k, Task{Run: g.run})}
		n := 5 * ringStart
		for range n {
			hs = append(hs, mustSubmit(t, k, Task{Run: noop}))
		}
		synctest.Wait()
		if st := k.Stats(); st.Queued.Normal+st.Dispatched != n {
			t.Fatalf("queued %d+%d, want %d", st.Queued.Normal, st.Dispatched, n)
		}
		if err := k.Update(func(c *Config) { c.Capacity.Normal = 10 }); err != nil {
			t.Fatalf("Update() = %v", err)
		}
		g.open()
		if got := waitAll(t, hs); got[Succeeded] != n+1 {
			t.Fatalf("terminal states %v, want %d succeeded", got, n+1)
		}
	})
}

// TestHandleFillsWholeCacheLines pins the task record's layout on 64-bit
// platforms: the fields the loop touches share the first cache line, and the
// record is a whole number of lines, so neighbouring records share none.
func TestHandleFillsWholeCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		return // the layout is tuned for 64-bit platforms
	}
	var h Handle
	if size := unsafe.Sizeof(h); size%64 != 0 {
		t.Errorf("Handle is %d bytes, want a multiple of 64", size)
	}
	if end := unsafe.Offsetof(h.dueAt) + unsafe.Sizeof(h.dueAt); end > 64 {
		t.Errorf("the loop's fields end at byte %d, want them in the first 64", end)
	}
}
