package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/axsched/ax/kernel/internal/chunk"
	"github.com/axsched/ax/queue"
)

func TestLazyFits(t *testing.T) {
	k := newTestKernel(t, Config{})
	now := time.Now()
	tests := []struct {
		name string
		task Task
		want bool
	}{
		{"delay", Task{Delay: time.Second, Run: noop}, true},
		{"at", Task{At: now.Add(time.Hour), Run: noop}, true},
		{"at in the past", Task{At: now.Add(-time.Hour), Run: noop}, true},
		{"priority and timeout", Task{Delay: time.Second, Priority: High, Timeout: time.Minute, Run: noop}, true},
		{"no timeout", Task{Delay: time.Second, Timeout: NoTimeout, Run: noop}, true},
		{"not delayed", Task{Run: noop}, false},
		{"id", Task{ID: "x", Delay: time.Second, Run: noop}, false},
		{"on timeout", Task{Delay: time.Second, OnTimeout: func(int) {}, Run: noop}, false},
		{"own retry", Task{Delay: time.Second, Retry: &RetryPolicy{MaxAttempts: 1}, Run: noop}, false},
		{"huge timeout", Task{Delay: time.Second, Timeout: NoTimeout - 1, Run: noop}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := k.pathOf(&tt.task, normPriority(tt.task.Priority), k.rc.Load(), true) == pathLazy; got != tt.want {
				t.Fatalf("pathOf() == pathLazy = %v, want %v", got, tt.want)
			}
		})
	}
	ke := newTestKernel(t, Config{OnEvent: func(Event) {}})
	if ke.pathOf(&Task{Delay: time.Second, Run: noop}, Normal, ke.rc.Load(), true) == pathLazy {
		t.Fatal("pathOf() == pathLazy with OnEvent = true, want false: events name the task from its submission")
	}
}

// TestLazySizes guards the memory of a pending delayed task, which DESIGN.md §13
// bounds at 64 bytes: a wheel node is 24 bytes plus its value, and a chunk of the
// intake must fit its 8 KiB size class.
func TestLazySizes(t *testing.T) {
	if got := unsafe.Sizeof(timerEntry{}); got > 32 {
		t.Fatalf("unsafe.Sizeof(timerEntry{}) = %d, want <= 32", got)
	}
	if got := unsafe.Sizeof(lazyChunk{}); got > 8<<10 {
		t.Fatalf("unsafe.Sizeof(lazyChunk{}) = %d, want <= 8192", got)
	}
}

func TestLazyRunsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{})
		start := time.Now()
		ranAt := make(chan [2]int64, 4)
		run := func(i int) func(context.Context) error {
			return func(context.Context) error {
				ranAt <- [2]int64{int64(i), int64(time.Since(start))}
				return nil
			}
		}
		want := []time.Duration{250 * time.Millisecond, 90 * time.Second, 0, 3 * time.Second}
		tasks := []Task{
			{Delay: want[0], Run: run(0)},
			{At: start.Add(want[1]), Run: run(1)},
			{At: start.Add(-time.Hour), Run: run(2)},
			{Delay: want[3], Priority: High, Run: run(3)},
		}
		for _, task := range tasks {
			if err := k.TryGo(task); err != nil {
				t.Fatalf("TryGo() = %v", err)
			}
		}
		synctest.Wait()
		st := k.Stats()
		if st.Delayed != 3 || st.ByPriority.Normal.Submitted != 3 || st.ByPriority.High.Submitted != 1 {
			t.Fatalf("Stats delayed=%d submitted=%d+%d, want 3 and 3+1", st.Delayed, st.ByPriority.Normal.Submitted, st.ByPriority.High.Submitted)
		}
		for range tasks {
			r := <-ranAt
			i, got := r[0], time.Duration(r[1])
			if got < want[i] || got > want[i]+tickDefault {
				t.Errorf("task %d ran after %v, want %v (at most a tick late)", i, got, want[i])
			}
		}
		synctest.Wait()
		st = k.Stats()
		if st.Delayed != 0 || st.ByPriority.Normal.Succeeded != 3 || st.ByPriority.High.Succeeded != 1 || st.Terminal() != 4 {
			t.Fatalf("Stats delayed=%d succeeded=%d+%d terminal=%d, want 0, 3+1, 4", st.Delayed, st.ByPriority.Normal.Succeeded, st.ByPriority.High.Succeeded, st.Terminal())
		}
	})
}

