package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAxAdapterRefusesWithoutAllocating pins the ax-nb adapter's own cost: a
// refused TryGo of a func submitted before allocates nothing, so burst's
// ns/refusal measures the kernel. (Capturing the func parameter in funcCache's
// wrapper once moved it to the heap on every call: 8 B and ~15 ns per task.)
func TestAxAdapterRefusesWithoutAllocating(t *testing.T) {
	ex, err := newAx(context.Background(), Params{Conc: 1, Queue: 1}, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	task := func() { <-gate }
	// Full: one task running, one queued, and refusals in a row. The loop may
	// still be handing tasks over when the first refusals come, and a refusal
	// takes ~40 ns, so a loaded machine can let it move a task on (making room)
	// after any number of refusals: a measurement that saw an acceptance is
	// taken again.
	var allocs float64
	for try := 0; ; try++ {
		for inRow := 0; inRow < 1000; {
			err := ex.Go(task)
			switch {
			case err == nil:
				inRow = 0
			case errors.Is(err, ErrRejected):
				inRow++
			default:
				t.Fatalf("Go() = %v, want nil or ErrRejected", err)
			}
		}
		accepted := false
		allocs = testing.AllocsPerRun(1000, func() {
			if ex.Go(task) == nil {
				accepted = true
			}
		})
		if !accepted {
			break
		}
		if try == 100 {
			t.Fatal("Go() kept accepting tasks into a full kernel")
		}
	}
	close(gate)
	ex.Wait()
	ex.Close()
	if allocs != 0 {
		t.Errorf("a refused Go allocates %v times, want 0", allocs)
	}
}

// TestAxPreparedTasksRun: a task made by the ax adapter's Prepare runs its body
// with its index once submitted with GoPrepared, as the latency scenario relies on.
func TestAxPreparedTasksRun(t *testing.T) {
	runPrepared(t, func(ex *axExecutor, task any, _ int) error { return ex.GoPrepared(task) }, nil)
}

// TestAxPreparedTimersRun checks that tasks made by Prepare and scheduled with
// AfterPrepared run once each, with their index, no earlier than their delay,
// as the timers scenario relies on.
func TestAxPreparedTimersRun(t *testing.T) {
	delay := func(i int) time.Duration { return time.Duration(i) * time.Millisecond / 10 }
	runPrepared(t, func(ex *axExecutor, task any, i int) error { return ex.AfterPrepared(delay(i), task) }, delay)
}

// runPrepared submits 50 tasks made by Prepare with submit(ex, task, index) and
// checks that each body ran once, and, with delay, not before delay(index) from
// the first submission.
func runPrepared(t *testing.T, submit func(ex *axExecutor, task any, i int) error, delay func(int) time.Duration) {
	t.Helper()
	ex, err := newAx(context.Background(), Params{Conc: 4, Queue: 100}, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var got [n]atomic.Int32
	var early atomic.Int32
	start := time.Now()
	body := func(i int) {
		if delay != nil && time.Since(start) < delay(i) {
			early.Add(1)
		}
		got[i].Add(1)
	}
	for i := range n {
		if err := submit(ex, ex.Prepare(body, i), i); err != nil {
			t.Fatalf("submitting prepared task %d: %v", i, err)
		}
	}
	ex.Wait()
	ex.Close()
	for i := range n {
		if c := got[i].Load(); c != 1 {
			t.Errorf("body(%d) ran %d times, want 1", i, c)
		}
	}
	if e := early.Load(); e > 0 {
		t.Errorf("%d tasks ran before their delay", e)
	}
}

// TestFuncPreparerRunsTasks checks the preparer the latency and timers
// scenarios give executors that take a func(): each task runs its body once,
// submitted with Go or, after a delay, with After.
func TestFuncPreparerRunsTasks(t *testing.T) {
	ex := goDelayer{Emulate(&goPool{})}
	if _, own := preparerOf(ex).(funcPreparer); !own {
		t.Fatalf("preparerOf(goDelayer) is not funcPreparer")
	}
	if _, own := preparerOf(&axExecutor{}).(*axExecutor); !own {
		t.Fatalf("preparerOf(ax) is not ax's own")
	}
	dp := delayPreparerOf(ex, ex)
	const n = 20
	var got [n]atomic.Int32
	body := func(i int) { got[i].Add(1) }
	var timers sync.WaitGroup
	timers.Add(n / 2)
	for i := range n {
		var err error
		if i%2 == 0 {
			err = dp.GoPrepared(dp.Prepare(body, i))
		} else {
			err = dp.AfterPrepared(time.Millisecond/10, dp.Prepare(func(i int) { body(i); timers.Done() }, i))
		}
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	ex.Wait()
	timers.Wait()
	ex.Close()
	for i := range n {
		if c := got[i].Load(); c != 1 {
			t.Errorf("body(%d) ran %d times, want 1", i, c)
		}
	}
}
