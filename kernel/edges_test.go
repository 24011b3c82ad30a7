//go:build linux

package kernel_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// Edge cases: each test below pins one behaviour at the edge of the kernel's
// contract — overflowing values, misuse, callbacks that panic or block, calls
// from inside a task. Tests whose failure would take the whole process down
// (a panic on another goroutine, a fatal out-of-memory error, a WaitGroup
// misuse) run their body in a child process (edgeInChild). The file is for
// Linux only: a child caps its address space (RLIMIT_AS, sized from /proc).

// edgeChildEnv names the test (t.Name()) a child process runs the body of.
const edgeChildEnv = "AX_EDGE_CHILD"

// edgeChildTimeout bounds a child process: a hang is a failure.
const edgeChildTimeout = 30 * time.Second

// edgeWait bounds every wait of these tests: a hang is a failure.
const edgeWait = 10 * time.Second

var errEdge = errors.New("edge: task failed")

func edgeNoop(context.Context) error { return nil }

// edgeInChild runs body in a child process: the test binary re-executed with
// -test.run selecting t alone and edgeChildEnv set to t.Name(). In the child
// it runs body; in the parent it fails t if the child does not exit 0 within
// edgeChildTimeout, printing the tail of the child's output.
func edgeInChild(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	if os.Getenv(edgeChildEnv) == t.Name() {
		body(t)
		return
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgeChildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	// Under -race a process sleeps a second as it exits (atexit_sleep_ms), to let
	// late reports in; every goroutine of a child ended by then (goleak).
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), edgeChildEnv+"="+t.Name(), "GORACE="+gorace)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		t.Fatalf("child %s did not exit within %v; output tail:\n%s", t.Name(), edgeChildTimeout, edgeTail(out))
	case err != nil:
		t.Fatalf("child %s: %v; output tail:\n%s", t.Name(), err, edgeTail(out))
	}
}

// edgeTail returns what matters of a child's output: 30 lines from its first
// report of trouble (a panic, a fatal error, a race, else a failed test), and
// its last 10 lines.
func edgeTail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	first := func(match func(string) bool) int {
		for i, l := range lines {
			if match(l) {
				return i
			}
		}
		return -1
	}
	i := first(func(l string) bool {
		return strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") ||
			strings.Contains(l, "DATA RACE") || strings.Contains(l, "ThreadSanitizer")
	})
	if i < 0 {
		i = first(func(l string) bool { return strings.Contains(l, "--- FAIL") })
	}
	if i < 0 {
		return strings.Join(lines[max(0, len(lines)-40):], "\n")
	}
	if end := i + 30; end < len(lines)-10 {
		return strings.Join(lines[i:end], "\n") + "\n...\n" + strings.Join(lines[len(lines)-10:], "\n")
	}
	return strings.Join(lines[i:], "\n")
}

// edgeKernel starts a kernel that is closed when the test ends. The close is
// bounded: a kernel whose Close hangs fails the test instead of hanging it.
func edgeKernel(t *testing.T, cfg kernel.Config) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	t.Cleanup(func() { edgeClose(t, k) })
	return k
}

// edgeClose closes k, failing t if Close does not return within edgeWait (a
// second once t failed already: it may be the reason).
func edgeClose(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	d := edgeWait
	if t.Failed() {
		d = time.Second
	}
	if _, ok := edgeWithin(d, k.Close); !ok {
		t.Errorf("Close() did not return within %v", d)
	}
}

// edgeWithin runs f on a goroutine of its own and returns its result, or
// ok false if f did not return within d.
func edgeWithin(d time.Duration, f func() error) (err error, ok bool) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err, true
	case <-timer.C:
		return nil, false
	}
}

// edgeHolds polls cond for d and reports whether it held all along.
func edgeHolds(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			return false
		}
		t := time.NewTimer(time.Millisecond)
		<-t.C
	}
	return cond()
}

// edgeWaitHandle waits for h to end, failing t after edgeWait.
func edgeWaitHandle(t *testing.T, h *kernel.Handle) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), edgeWait)
	defer cancel()
	err := h.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("task %s did not end within %v (state %v)", h.ID(), edgeWait, h.State())
	}
	return err
}

// edgeShutdown drains k, failing t if Shutdown does not return nil in time.
func edgeShutdown(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), edgeWait)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v, want nil", err)
	}
}

// edgeCheckBalance fails t unless every priority's submitted tasks all ended.
func edgeCheckBalance(t *testing.T, st kernel.Stats) {
	t.Helper()
	for _, p := range []struct {
		name string
		s    kernel.PriorityStats
	}{{"High", st.ByPriority.High}, {"Normal", st.ByPriority.Normal}, {"Low", st.ByPriority.Low}} {
		s := p.s
		ended := s.Succeeded + s.Failed + s.TimedOut + s.Canceled + s.Evicted + s.Abandoned
		if s.Submitted != ended {
			t.Errorf("Stats().ByPriority.%s: Submitted = %d, want %d (succeeded %d + failed %d + timed out %d + canceled %d + evicted %d + abandoned %d)",
				p.name, s.Submitted, ended, s.Succeeded, s.Failed, s.TimedOut, s.Canceled, s.Evicted, s.Abandoned)
		}
	}
}

// edgePromValue returns the value of the sample named name in k's Prometheus
// output.
func edgePromValue(t *testing.T, k *kernel.Kernel, name string) float64 {
	t.Helper()
	var buf bytes.Buffer
	k.WritePrometheus(&buf)
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("WritePrometheus(): %s = %q: %v", name, f[1], err)
			}
			return v
		}
	}
	t.Fatalf("WritePrometheus() has no %s sample:\n%s", name, buf.String())
	return 0
}