// TestLazyIntakeWakesTheLoopOnlyWhenNeeded checks that delayed tasks due after the
// parked loop's timer wait in the intake (counted in Stats all the same), and that
// one due earlier, or a full batch, wakes it.
func TestLazyIntakeWakesTheLoopOnlyWhenNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{})
		far := Task{Delay: time.Hour, Run: noop}
		mustGo := func(task Task) {
			t.Helper()
			if err := k.TryGo(task); err != nil {
				t.Fatalf("TryGo() = %v", err)
			}
		}
		mustGo(far) // no timer armed: this one wakes the loop
		synctest.Wait()
		if got := k.delayedNow(); got != 1 {
			t.Fatalf("loop's delayed count = %d, want 1", got)
		}
		for range 10 {
			mustGo(far)
		}
		synctest.Wait()
		if got := k.delayedNow(); got != 1 {
			t.Fatalf("loop's delayed count = %d, want 1: later tasks wait for its timer", got)
		}
		if st := k.Stats(); st.Delayed != 11 || st.ByPriority.Normal.Submitted != 11 {
			t.Fatalf("Stats delayed=%d submitted=%d, want 11/11", st.Delayed, st.ByPriority.Normal.Submitted)
		}
		var exp strings.Builder
		k.Metrics().WritePrometheus(&exp)
		if want := `ax_tasks_submitted_total{priority="normal"} 11` + "\n"; !strings.Contains(exp.String(), want) {
			t.Fatalf("metrics lack %q:\n%s", want, exp.String())
		}
		start := time.Now()
		ran := make(chan time.Duration, 1)
		mustGo(Task{Delay: 10 * time.Millisecond, Run: func(context.Context) error { ran <- time.Since(start); return nil }})
		if got := <-ran; got < 10*time.Millisecond || got > 10*time.Millisecond+tickDefault {
			t.Fatalf("near task ran after %v, want 10ms (at most a tick late)", got)
		}
		synctest.Wait()
		if got := k.delayedNow(); got != 11 {
			t.Fatalf("loop's delayed count = %d, want 11", got)
		}
		for range lazyBatch {
			mustGo(far)
		}
		synctest.Wait()
		if got := k.delayedNow(); got != 11+lazyBatch {
			t.Fatalf("loop's delayed count = %d, want %d: a full batch wakes it", got, 11+lazyBatch)
		}
	})
}

// TestLazyParkedChunks checks that a burst of delayed tasks, which the loop takes
// in by whole chunks of the intake (parked until their first task is due), runs
// every task on time, the early one of a chunk among late ones included.
func TestLazyParkedChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Capacity: ByPriority[int]{Normal: 10_000}, DegradeAt: 1})
		start := time.Now()
		n := 3*chunk.Len + 10
		ranAt := make(chan time.Duration, n)
		run := func(context.Context) error { ranAt <- time.Since(start); return nil }
		var want []time.Duration
		for i := range n {
			d := 2*time.Hour + time.Duration(i)*time.Millisecond
			if i == 100 {
				// Earlier than the others yet after the loop's next wake-up (the
				// wheel's cascade for the first one): it travels in a full chunk.
				d = 2*time.Hour - time.Millisecond
			}
			want = append(want, d)
			if err := k.TryGo(Task{Delay: d, Run: run}); err != nil {
				t.Fatalf("TryGo() = %v", err)
			}
		}
		synctest.Wait()
		if st := k.Stats(); st.Delayed != n {
			t.Fatalf("Stats delayed=%d, want %d", st.Delayed, n)
		}
		slices.Sort(want)
		for i := range n {
			if got := <-ranAt; got < want[i] || got > want[i]+tickDefault {
				t.Fatalf("task %d of %d ran after %v, want %v (at most a tick late)", i, n, got, want[i])
			}
		}
		synctest.Wait()
		if st := k.Stats(); st.Delayed != 0 || st.ByPriority.Normal.Succeeded != uint64(n) {
			t.Fatalf("Stats delayed=%d succeeded=%d, want 0/%d", st.Delayed, st.ByPriority.Normal.Succeeded, n)
		}
	})
}

func TestLazyAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Capacity: ByPriority[int]{High: 1, Normal: 2, Low: 1}, DegradeAt: 1})
		start := time.Now()
		for range 2 {
			if err := k.TryGo(Task{Delay: time.Second, Run: noop}); err != nil {
				t.Fatalf("TryGo() = %v", err)
			}
		}
		if err := k.TryGo(Task{Delay: time.Second, Run: noop}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("TryGo() on a full bucket = %v, want ErrQueueFull", err)
		}
		if err := k.TryGo(Task{Delay: time.Second, Priority: High, Run: noop}); err != nil {
			t.Fatalf("TryGo(High) = %v", err)
		}
		// Go waits for a ticket: the first delayed tasks give theirs back when they start.
		if err := k.Go(context.Background(), Task{Delay: time.Hour, Run: noop}); err != nil {
			t.Fatalf("Go() = %v", err)
		}
		if got := time.Since(start); got < time.Second {
			t.Fatalf("Go() returned after %v, want >= 1s (when a delayed task started)", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Go(ctx, Task{Delay: time.Hour, Run: noop}); err != nil {
			t.Fatalf("second Go() = %v", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Go(ctx, Task{Delay: time.Hour, Run: noop}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Go() on a bucket full of far tasks = %v, want DeadlineExceeded", err)
		}
		if st := k.Stats(); st.ByPriority.Normal.Rejected != 2 || st.Delayed != 2 {
			t.Fatalf("Stats rejected=%d delayed=%d, want 2/2", st.ByPriority.Normal.Rejected, st.Delayed)
		}
	})
}

func TestLazyStop(t *testing.T) {
	tests := []struct {
		name string
		stop func(*Kernel) error
		want State
	}{
		{"shutdown", func(k *Kernel) error { return k.Shutdown(context.Background()) }, Abandoned},
		{"close", func(k *Kernel) error { return k.Close() }, Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k, err := New(Config{})
				if err != nil {
					t.Fatal(err)
				}
				ran := make(chan struct{}, 1)
				if err := k.TryGo(Task{Delay: time.Millisecond, Run: func(context.Context) error { ran <- struct{}{}; return nil }}); err != nil {
					t.Fatal(err)
				}
				<-ran
				// Some are in the wheel, some in parked chunks, some still in the
				// intake (the loop sleeps).
				for i := range 2*chunk.Len + 7 {
					p := Normal
					if i%2 == 0 {
						p = Low
					}
					if err := k.TryGo(Task{Delay: time.Duration(i+1) * time.Hour, Priority: p, Run: noop}); err != nil {
						t.Fatal(err)
					}
					if i == 2 || i == 2*chunk.Len {
						synctest.Wait()
						k.poke() // take the intake in now
						synctest.Wait()
					}
				}
				synctest.Wait()
				if err := tt.stop(k); err != nil {
					t.Fatalf("stop = %v", err)
				}
				st := k.Stats()
				count := func(p PriorityStats) uint64 {
					if tt.want == Abandoned {
						return p.Abandoned
					}
					return p.Canceled
				}
				normal, low := uint64(chunk.Len+3), uint64(chunk.Len+4)
				if count(st.ByPriority.Normal) != normal || count(st.ByPriority.Low) != low || st.Delayed != 0 || st.Terminal() != normal+low+1 {
					t.Fatalf("Stats %v normal=%d low=%d delayed=%d terminal=%d, want %d/%d/0/%d", tt.want, count(st.ByPriority.Normal), count(st.ByPriority.Low), st.Delayed, st.Terminal(), normal, low, normal+low+1)
				}
				for l := range queue.NumLevels {
					if n := k.waiting[l].Load(); n != 0 {
						t.Fatalf("tickets of level %d = %d, want 0", l, n)
					}
				}
				if err := k.TryGo(Task{Delay: time.Second, Run: noop}); !errors.Is(err, ErrClosed) {
					t.Fatalf("TryGo() after stop = %v, want ErrClosed", err)
				}
				_ = k.Close()
			})
		})
	}
}

// TestLazyTimeoutAndRetry checks that a delayed fire-and-forget task keeps the
// timeout resolved at submission and takes its priority's retry policy in force
// when the retry is decided.
func TestLazyTimeoutAndRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{
			DefaultTimeout: ByPriority[time.Duration]{Normal: 100 * time.Millisecond},
			Retry:          ByPriority[RetryPolicy]{Normal: RetryPolicy{MaxAttempts: 3, Base: 10 * time.Millisecond, Jitter: JitterNone}},
			RetryBudget:    RetryBudget{Disabled: true},
		})
		attempts := make(chan string, 3)
		run := func(ctx context.Context) error {
			start := time.Now()
			dl, ok := ctx.Deadline()
			<-ctx.Done()
			attempts <- fmt.Sprint(dl.Sub(start), ok, time.Since(start) <= 100*time.Millisecond+tickDefault)
			return ctx.Err()
		}
		if err := k.TryGo(Task{Delay: time.Second, Run: run}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// Changes after submission: the timeout stays, the retry policy applies.
		if err := k.Update(func(c *Config) {
			c.DefaultTimeout.Normal = time.Hour
			c.Retry.Normal.MaxAttempts = 2
		}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if got, want := <-attempts, "100ms true true"; got != want {
				t.Fatalf("attempt (deadline, set, on time) = %v, want %v", got, want)
			}
		}
		synctest.Wait()
		st := k.Stats().ByPriority.Normal
		if st.Started != 2 || st.Retried != 1 || st.TimedOut != 1 || len(attempts) != 0 {
			t.Fatalf("Stats started=%d retried=%d timed out=%d (and %d more attempts), want 2/1/1", st.Started, st.Retried, st.TimedOut, len(attempts))
		}
	})
}

