// Package benchtest checks that a [bench.Factory] builds a correct executor:
// it runs every task it accepts exactly once, refuses only with
// [bench.ErrRejected] and only in non-blocking mode, ends every task given to
// Submit exactly once with the right error, and honours delays, retries and
// timeouts. The bench package and cmd/axbench run it on every executor.
package benchtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/bench"
	"github.com/axsched/ax/internal/axtest"
)

// Params are the small sizes Exercise builds executors with: few workers and
// a short queue, so that non-blocking executors do refuse.
var Params = bench.Params{Conc: 4, Queue: 16}

// Exercise runs the conformance checks on f as subtests of t.
func Exercise(t *testing.T, f bench.Factory) {
	t.Helper()
	t.Run("Go", func(t *testing.T) { exerciseGo(t, f) })
	t.Run("Submit", func(t *testing.T) { exerciseSubmit(t, f) })
	if f.Delays {
		t.Run("After", func(t *testing.T) { exerciseAfter(t, f) })
	}
}

func newExecutor(t *testing.T, f bench.Factory) bench.Executor {
	t.Helper()
	ex, err := f.New(t.Context(), Params)
	if err != nil {
		t.Fatalf("%s: New() error = %v", f.Name, err)
	}
	return ex
}

// wait calls ex.Wait and ex.Close, failing t if they do not return in time.
func wait(t *testing.T, ex bench.Executor) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ex.Wait()
		ex.Close()
	}()
	axtest.WaitOrTimeout(t, done, "Wait and Close")
}

// checkRefusal fails t for a refusal that the mode does not allow or that is
// not ErrRejected.
func checkRefusal(t *testing.T, f bench.Factory, i int, err error) {
	t.Helper()
	if f.Mode != bench.NonBlocking {
		t.Fatalf("task %d: %s executor refused: %v", i, f.Mode, err)
	}
	if !errors.Is(err, bench.ErrRejected) {
		t.Fatalf("task %d: refusal error = %v, want bench.ErrRejected", i, err)
	}
}

func exerciseGo(t *testing.T, f bench.Factory) {
	const n = 5000
	ex := newExecutor(t, f)
	ran := make([]atomic.Int32, n)
	refused := make([]bool, n)
	var accepted int
	for i := range n {
		if err := ex.Go(func() { ran[i].Add(1) }); err != nil {
			checkRefusal(t, f, i, err)
			refused[i] = true
			continue
		}
		accepted++
	}
	wait(t, ex)
	if accepted == 0 {
		t.Fatalf("%s accepted none of %d tasks", f.Name, n)
	}
	for i := range n {
		want := int32(1)
		if refused[i] {
			want = 0
		}
		if got := ran[i].Load(); got != want {
			t.Errorf("task %d (refused %v) ran %d times, want %d", i, refused[i], got, want)
		}
	}
}

// kind is what a Submit task of exerciseSubmit does.
type kind int

const (
	plain   kind = iota
	delayed      // Delay 1 ms
	retried      // fails its first attempt, succeeds at the second
	timed        // waits for its ctx, which a 1 ms timeout ends
)

func kindOf(i int) kind {
	switch {
	case i%11 == 3:
		return timed
	case i%7 == 2:
		return retried
	case i%5 == 1:
		return delayed
	}
	return plain
}

var errFirst = errors.New("benchtest: first attempt fails")

func exerciseSubmit(t *testing.T, f bench.Factory) {
	const n = 600
	ex := newExecutor(t, f)
	attempts := make([]atomic.Int32, n)
	dones := make([]atomic.Int32, n)
	errs := make([]error, n)
	refused := make([]bool, n)
	var mu sync.Mutex // guards errs
	for i := range n {
		k := kindOf(i)
		task := bench.Task{
			Priority: bench.Priority(i % 3),
			Run: func(ctx context.Context) error {
				a := attempts[i].Add(1)
				switch k {
				case retried:
					if a == 1 {
						return errFirst
					}
				case timed:
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			},
			Done: func(err error) {
				mu.Lock()
				errs[i] = err
				mu.Unlock()
				dones[i].Add(1)
			},
		}
		switch k {
		case delayed:
			task.Delay = time.Millisecond
		case retried:
			task.Retry = &bench.RetryPolicy{MaxAttempts: 3, Base: 100 * time.Microsecond, Multiplier: 2, Max: time.Millisecond}
		case timed:
			task.Timeout = time.Millisecond
		}
		if err := ex.Submit(task); err != nil {
			checkRefusal(t, f, i, err)
			refused[i] = true
		}
	}
	wait(t, ex)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if refused[i] {
			if a, d := attempts[i].Load(), dones[i].Load(); a != 0 || d != 0 {
				t.Errorf("refused task %d: ran %d times and ended %d times, want 0 and 0", i, a, d)
			}
			continue
		}
		if d := dones[i].Load(); d != 1 {
			t.Errorf("task %d: Done called %d times, want 1", i, d)
			continue
		}
		if err := checkOutcome(kindOf(i), attempts[i].Load(), errs[i], f.Mode); err != nil {
			t.Errorf("task %d: %v", i, err)
		}
	}
}

// checkOutcome checks the attempts and final error of one accepted task. A
// non-blocking executor may refuse a retry (or a delayed task when it falls
// due), ending the task with ErrRejected.
func checkOutcome(k kind, attempts int32, err error, mode bench.Mode) error {
	if mode == bench.NonBlocking && errors.Is(err, bench.ErrRejected) {
		if (k == retried && attempts == 1) || (k == delayed && attempts == 0) {
			return nil
		}
	}
	switch k {
	case plain, delayed:
		if attempts != 1 || err != nil {
			return fmt.Errorf("ran %d times ending with %s, want once with nil", attempts, describe(err))
		}
	case retried:
		if attempts != 2 || err != nil {
			return fmt.Errorf("ran %d times ending with %s, want twice with nil", attempts, describe(err))
		}
	case timed:
		// A kernel may time an attempt out from its dispatch: on a busy machine
		// the deadline can pass before the function is even called.
		if attempts > 1 || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("ran %d times ending with %s, want at most once with context.DeadlineExceeded", attempts, describe(err))
		}
	}
	return nil
}

func exerciseAfter(t *testing.T, f bench.Factory) {
	const n = 200
	p := Params
	p.Queue = 2 * n // room for every pending timer, as the timers scenario gives
	ex, err := f.New(t.Context(), p)
	if err != nil {
		t.Fatalf("%s: New() error = %v", f.Name, err)
	}
	d, ok := ex.(bench.Delayer)
	if !ok {
		t.Fatalf("%s says Delays but its executor is no bench.Delayer", f.Name)
	}
	fired := make([]atomic.Int32, n)
	var left atomic.Int32
	left.Store(n)
	all := make(chan struct{})
	start := time.Now()
	for i := range n {
		delay := time.Duration(i%10) * time.Millisecond
		if err := d.After(delay, func() {
			if time.Since(start) < delay {
				t.Errorf("timer %d fired before its delay %v", i, delay)
			}
			fired[i].Add(1)
			if left.Add(-1) == 0 {
				close(all)
			}
		}); err != nil {
			t.Fatalf("After(%v) error = %v", delay, err)
		}
	}
	axtest.WaitOrTimeout(t, all, "every delayed func")
	wait(t, ex)
	for i := range n {
		if got := fired[i].Load(); got != 1 {
			t.Errorf("timer %d fired %d times, want 1", i, got)
		}
	}
}

// describe prints err, or "nil".
func describe(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