// 1. Retries that re-enter a full bucket must not break a task's states or its
// admission: the loop panicked "illegal state change retrying -> failed". The
// overflow comes with the first burst of a kernel, so each case submits for
// about a second in all, on a few fresh kernels.
func TestEdgeRetriesOverflowBucket(t *testing.T) {
	const (
		rounds = 5
		round  = 150 * time.Millisecond
	)
	capacity := kernel.ByPriority[int]{High: 20, Normal: 20, Low: 20}
	retry := kernel.ByPriority[kernel.RetryPolicy]{Normal: kernel.RetryPolicy{MaxAttempts: 3, Base: 50 * time.Millisecond, Jitter: kernel.JitterNone}}
	for _, tt := range []struct {
		name string
		cfg  kernel.Config
	}{
		{"no_zombies", kernel.Config{MaxConcurrency: 4, MaxZombies: -1, Capacity: capacity, DegradeAt: 1, Retry: retry}},
		{"no_budget", kernel.Config{
			MaxConcurrency: 64, MaxZombies: 100, Capacity: capacity, DegradeAt: 1, Retry: retry,
			RetryBudget: kernel.RetryBudget{Disabled: true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edgeInChild(t, func(t *testing.T) {
				for range rounds {
					edgeRetryBurst(t, tt.cfg, round)
				}
			})
		})
	}
}

// edgeRetryBurst submits failing tasks from four goroutines for d on a new
// kernel with cfg, then checks that each ended Failed with errEdge and that
// Stats accounts for all of them.
func edgeRetryBurst(t *testing.T, cfg kernel.Config, d time.Duration) {
	t.Helper()
	k := edgeKernel(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu     sync.Mutex
		hs     []*kernel.Handle
		wg     sync.WaitGroup
		badErr atomic.Value
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				h, err := k.Submit(ctx, kernel.Task{Run: func(context.Context) error { return errEdge }})
				if err != nil {
					if ctx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
						badErr.CompareAndSwap(nil, err)
					}
					return
				}
				mu.Lock()
				hs = append(hs, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err, _ := badErr.Load().(error); err != nil {
		t.Errorf("Submit() = %v, want a task or, once its context ended, context.DeadlineExceeded", err)
	}
	if len(hs) == 0 {
		t.Fatal("Submit() accepted no task")
	}
	for _, h := range hs {
		err := edgeWaitHandle(t, h)
		if h.State() != kernel.Failed || !errors.Is(err, errEdge) || errors.Is(err, kernel.ErrQueueFull) {
			t.Fatalf("task %s: State() = %v, Wait() = %v; want failed with %v", h.ID(), h.State(), err, errEdge)
		}
	}
	edgeShutdown(t, k)
	edgeCheckBalance(t, k.Stats())
}

// 2a. DefaultBackoff must not overflow: whatever the policy, it returns a
// delay in [0, Max].
func TestEdgeBackoffOverflow(t *testing.T) {
	backoff := func(p kernel.RetryPolicy, n int) (d time.Duration, panicked any) {
		defer func() { panicked = recover() }()
		return kernel.DefaultBackoff(p, n), nil
	}
	for _, tt := range []struct {
		name string
		base time.Duration
	}{
		{"half_max_base", math.MaxInt64 / 2},
		{"max_base", math.MaxInt64},
	} {
		for _, j := range []kernel.Jitter{kernel.JitterFull, kernel.JitterEqual, kernel.JitterNone} {
			t.Run(fmt.Sprintf("%s/jitter_%d", tt.name, j), func(t *testing.T) {
				p := kernel.RetryPolicy{Max: math.MaxInt64, Base: tt.base, Jitter: j}
				for n := 1; n <= 70; n++ {
					d, panicked := backoff(p, n)
					if panicked != nil {
						t.Fatalf("DefaultBackoff(%+v, %d) panicked: %v", p, n, panicked)
					}
					if d < 0 {
						t.Fatalf("DefaultBackoff(%+v, %d) = %d, want a delay in [0, %d]", p, n, d, int64(math.MaxInt64))
					}
					// Base × 2^(n-1) is past Max from n = 3 on (from n = 1 for a Base of Max).
					if j == kernel.JitterNone && (n >= 3 || tt.base == math.MaxInt64) && d != math.MaxInt64 {
						t.Fatalf("DefaultBackoff(%+v, %d) = %d, want Max (%d)", p, n, d, int64(math.MaxInt64))
					}
				}
			})
		}
	}
}

// 2b. A task whose backoff overflows waits for its retry; it does not crash the
// kernel's loop.
func TestEdgeBackoffOverflowTask(t *testing.T) {
	edgeInChild(t, func(t *testing.T) {
		k := edgeKernel(t, kernel.Config{})
		var runs atomic.Int32
		h, err := k.TrySubmit(kernel.Task{
			Retry: &kernel.RetryPolicy{MaxAttempts: 5, Base: 1, Multiplier: 1e19, Max: math.MaxInt64},
			Run:   func(context.Context) error { runs.Add(1); return errEdge },
		})
		if err != nil {
			t.Fatalf("TrySubmit() = %v, want nil", err)
		}
		axtest.Eventually(t, func() bool { return runs.Load() >= 1 && h.State() == kernel.Retrying }, "the task to fail and wait for its retry")
		// The first retry waits Base (1 ns), the next ones Max: the task may run
		// once more, then it must wait, and the kernel keep running.
		if !edgeHolds(300*time.Millisecond, func() bool { return runs.Load() <= 2 }) {
			t.Fatalf("runs = %d within 300 ms, want at most 2 (the backoff is Max from the second retry on)", runs.Load())
		}
		axtest.Eventually(t, func() bool { return h.State() == kernel.Retrying }, "the task to wait for its retry")
		if got := runs.Load(); got > 2 {
			t.Fatalf("runs = %d, want at most 2", got)
		}
		if _, ok := edgeWithin(edgeWait, k.Close); !ok {
			t.Fatalf("Close() did not return within %v", edgeWait)
		}
		if err := edgeWaitHandle(t, h); h.State() != kernel.Canceled {
			t.Fatalf("after Close: State() = %v (Wait() = %v), want canceled", h.State(), err)
		}
	})
}

// 3. A panicking Config.OnEvent does not kill the process, nor stop the
// delivery of later events.
func TestEdgeOnEventPanic(t *testing.T) {
	edgeInChild(t, func(t *testing.T) {
		var calls, after atomic.Int64
		k := edgeKernel(t, kernel.Config{OnEvent: func(kernel.Event) {
			if calls.Add(1) == 1 {
				panic("edge: OnEvent panics")
			}
			after.Add(1)
		}})
		for i := range 20 {
			h, err := k.TrySubmit(kernel.Task{Run: edgeNoop})
			if err != nil {
				t.Fatalf("TrySubmit() #%d = %v, want nil", i, err)
			}
			if err := edgeWaitHandle(t, h); err != nil {
				t.Fatalf("task #%d: Wait() = %v, want nil", i, err)
			}
		}
		axtest.Eventually(t, func() bool { return after.Load() > 0 }, "events delivered after OnEvent panicked")
		edgeShutdown(t, k)
	})
}

// edgeLimitAddressSpace caps the process's address space at what it uses now
// plus extra, so that an allocation of many gigabytes fails at once (a fatal
// error) instead of exhausting the machine.
func edgeLimitAddressSpace(t *testing.T, extra uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatalf("read /proc/self/statm: %v", err)
	}
	pages, err := strconv.ParseUint(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		t.Fatalf("parse /proc/self/statm: %v", err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatalf("Getrlimit() = %v", err)
	}
	lim.Cur = min(pages*uint64(os.Getpagesize())+extra, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatalf("Setrlimit() = %v", err)
	}
}

// edgeGoroutineWatchdog ends the (child) process with exit status 3 if more
// than limit goroutines run before the returned stop is called.
func edgeGoroutineWatchdog(limit int) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if n := runtime.NumGoroutine(); n > limit {
					fmt.Fprintf(os.Stderr, "--- FAIL: %d goroutines running, want at most %d\n", n, limit)
					os.Exit(3)
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

// edgeWantConfigError fails t unless err holds (possibly joined with others)
// a *ConfigError for field and its text names field.
func edgeWantConfigError(t *testing.T, what string, err error, field string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), field) || !edgeHasConfigError(err, field) {
		t.Fatalf("%s = %v, want a *ConfigError for %s", what, err, field)
	}
}

// edgeHasConfigError reports whether err's tree holds a *ConfigError for field.
func edgeHasConfigError(err error, field string) bool {
	var ce *kernel.ConfigError
	if errors.As(err, &ce) && ce.Field == field {
		return true
	}
	switch u := err.(type) { //nolint:errorlint // walks the tree errors.As stops in
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if edgeHasConfigError(e, field) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return edgeHasConfigError(e, field)
		}
	}
	return false
}