// TestLazyEventsTakeTheFullPath checks that with OnEvent a delayed TryGo task is
// reported from its submission on, under one ID.
func TestLazyEventsTakeTheFullPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var evs []Event
		k, err := New(Config{OnEvent: func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.TryGo(Task{Delay: 10 * time.Millisecond, Run: noop}); err != nil {
			t.Fatal(err)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := k.TryGo(Task{Delay: time.Second, Run: noop}); !errors.Is(err, ErrClosed) {
			t.Fatalf("TryGo() after Shutdown = %v, want ErrClosed", err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.From.String()+">"+e.To.String())
			if e.TaskID != evs[0].TaskID {
				t.Fatalf("event of %q, want every event of %q", e.TaskID, evs[0].TaskID)
			}
		}
		want := fmt.Sprint([]string{"state(0)>delayed", "delayed>abandoned"})
		if fmt.Sprint(got) != want {
			t.Fatalf("events %v, want %v", got, want)
		}
	})
}

func TestLazyTryGoDoesNotAllocate(t *testing.T) {
	k := newTestKernel(t, Config{Capacity: ByPriority[int]{Normal: 100_000}, DegradeAt: 1})
	task := Task{Delay: time.Hour, Run: noop}
	for range 2 * lazyBatch { // warm the intake and the wheel
		if err := k.TryGo(task); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(10_000, func() {
		if err := k.TryGo(task); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("TryGo() with a Delay allocates %v times, want 0", allocs)
	}
}

// TestLazyTicketReserveNeverCostsRoom checks that the tickets the intake takes
// ahead for lazy tasks (takeLazyTicket) never refuse, or make wait, a task the
// capacity has room for: a submission that finds no room takes them back first.
func TestLazyTicketReserveNeverCostsRoom(t *testing.T) {
	const capacity = 4 * lazyTicketBatch
	far := Task{Delay: time.Hour, Run: noop}
	newKernel := func(t *testing.T) *Kernel {
		t.Helper()
		k := newTestKernel(t, Config{Capacity: ByPriority[int]{Normal: capacity}, DegradeAt: 1})
		if err := k.TryGo(far); err != nil {
			t.Fatalf("TryGo() = %v", err)
		}
		if reserve := lazyReserveOf(k, queue.Normal); reserve != lazyTicketBatch-1 {
			t.Fatalf("reserve after one lazy task = %d, want %d", reserve, lazyTicketBatch-1)
		}
		return k
	}
	t.Run("refusal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newKernel(t)
			for i := 1; i < capacity; i++ {
				if _, err := k.TrySubmit(far); err != nil {
					t.Fatalf("TrySubmit() #%d = %v, want room up to the capacity %d", i+1, err, capacity)
				}
			}
			if _, err := k.TrySubmit(far); !errors.Is(err, ErrQueueFull) {
				t.Fatalf("TrySubmit() past the capacity = %v, want ErrQueueFull", err)
			}
			if err := k.TryGo(far); !errors.Is(err, ErrQueueFull) {
				t.Fatalf("TryGo() past the capacity = %v, want ErrQueueFull", err)
			}
			synctest.Wait()
			if st := k.Stats(); st.ByPriority.Normal.Submitted != capacity || st.ByPriority.Normal.Rejected != 2 {
				t.Fatalf("submitted %d rejected %d, want %d and 2", st.ByPriority.Normal.Submitted, st.ByPriority.Normal.Rejected, capacity)
			}
			if n := k.waiting[queue.Normal].Load(); n != capacity {
				t.Fatalf("tickets = %d, want %d", n, capacity)
			}
		})
	})
	t.Run("degrade", func(t *testing.T) {
		// A reserve of Normal tickets counts against DegradeAt: it is given back
		// before a Low task is refused for it.
		k := newTestKernel(t, Config{Capacity: ByPriority[int]{High: capacity, Normal: capacity, Low: 2 * capacity}, DegradeAt: 0.25})
		if err := k.TryGo(far); err != nil {
			t.Fatalf("TryGo() = %v", err)
		}
		if r := lazyReserveOf(k, queue.Normal); r != lazyTicketBatch-1 {
			t.Fatalf("reserve = %d, want %d", r, lazyTicketBatch-1)
		}
		low := Task{Priority: Low, Delay: time.Hour, Run: noop}
		for i := 1; i < capacity; i++ { // DegradeAt: 0.25 of 4 × capacity
			if _, err := k.TrySubmit(low); err != nil {
				t.Fatalf("TrySubmit(Low) #%d = %v, want room up to %d tasks in all", i+1, err, capacity)
			}
		}
		if _, err := k.TrySubmit(low); !errors.Is(err, ErrDegraded) {
			t.Fatalf("TrySubmit(Low) past DegradeAt = %v, want ErrDegraded", err)
		}
	})
	t.Run("batch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newTestKernel(t, Config{MaxConcurrency: 1, Capacity: ByPriority[int]{Normal: capacity}, DegradeAt: 1})
			g := make(gate)
			mustSubmit(t, k, Task{Run: g.run}) // holds the only slot: the members stay queued
			synctest.Wait()
			if err := k.TryGo(far); err != nil {
				t.Fatalf("TryGo() = %v", err)
			}
			b := k.NewBatch(t.Context(), &BatchOptions{NoWait: true})
			for range capacity - 1 {
				b.Go(noop)
			}
			if err := b.Flush(); err != nil {
				t.Fatalf("Flush() of the rest of the capacity = %v", err)
			}
			g.open()
			if err := b.Wait(); err != nil {
				t.Fatalf("Wait() = %v", err)
			}
		})
	})
	t.Run("blocking", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newKernel(t)
			start := time.Now()
			for i := 1; i < capacity; i++ {
				if _, err := k.Submit(t.Context(), far); err != nil {
					t.Fatalf("Submit() #%d = %v", i+1, err)
				}
			}
			if waited := time.Since(start); waited != 0 {
				t.Fatalf("Submit() up to the capacity waited %v, want no wait", waited)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if _, err := k.Submit(ctx, far); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Submit() past the capacity = %v, want DeadlineExceeded", err)
			}
		})
	})
	t.Run("waiter", func(t *testing.T) {
		// A lazy task that waited for room is queued with the ticket it got, and
		// the reserve forms again behind it.
		synctest.Test(t, func(t *testing.T) {
			k := newTestKernel(t, Config{Capacity: ByPriority[int]{Normal: capacity}, DegradeAt: 1})
			for range capacity {
				mustSubmit(t, k, Task{Delay: time.Minute, Run: noop})
			}
			start := time.Now()
			got := make(chan time.Duration, 1)
			go func() {
				if err := k.Go(t.Context(), far); err != nil {
					t.Errorf("Go() = %v", err)
				}
				got <- time.Since(start)
			}()
			synctest.Wait()
			if k.roomWaiters.Load() != 1 {
				t.Fatalf("room waiters = %d, want 1", k.roomWaiters.Load())
			}
			if waited := <-got; waited < time.Minute || waited > time.Minute+tickDefault {
				t.Fatalf("Go() waited %v, want until the first tasks ran after a minute", waited)
			}
			// The tasks that came due leave their room as they start: once they all
			// ran, the room is back, and the reserve forms again.
			synctest.Wait()
			for i := range capacity - 1 {
				if err := k.Go(t.Context(), far); err != nil {
					t.Fatalf("Go() #%d = %v", i, err)
				}
				if i == 0 {
					if r := lazyReserveOf(k, queue.Normal); r != lazyTicketBatch-1 {
						t.Fatalf("reserve = %d, want %d", r, lazyTicketBatch-1)
					}
				}
			}
			if waited := time.Since(start); waited > time.Minute+tickDefault {
				t.Fatalf("Go() up to the capacity waited until %v", waited)
			}
		})
	})
}

// lazyReserveOf returns the tickets of level l the intake holds in reserve.
func lazyReserveOf(k *Kernel, l queue.Level) int64 {
	k.in.mu.Lock()
	defer k.in.mu.Unlock()
	return k.in.lazyTickets[l]
}

// delayedNow returns the delayed tasks the loop published last, all levels.
func (k *Kernel) delayedNow() int64 {
	var n int64
	for l := range k.m.delayed {
		n += k.m.delayed[l].Load()
	}
	return n
}