// 4. Sizes that would take gigabytes, or a billion goroutines, are refused
// with an error naming the field; a large MaxConcurrency takes little memory
// until it is used.
func TestEdgeConfigLimits(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"new_max_concurrency", func(t *testing.T) {
			k, err := kernel.New(kernel.Config{MaxConcurrency: 1e9})
			if err == nil {
				_ = k.Close()
			}
			edgeWantConfigError(t, "New(MaxConcurrency: 1e9)", err, "Config.MaxConcurrency")
		}},
		{"update_max_concurrency", func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{})
			err := k.Update(func(c *kernel.Config) { c.MaxConcurrency = 1e9 })
			edgeWantConfigError(t, "Update(MaxConcurrency = 1e9)", err, "Config.MaxConcurrency")
		}},
		{"large_max_concurrency", func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			k := edgeKernel(t, kernel.Config{MaxConcurrency: 1 << 24})
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(k)
			if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew >= 64<<20 {
				t.Fatalf("New(MaxConcurrency: 1<<24): heap grew by %d MiB, want < 64 MiB", grew>>20)
			}
		}},
		{"retry_budget_window", func(t *testing.T) {
			k, err := kernel.New(kernel.Config{RetryBudget: kernel.RetryBudget{Window: math.MaxInt64}})
			if err == nil {
				_ = k.Close()
				return
			}
			edgeWantConfigError(t, "New(RetryBudget.Window: MaxInt64)", err, "Config.RetryBudget.Window")
		}},
		{"on_timeout_workers", func(t *testing.T) {
			// Out of memory, the runtime would print each of the goroutines started:
			// end the child early instead.
			stop := edgeGoroutineWatchdog(100_000)
			k, err := kernel.New(kernel.Config{OnTimeoutWorkers: 1e9})
			stop()
			if err == nil {
				_ = k.Close()
			}
			edgeWantConfigError(t, "New(OnTimeoutWorkers: 1e9)", err, "Config.OnTimeoutWorkers")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edgeInChild(t, func(t *testing.T) {
				edgeLimitAddressSpace(t, 2<<30)
				tt.run(t)
			})
		})
	}
}

// 5. Batch.Go concurrent with Batch.Wait must not misuse the batch's
// WaitGroup ("sync: WaitGroup is reused before previous Wait has returned"; a
// race report under -race). 2,000 batches, or as many as fit in 1.5 s.
func TestEdgeBatchGoDuringWait(t *testing.T) {
	edgeInChild(t, func(t *testing.T) {
		k := edgeKernel(t, kernel.Config{MaxConcurrency: 8})
		deadline := time.Now().Add(1500 * time.Millisecond)
		for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
			b := k.NewBatch(context.Background(), nil)
			b.Go(edgeNoop)
			waited := make(chan struct{})
			added := make(chan struct{})
			go func() {
				defer close(added)
				for range 2 * kernel.BatchFlushSize {
					select {
					case <-waited:
						return
					default:
					}
					b.Go(edgeNoop)
				}
			}()
			_ = b.Wait()
			close(waited)
			axtest.WaitOrTimeout(t, added, "the goroutine calling Batch.Go")
		}
		edgeShutdown(t, k)
	})
}

// 6. Update(nil) is an error, not a panic.
func TestEdgeUpdateNil(t *testing.T) {
	k := edgeKernel(t, kernel.Config{})
	var err error
	panicked := func() (p any) {
		defer func() { p = recover() }()
		err = k.Update(nil)
		return nil
	}()
	if panicked != nil {
		t.Fatalf("Update(nil) panicked: %v", panicked)
	}
	if err == nil {
		t.Fatal("Update(nil) = nil, want an error")
	}
}

// 7. With EvictLow, High arrivals evict queued Low tasks without ever
// overfilling the buckets, failing a High task or losing a task. DegradeAt 1
// keeps Low tasks coming (and being evicted) while High tasks wait.
func TestEdgeEvictLow(t *testing.T) {
	cfg := kernel.Config{Capacity: kernel.ByPriority[int]{High: 1, Normal: 1, Low: 1}, EvictLow: true, MaxConcurrency: 2, DegradeAt: 1}
	const (
		window   = 400 * time.Millisecond // each submitter submits this long...
		attempts = 10_000_000             // ...or this many times
	)
	// short blocks a little, so that High tasks queue behind the two slots.
	short := func(context.Context) error {
		t := time.NewTimer(50 * time.Microsecond)
		<-t.C
		return nil
	}
	// submitters runs try(prio) from four High submitters and one Low one.
	submitters := func(try func(prio kernel.Priority) bool) {
		deadline := time.Now().Add(window)
		var wg sync.WaitGroup
		for _, prio := range []kernel.Priority{kernel.High, kernel.High, kernel.High, kernel.High, kernel.Low} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < attempts && time.Now().Before(deadline); i++ {
					if !try(prio) {
						runtime.Gosched() // refused: let the loop and the executors run
					}
				}
			}()
		}
		wg.Wait()
	}
	// sample watches the bucket depths until stop closes, and sends the largest
	// total it saw.
	sample := func(k *kernel.Kernel, stop <-chan struct{}) <-chan int {
		worst := make(chan int, 1)
		go func() {
			w := 0
			for {
				st := k.Stats()
				w = max(w, st.Queued.High+st.Queued.Normal+st.Queued.Low)
				select {
				case <-stop:
					worst <- w
					return
				default:
					runtime.Gosched()
				}
			}
		}()
		return worst
	}
	checkWorst := func(t *testing.T, stop chan struct{}, worst <-chan int) {
		t.Helper()
		close(stop)
		if w := axtest.WaitOrTimeout(t, worst, "the Stats sampler"); w > 3 {
			t.Errorf("Stats().Queued summed up to %d, want at most the total capacity 3", w)
		}
	}
	t.Run("submit", func(t *testing.T) {
		k := edgeKernel(t, cfg)
		stop := make(chan struct{})
		worst := sample(k, stop)
		var (
			mu          sync.Mutex
			highs, lows []*kernel.Handle
		)
		submitters(func(prio kernel.Priority) bool {
			h, err := k.TrySubmit(kernel.Task{Priority: prio, Run: short})
			if err != nil {
				return false // refused: not a task
			}
			mu.Lock()
			if prio == kernel.High {
				highs = append(highs, h)
			} else {
				lows = append(lows, h)
			}
			mu.Unlock()
			return true
		})
		checkWorst(t, stop, worst)
		for _, h := range highs {
			if err := edgeWaitHandle(t, h); err != nil || h.State() != kernel.Succeeded {
				t.Fatalf("High task %s: Wait() = %v, State() = %v; want nil, succeeded", h.ID(), err, h.State())
			}
		}
		for _, h := range lows {
			err := edgeWaitHandle(t, h)
			if ok := (err == nil && h.State() == kernel.Succeeded) || (errors.Is(err, kernel.ErrEvicted) && h.State() == kernel.Evicted); !ok {
				t.Fatalf("Low task %s: Wait() = %v, State() = %v; want succeeded or evicted", h.ID(), err, h.State())
			}
		}
		edgeShutdown(t, k)
		edgeCheckBalance(t, k.Stats())
	})
	t.Run("try_go", func(t *testing.T) {
		k := edgeKernel(t, cfg)
		stop := make(chan struct{})
		worst := sample(k, stop)
		var accepted, runs atomic.Int64
		runHigh := func(ctx context.Context) error { runs.Add(1); return short(ctx) }
		submitters(func(prio kernel.Priority) bool {
			if prio == kernel.Low {
				return k.TryGo(kernel.Task{Priority: kernel.Low, Run: short}) == nil
			}
			if k.TryGo(kernel.Task{Priority: kernel.High, Run: runHigh}) != nil {
				return false
			}
			accepted.Add(1)
			return true
		})
		checkWorst(t, stop, worst)
		edgeShutdown(t, k)
		if got, want := runs.Load(), accepted.Load(); got != want {
			t.Errorf("High tasks run = %d, want %d (accepted by TryGo)", got, want)
		}
		edgeCheckBalance(t, k.Stats())
	})
}

// 8. The gauges agree with Stats once the kernel is idle, and once it stopped.
func TestEdgeGaugesAgreeWithStats(t *testing.T) {
	const n = 24
	k := edgeKernel(t, kernel.Config{MaxConcurrency: 64})
	gate := make(chan struct{})
	var started atomic.Int32
	allStarted := make(chan struct{})
	var hs []*kernel.Handle
	for i := range n {
		h, err := k.TrySubmit(kernel.Task{Run: func(ctx context.Context) error {
			if started.Add(1) == n {
				close(allStarted)
			}
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
		if err != nil {
			t.Fatalf("TrySubmit() #%d = %v, want nil", i, err)
		}
		hs = append(hs, h)
	}
	axtest.WaitOrTimeout(t, allStarted, "every task to start")
	// A task for later makes the loop take a pass while all n run.
	if _, err := k.TrySubmit(kernel.Task{Delay: time.Hour, Run: edgeNoop}); err != nil {
		t.Fatalf("TrySubmit(Delay) = %v, want nil", err)
	}
	axtest.Eventually(t, func() bool { return edgePromValue(t, k, "ax_tasks_running") == n }, "ax_tasks_running to show the running tasks")
	close(gate)
	for _, h := range hs {
		if err := edgeWaitHandle(t, h); err != nil {
			t.Fatalf("Wait() = %v, want nil", err)
		}
	}
	axtest.Eventually(t, func() bool { return k.Stats().Running == 0 }, "Stats().Running to reach 0")
	if got := edgePromValue(t, k, "ax_tasks_running"); got != 0 {
		t.Errorf("ax_tasks_running = %v once idle, want 0 (Stats().Running)", got)
	}
	edgeShutdown(t, k)
	if got, want := edgePromValue(t, k, "ax_executors"), k.Stats().Executors; got != float64(want) || want != 0 {
		t.Errorf("after Shutdown: ax_executors = %v, Stats().Executors = %d; want 0, 0", got, want)
	}
}

// 9. Wait on a task that ended returns its outcome even when ctx is done.
func TestEdgeWaitAfterDoneCanceledCtx(t *testing.T) {
	k := edgeKernel(t, kernel.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wrong := 0
	var last error
	for range 200 {
		h, err := k.TrySubmit(kernel.Task{Run: edgeNoop})
		if err != nil {
			t.Fatalf("TrySubmit() = %v, want nil", err)
		}
		axtest.WaitOrTimeout(t, h.Done(), "the task to end")
		if err := h.Wait(ctx); err != nil {
			wrong++
			last = err
		}
	}
	if wrong > 0 {
		t.Fatalf("Wait(canceled ctx) of a succeeded task = %v in %d of 200 calls, want nil", last, wrong)
	}
}

// 10. A callback that blocks (OnEvent, OnTimeout) delays neither Shutdown past
// its context nor Close past ZombieGrace.
func TestEdgeBlockedCallbackStop(t *testing.T) {
	for _, tt := range []struct {
		name      string
		onTimeout bool // block in Task.OnTimeout, else in Config.OnEvent
		close     bool // stop with Close, else with Shutdown
	}{
		{"on_event_shutdown", false, false},
		{"on_event_close", false, true},
		{"on_timeout_shutdown", true, false},
		{"on_timeout_close", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			entered := make(chan struct{})
			var once sync.Once
			block := func() {
				once.Do(func() { close(entered) })
				<-release
			}
			cfg := kernel.Config{ZombieGrace: 200 * time.Millisecond}
			task := kernel.Task{Run: edgeNoop}
			if tt.onTimeout {
				task = kernel.Task{
					Timeout:   10 * time.Millisecond,
					Retry:     &kernel.RetryPolicy{MaxAttempts: 1},
					OnTimeout: func(int) { block() },
					Run: func(ctx context.Context) error {
						<-ctx.Done()
						return ctx.Err()
					},
				}
			} else {
				cfg.OnEvent = func(kernel.Event) { block() }
			}
			k := edgeKernel(t, cfg)
			t.Cleanup(func() { close(release) }) // runs before the kernel's Close
			if _, err := k.TrySubmit(task); err != nil {
				t.Fatalf("TrySubmit() = %v, want nil", err)
			}
			axtest.WaitOrTimeout(t, entered, "the callback to block")
			if tt.close {
				if _, ok := edgeWithin(edgeWait, k.Close); !ok {
					t.Fatalf("Close() with a blocked callback did not return within %v", edgeWait)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err, ok := edgeWithin(edgeWait, func() error { return k.Shutdown(ctx) })
			if !ok {
				t.Fatalf("Shutdown(300 ms) with a blocked callback did not return within %v", edgeWait)
			}
			if err == nil {
				t.Fatal("Shutdown(300 ms) with a blocked callback = nil, want an error")
			}
		})
	}
}

// 11. Shutdown or Close called from inside a task returns instead of waiting
// for the task itself.
func TestEdgeStopFromInsideTask(t *testing.T) {
	for _, tt := range []struct {
		name  string
		close bool
	}{{"shutdown", false}, {"close", true}} {
		t.Run(tt.name, func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{ZombieGrace: 30 * time.Second})
			inner := make(chan error, 1)
			h, err := k.TrySubmit(kernel.Task{Run: func(context.Context) error {
				if tt.close {
					inner <- k.Close()
				} else {
					inner <- k.Shutdown(context.Background())
				}
				return nil
			}})
			if err != nil {
				t.Fatalf("TrySubmit() = %v, want nil", err)
			}
			timer := time.NewTimer(edgeWait)
			defer timer.Stop()
			select {
			case err := <-inner:
				if !tt.close && err == nil {
					t.Error("Shutdown(Background) from inside a task = nil, want an error")
				}
			case <-timer.C:
				t.Fatalf("stop from inside a task did not return within %v", edgeWait)
			}
			_ = edgeWaitHandle(t, h)
			if tt.close {
				if _, ok := edgeWithin(edgeWait, k.Close); !ok {
					t.Fatalf("Close() after the task returned did not return within %v", edgeWait)
				}
				return
			}
			edgeShutdown(t, k)
		})
	}
}

// 12. A due time far in the future (or past the int64 nanoseconds) is not
// now: the task waits.
func TestEdgeFarFutureDue(t *testing.T) {
	for _, tt := range []struct {
		name string
		task func(run func(context.Context) error) kernel.Task
		fire bool // submit with TryGo (fire-and-forget), else TrySubmit
	}{
		{"delay_max", func(run func(context.Context) error) kernel.Task {
			return kernel.Task{Delay: math.MaxInt64, Run: run}
		}, false},
		{"at_200_years", func(run func(context.Context) error) kernel.Task {
			return kernel.Task{At: time.Now().Add(200 * 365 * 24 * time.Hour), Run: run}
		}, false},
		{"try_go_delay_max", func(run func(context.Context) error) kernel.Task {
			return kernel.Task{Delay: math.MaxInt64, Run: run}
		}, true},
		{"try_go_at_200_years", func(run func(context.Context) error) kernel.Task {
			return kernel.Task{At: time.Now().Add(200 * 365 * 24 * time.Hour), Run: run}
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{})
			var ran atomic.Bool
			task := tt.task(func(context.Context) error { ran.Store(true); return nil })
			var h *kernel.Handle
			if tt.fire {
				if err := k.TryGo(task); err != nil {
					t.Fatalf("TryGo() = %v, want nil", err)
				}
			} else {
				var err error
				if h, err = k.TrySubmit(task); err != nil {
					t.Fatalf("TrySubmit() = %v, want nil", err)
				}
			}
			for range 3 {
				n, err := k.TrySubmit(kernel.Task{Run: edgeNoop})
				if err != nil {
					t.Fatalf("TrySubmit(now) = %v, want nil", err)
				}
				if err := edgeWaitHandle(t, n); err != nil {
					t.Fatalf("task due now: Wait() = %v, want nil", err)
				}
			}
			if ran.Load() {
				t.Fatal("the far-future task ran before a task due now ended")
			}
			if h != nil && h.State() != kernel.Delayed {
				t.Fatalf("far-future task: State() = %v, want delayed", h.State())
			}
			if _, ok := edgeWithin(edgeWait, k.Close); !ok {
				t.Fatalf("Close() did not return within %v", edgeWait)
			}
			if ran.Load() {
				t.Fatal("the far-future task ran")
			}
			if h != nil {
				if err := edgeWaitHandle(t, h); h.State() != kernel.Canceled || !errors.Is(err, kernel.ErrClosed) {
					t.Fatalf("after Close: State() = %v, Wait() = %v; want canceled, %v", h.State(), err, kernel.ErrClosed)
				}
			}
		})
	}
}

// 13. Executors replaced after runtime.Goexit while tasks time out and become
// zombies: the race detector must find nothing.
func TestEdgeGoexitZombiesRace(t *testing.T) {
	k := edgeKernel(t, kernel.Config{MaxConcurrency: 16})
	for range 20 {
		release := make(chan struct{})
		var hs []*kernel.Handle
		submit := func(task kernel.Task) {
			h, err := k.TrySubmit(task)
			if err != nil {
				t.Fatalf("TrySubmit() = %v, want nil", err)
			}
			hs = append(hs, h)
		}
		noRetry := &kernel.RetryPolicy{MaxAttempts: 1}
		for range 8 {
			// Times out, becomes a zombie, then leaves by Goexit.
			submit(kernel.Task{Timeout: 5 * time.Millisecond, Retry: noRetry, Run: func(ctx context.Context) error {
				<-ctx.Done()
				runtime.Goexit()
				return nil
			}})
			// Leaves by Goexit at once.
			submit(kernel.Task{Retry: noRetry, Run: func(context.Context) error {
				runtime.Goexit()
				return nil
			}})
			// Times out, ignores its context and becomes a zombie until released.
			submit(kernel.Task{Timeout: 5 * time.Millisecond, Retry: noRetry, Run: func(context.Context) error {
				<-release
				return nil
			}})
		}
		for _, h := range hs {
			_ = edgeWaitHandle(t, h)
		}
		close(release)
		axtest.Eventually(t, func() bool { return k.Stats().Zombies == 0 }, "the zombies to return")
	}
}

// 14. Misuse is reported as a clear error, before anything is queued.
func TestEdgeClearErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		check func(t *testing.T)
	}{
		{"batch_go_nil", func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{})
			b := k.NewBatch(context.Background(), nil)
			b.Go(nil)
			err := b.Wait()
			var pe *kernel.PanicError
			if err == nil || errors.As(err, &pe) || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("Batch.Go(nil): Wait() = %v, want an error that is no *PanicError and mentions nil", err)
			}
		}},
		{"map_nil_fn", func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{})
			var fn func(context.Context, int) (int, error)
			var err error
			panicked := func() (p any) {
				defer func() { p = recover() }()
				_, err = kernel.Map(context.Background(), k, []int{1, 2, 3}, fn, nil)
				return nil
			}()
			var pe *kernel.PanicError
			if panicked != nil || err == nil || errors.As(err, &pe) {
				t.Fatalf("Map(nil fn) = %v (panicked: %v), want an error that is no *PanicError", err, panicked)
			}
		}},
		{"snapshot_every_without_store", func(t *testing.T) {
			c := kernel.Config{SnapshotEvery: time.Second}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Config.SnapshotEvery") {
				t.Fatalf("Config{SnapshotEvery: 1s}.Validate() = %v, want an error naming Config.SnapshotEvery", err)
			}
		}},
		{"unique_key_too_long", func(t *testing.T) {
			k := edgeDurableKernel(t)
			_, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "edge", UniqueKey: strings.Repeat("k", 300)})
			if err == nil || !strings.Contains(err.Error(), strconv.Itoa(store.UniqueKeyMax)) || strings.Contains(err.Error(), "= 300") {
				t.Fatalf("SubmitDurable(300-byte UniqueKey) = %v, want an error naming the limit %d", err, store.UniqueKeyMax)
			}
		}},
		{"durable_many_index_once", func(t *testing.T) {
			k := edgeDurableKernel(t)
			_, err := k.SubmitDurableMany(context.Background(), []kernel.DurableTask{{Kind: "edge"}, {Kind: ""}})
			if err == nil || strings.Count(err.Error(), "[1]") != 1 {
				t.Fatalf("SubmitDurableMany(bad tasks[1]) = %v, want an error naming index 1 once", err)
			}
		}},
		{"register_empty_kind", func(t *testing.T) {
			k := edgeDurableKernel(t)
			err := k.Register("", func(context.Context, []byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), "Register") {
				t.Fatalf("Register(\"\") = %v, want an error naming Register", err)
			}
		}},
		{"register_kind_too_long", func(t *testing.T) {
			k := edgeDurableKernel(t)
			err := k.Register(strings.Repeat("k", 300), func(context.Context, []byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), "300 bytes") || strings.Contains(err.Error(), "kkkk") {
				t.Fatalf("Register(300-byte kind) = %v, want an error giving its length, not the kind", err)
			}
		}},
		{"durable_kind_too_long", func(t *testing.T) {
			k := edgeDurableKernel(t)
			_, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: strings.Repeat("k", 300)})
			if err == nil || !strings.Contains(err.Error(), "300 bytes") || strings.Contains(err.Error(), "kkkk") {
				t.Fatalf("SubmitDurable(300-byte kind) = %v, want an error giving its length, not the kind", err)
			}
		}},
		{"delay_and_at", func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{})
			_, err := k.TrySubmit(kernel.Task{Delay: time.Second, At: time.Now(), Run: edgeNoop})
			if err == nil || strings.Contains(err.Error(), "m=+") {
				t.Fatalf("TrySubmit(Delay and At) = %v, want an error without the monotonic clock reading", err)
			}
		}},
	} {
		t.Run(tt.name, tt.check)
	}
}

// edgeDurableKernel starts a kernel on a storekit.MemoryStore with kind "edge" registered.
func edgeDurableKernel(t *testing.T) *kernel.Kernel {
	t.Helper()
	k := edgeKernel(t, kernel.Config{Store: storekit.NewMemoryStore()})
	if err := k.Register("edge", func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatalf("Register(edge) = %v, want nil", err)
	}
	return k
}

// 15. Every method that takes a context accepts a nil one as
// context.Background().
func TestEdgeNilContext(t *testing.T) {
	call := func(t *testing.T, what string, f func() error) {
		t.Helper()
		var err error
		panicked := func() (p any) {
			defer func() { p = recover() }()
			err = f()
			return nil
		}()
		if panicked != nil || err != nil {
			t.Fatalf("%s = %v (panicked: %v), want nil", what, err, panicked)
		}
	}
	k := edgeDurableKernel(t)
	var nilCtx context.Context
	started := make(chan struct{})
	h, err := k.Submit(nilCtx, kernel.Task{ID: "edge", Run: func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() }})
	if err != nil {
		t.Fatalf("Submit(nil) = %v, want nil", err)
	}
	<-started
	call(t, "Cancel(nil)", func() error {
		n, err := k.Cancel(nilCtx, "edge")
		if err == nil && n != 1 {
			return fmt.Errorf("%d tasks cancelled, want 1", n)
		}
		return err
	})
	if err := h.Wait(nilCtx); !errors.Is(err, kernel.ErrCanceled) {
		t.Fatalf("Wait(nil) of the cancelled task = %v, want ErrCanceled", err)
	}
	call(t, "Go(nil)", func() error { return k.Go(nilCtx, kernel.Task{Run: edgeNoop}) })
	call(t, "SubmitDurable(nil)", func() error { _, err := k.SubmitDurable(nilCtx, kernel.DurableTask{Kind: "edge"}); return err })
	call(t, "Requeue(nil)", func() error { _, err := k.Requeue(nilCtx, "none"); return err })
	call(t, "Map(nil)", func() error {
		_, err := kernel.Map(nilCtx, k, []int{1, 2}, func(context.Context, int) (int, error) { return 0, nil }, nil)
		return err
	})
	call(t, "Shutdown(nil)", func() error { return k.Shutdown(nilCtx) })
}

// edgeLogHandler is a slog.Handler that counts its records and, as set, blocks
// on block or panics.
type edgeLogHandler struct {
	block  <-chan struct{} // nil: no blocking
	panics bool
	calls  atomic.Int64
}

func (*edgeLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *edgeLogHandler) Handle(context.Context, slog.Record) error {
	h.calls.Add(1)
	if h.block != nil {
		<-h.block
	}
	if h.panics {
		panic("edge: log handler panics")
	}
	return nil
}

func (h *edgeLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *edgeLogHandler) WithGroup(string) slog.Handler      { return h }

// edgeZombieReturns makes k's loop log: a task ignores its context past its
// timeout and ZombieGrace (k's ZombieGrace must be short), then returns, and
// the loop logs the zombie's return. It waits until the loop forgot the zombie,
// which it does just before that record.
func edgeZombieReturns(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	release := make(chan struct{})
	if _, err := k.TrySubmit(kernel.Task{
		Timeout: time.Millisecond,
		Retry:   &kernel.RetryPolicy{MaxAttempts: 1},
		Run:     func(context.Context) error { <-release; return nil },
	}); err != nil {
		t.Fatalf("TrySubmit() = %v, want nil", err)
	}
	axtest.Eventually(t, func() bool {
		zs := k.Zombies()
		return len(zs) == 1 && zs[0].Stack != nil
	}, "the task to outlive its timeout and ZombieGrace")
	close(release)
	axtest.Eventually(t, func() bool { return len(k.Zombies()) == 0 }, "the zombie to return")
}

// edgeCheckAlive fails t unless k still runs a new task.
func edgeCheckAlive(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	h, err := k.TrySubmit(kernel.Task{Run: edgeNoop})
	if err != nil {
		t.Fatalf("TrySubmit() = %v, want nil", err)
	}
	if err := edgeWaitHandle(t, h); err != nil {
		t.Fatalf("Wait() = %v, want nil", err)
	}
}

// 16. A Config.Logger whose handler panics does not kill the process: the
// kernel's goroutines never call the handler, and its panics are counted.
func TestEdgeLoggerPanics(t *testing.T) {
	for _, tt := range []struct {
		name string
		log  func(t *testing.T, k *kernel.Kernel, release chan struct{}) // makes the loop log
	}{
		{"zombie_returned", func(t *testing.T, k *kernel.Kernel, _ chan struct{}) { edgeZombieReturns(t, k) }},
		{"events_dropped", func(t *testing.T, k *kernel.Kernel, release chan struct{}) {
			for range 5 {
				if _, err := k.TrySubmit(kernel.Task{Run: edgeNoop}); err != nil {
					t.Fatalf("TrySubmit() = %v, want nil", err)
				}
			}
			axtest.Eventually(t, func() bool { return k.Stats().EventsDropped > 0 }, "events to be dropped")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edgeInChild(t, func(t *testing.T) {
				h := &edgeLogHandler{panics: true}
				release := make(chan struct{}) // blocks OnEvent until closed
				k := edgeKernel(t, kernel.Config{
					Logger: slog.New(h), MaxZombies: 4, ZombieGrace: 5 * time.Millisecond,
					EventBuffer: 1, OnEvent: func(kernel.Event) { <-release },
				})
				tt.log(t, k, release)
				axtest.Eventually(t, func() bool { return h.calls.Load() > 0 && k.Stats().CallbackPanics >= uint64(h.calls.Load()) },
					"the handler's panics to be counted")
				close(release)
				edgeCheckAlive(t, k)
				edgeShutdown(t, k)
				edgeCheckBalance(t, k.Stats())
			})
		})
	}
}

// 17. A Config.Logger whose handler blocks holds up neither the loop nor the
// stop: tasks still run, Shutdown returns when its context ends, and Close
// within ZombieGrace, abandoning the handler.
func TestEdgeLoggerBlocks(t *testing.T) {
	for _, tt := range []struct {
		name     string
		shutdown bool // Shutdown(100 ms) before Close
	}{
		{"close", false},
		{"shutdown_then_close", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edgeInChild(t, func(t *testing.T) {
				release := make(chan struct{})
				h := &edgeLogHandler{block: release}
				k := edgeKernel(t, kernel.Config{Logger: slog.New(h), MaxZombies: 4, ZombieGrace: 5 * time.Millisecond})
				t.Cleanup(func() { close(release) }) // runs before edgeKernel's Close
				edgeZombieReturns(t, k)
				axtest.Eventually(t, func() bool { return h.calls.Load() > 0 }, "the handler to block")
				edgeCheckAlive(t, k)
				if tt.shutdown {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					defer cancel()
					err, ok := edgeWithin(edgeWait, func() error { return k.Shutdown(ctx) })
					var se *kernel.ShutdownError
					if !ok || !errors.As(err, &se) || se.Callbacks == 0 {
						t.Fatalf("Shutdown(100 ms) with a blocked log handler = %v (returned: %v), want a *ShutdownError counting callbacks", err, ok)
					}
				}
				if _, ok := edgeWithin(edgeWait, k.Close); !ok {
					t.Fatalf("Close() with a blocked log handler did not return within %v", edgeWait)
				}
				if n := k.Stats().CallbacksAbandoned; n == 0 {
					t.Errorf("Stats().CallbacksAbandoned = %d, want > 0", n)
				}
				edgeCheckBalance(t, k.Stats())
			})
		})
	}
}

// edgeGoexitStore is a MemoryStore whose next Commit (or CommitAs) calls runtime.Goexit
// while goexit is set.
type edgeGoexitStore struct {
	*storekit.MemoryStore
	goexit atomic.Bool
}

func (s *edgeGoexitStore) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	if s.goexit.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return s.MemoryStore.Commit(ctx, changes)
}

func (s *edgeGoexitStore) CommitAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	if s.goexit.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return s.MemoryStore.CommitAs(ctx, o, changes)
}

// 18. User code that calls runtime.Goexit ends no goroutine of the kernel for
// good: a BackoffFunc (called for the loop) counts as one that panicked and the
// retry gets the default delay; a Store method fails the call; OnEvent and
// OnTimeout go on with the next callback. Each is counted in CallbackPanics.
func TestEdgeGoexitInCallbacks(t *testing.T) {
	goexitBackoff := func(int, error) time.Duration { runtime.Goexit(); return 0 }
	retry := func(bf kernel.BackoffFunc) kernel.RetryPolicy {
		return kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond, Jitter: kernel.JitterNone, BackoffFunc: bf}
	}
	backoff := func(t *testing.T, cfg kernel.Config, task kernel.Task) {
		k := edgeKernel(t, cfg)
		var runs atomic.Int32
		task.Run = func(context.Context) error { runs.Add(1); return errEdge }
		h, err := k.TrySubmit(task)
		if err != nil {
			t.Fatalf("TrySubmit() = %v, want nil", err)
		}
		if err := edgeWaitHandle(t, h); !errors.Is(err, errEdge) || h.State() != kernel.Failed || runs.Load() != 3 {
			t.Fatalf("Wait() = %v, State() = %v after %d runs; want failed with %v after 3", err, h.State(), runs.Load(), errEdge)
		}
		if n := k.Stats().CallbackPanics; n != 2 {
			t.Errorf("Stats().CallbackPanics = %d, want 2 (one per retry)", n)
		}
		edgeCheckAlive(t, k)
		edgeShutdown(t, k)
		edgeCheckBalance(t, k.Stats())
	}
	for _, tt := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"task_backoff", func(t *testing.T) {
			p := retry(goexitBackoff)
			backoff(t, kernel.Config{}, kernel.Task{Retry: &p})
		}},
		{"config_backoff", func(t *testing.T) {
			backoff(t, kernel.Config{Retry: kernel.ByPriority[kernel.RetryPolicy]{Normal: retry(goexitBackoff)}}, kernel.Task{})
		}},
		{"store_commit", func(t *testing.T) {
			st := &edgeGoexitStore{MemoryStore: storekit.NewMemoryStore()}
			k := edgeKernel(t, kernel.Config{Store: st})
			var ran atomic.Int32
			if err := k.Register("edge", func(context.Context, []byte) error { ran.Add(1); return nil }); err != nil {
				t.Fatalf("Register() = %v, want nil", err)
			}
			st.goexit.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), edgeWait)
			defer cancel()
			if _, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "edge"}); !errors.Is(err, store.ErrStoreUnavailable) {
				t.Fatalf("SubmitDurable() while Commit calls Goexit = %v, want ErrStoreUnavailable", err)
			}
			var h *kernel.Handle
			axtest.Eventually(t, func() bool {
				var err error
				h, err = k.SubmitDurable(ctx, kernel.DurableTask{Kind: "edge"})
				return err == nil
			}, "durable submits to succeed again")
			if err := edgeWaitHandle(t, h); err != nil {
				t.Fatalf("Wait() = %v, want nil", err)
			}
			edgeShutdown(t, k)
		}},
		{"on_event", func(t *testing.T) {
			var calls, after atomic.Int64
			k := edgeKernel(t, kernel.Config{OnEvent: func(kernel.Event) {
				if calls.Add(1) == 1 {
					runtime.Goexit()
				}
				after.Add(1)
			}})
			edgeCheckAlive(t, k)
			axtest.Eventually(t, func() bool { return after.Load() > 0 }, "events delivered after OnEvent called Goexit")
			edgeShutdown(t, k)
			if n := k.Stats().CallbackPanics; n != 1 {
				t.Errorf("Stats().CallbackPanics = %d, want 1", n)
			}
		}},
		{"on_timeout", func(t *testing.T) {
			k := edgeKernel(t, kernel.Config{OnTimeoutWorkers: 1})
			var calls atomic.Int64
			for i := range 2 {
				h, err := k.TrySubmit(kernel.Task{
					Timeout:   time.Millisecond,
					Retry:     &kernel.RetryPolicy{MaxAttempts: 1},
					OnTimeout: func(int) { calls.Add(1); runtime.Goexit() },
					Run:       func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
				})
				if err != nil {
					t.Fatalf("TrySubmit() #%d = %v, want nil", i, err)
				}
				_ = edgeWaitHandle(t, h)
				axtest.Eventually(t, func() bool { return calls.Load() == int64(i+1) }, "OnTimeout to be called")
			}
			edgeShutdown(t, k)
			if n := k.Stats().CallbackPanics; n != 2 {
				t.Errorf("Stats().CallbackPanics = %d, want 2", n)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			edgeInChild(t, tt.run)
		})
	}
}

// TestEdgeStopFromGuardedCallbacks: a BackoffFunc or a Store method that calls
// Close or Shutdown gets ErrStopFromInside at once, and the stop completes, instead
// of waiting for the loop or the journal that waits for the callback.
func TestEdgeStopFromGuardedCallbacks(t *testing.T) {
	stops := map[string]func(k *kernel.Kernel) error{
		"Close":    func(k *kernel.Kernel) error { return k.Close() },
		"Shutdown": func(k *kernel.Kernel) error { return k.Shutdown(context.Background()) },
	}
	for name, stop := range stops {
		t.Run("BackoffFunc/"+name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var k *kernel.Kernel
				got := make(chan error, 1)
				k = newTestKernel(t, kernel.Config{})
				retry := &kernel.RetryPolicy{MaxAttempts: 3, BackoffFunc: func(int, error) time.Duration {
					got <- stop(k)
					return time.Millisecond
				}}
				h, err := k.Submit(context.Background(), kernel.Task{Retry: retry, Run: func(context.Context) error { return errors.New("fail") }})
				if err != nil {
					t.Fatal(err)
				}
				if err := <-got; !errors.Is(err, kernel.ErrStopFromInside) {
					t.Fatalf("%s from a BackoffFunc = %v, want ErrStopFromInside", name, err)
				}
				<-h.Done()
				if err := k.Close(); err != nil {
					t.Fatalf("Close() after = %v", err)
				}
			})
		})
		t.Run("Store/"+name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &stopStore{MemoryStore: storekit.NewMemoryStore(), got: make(chan error, 1)}
				k := newTestKernel(t, kernel.Config{Store: struct{ store.Store }{s}})
				s.stop = func() error { return stop(k) }
				_ = k.Register("k", func(context.Context, []byte) error { return nil })
				s.armed.Store(true)
				_, _ = k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
				if err := <-s.got; !errors.Is(err, kernel.ErrStopFromInside) {
					t.Fatalf("%s from Store.Commit = %v, want ErrStopFromInside", name, err)
				}
				if err := k.Close(); err != nil {
					t.Fatalf("Close() after = %v", err)
				}
			})
		})
	}
}

// stopStore is a MemoryStore whose next Commit, once armed, stops the kernel.
type stopStore struct {
	*storekit.MemoryStore
	armed atomic.Bool
	stop  func() error
	got   chan error
}

func (s *stopStore) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.got <- s.stop()
	}
	return s.MemoryStore.Commit(ctx, cs)
}

// TestEdgeStoreIgnoresCtx: a Store whose Commit blocks and ignores its ctx holds
// neither Close nor Shutdown beyond their bounds (StoreTimeout, the ctx).
func TestEdgeStoreIgnoresCtx(t *testing.T) {
	for _, name := range []string{"Close", "Shutdown"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &hangStore{MemoryStore: storekit.NewMemoryStore(), entered: make(chan struct{}), release: make(chan struct{})}
				k, err := kernel.New(kernel.Config{Store: struct{ store.Store }{s}, StoreTimeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				_ = k.Register("k", func(context.Context, []byte) error { return nil })
				s.armed.Store(true)
				submitted := make(chan error, 1)
				go func() {
					_, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
					submitted <- err
				}()
				<-s.entered
				start := time.Now()
				var stopErr error
				if name == "Close" {
					stopErr = k.Close()
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					stopErr = k.Shutdown(ctx)
					cancel()
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("%s returned after %v with the store's Commit blocked", name, d)
				}
				if name == "Shutdown" && stopErr == nil {
					t.Errorf("Shutdown() = nil with the journal blocked, want a ShutdownError")
				}
				close(s.release)
				if err := <-submitted; err != nil {
					t.Logf("SubmitDurable() = %v (the kernel stopped meanwhile)", err)
				}
				_ = k.Close()
				synctest.Wait()
			})
		})
	}
}

// hangStore is a MemoryStore whose next Commit, once armed, blocks until release,
// whatever its ctx says.
type hangStore struct {
	*storekit.MemoryStore
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *hangStore) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	return s.MemoryStore.Commit(ctx, cs)
}
