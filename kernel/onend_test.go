package kernel

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/goid"
)

// endRecord is one Task.OnEnd call.
type endRecord struct {
	state State
	err   error
	gid   uint64
}

// endRecorder collects the OnEnd calls of tasks.
type endRecorder chan endRecord

func (r endRecorder) onEnd(s State, err error) { r <- endRecord{s, err, goid.ID()} }

// one returns the only call recorded, failing if there is not exactly one.
func (r endRecorder) one(t *testing.T) endRecord {
	t.Helper()
	synctest.Wait()
	if len(r) != 1 {
		t.Fatalf("OnEnd called %d times, want 1", len(r))
	}
	return <-r
}

func TestOnEndEveryEnd(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		cfg     Config
		run     func(t *testing.T, k *Kernel, onEnd func(State, error))
		state   State
		wantErr error
	}{
		{
			name: "success",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				mustSubmit(t, k, Task{Run: noop, OnEnd: onEnd})
			},
			state: Succeeded,
		},
		{
			name: "success fire-and-forget",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				if err := k.TryGo(Task{Run: noop, OnEnd: onEnd}); err != nil {
					t.Fatalf("TryGo() = %v", err)
				}
			},
			state: Succeeded,
		},
		{
			name: "delayed fire-and-forget",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				if err := k.TryGo(Task{Delay: time.Second, Run: noop, OnEnd: onEnd}); err != nil {
					t.Fatalf("TryGo() = %v", err)
				}
				advance(2 * time.Second)
			},
			state: Succeeded,
		},
		{
			name: "group",
			cfg:  Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}}},
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				mustSubmit(t, k, Task{Group: "g", Key: "a", Run: noop, OnEnd: onEnd})
			},
			state: Succeeded,
		},
		{
			name: "failure after retries",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				h := mustSubmit(t, k, Task{
					Retry: &RetryPolicy{MaxAttempts: 3, Base: time.Millisecond},
					Run:   func(context.Context) error { return boom }, OnEnd: onEnd,
				})
				advance(time.Second)
				if n := h.Attempts(); n != 3 {
					t.Fatalf("Attempts() = %d, want 3", n)
				}
			},
			state:   Failed,
			wantErr: boom,
		},
		{
			name: "cancel",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				h := mustSubmit(t, k, Task{Delay: time.Hour, Run: noop, OnEnd: onEnd})
				synctest.Wait()
				h.Cancel()
			},
			state:   Canceled,
			wantErr: ErrCanceled,
		},
		{
			name: "timeout",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				mustSubmit(t, k, Task{
					Timeout: time.Second, Retry: &RetryPolicy{MaxAttempts: 1},
					Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, OnEnd: onEnd,
				})
				advance(2 * time.Second)
			},
			state:   TimedOut,
			wantErr: ErrTimeout,
		},
		{
			name: "close running",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				g := make(gate)
				mustSubmit(t, k, Task{Run: g.run, OnEnd: onEnd})
				synctest.Wait()
				if err := k.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
			},
			state:   Canceled,
			wantErr: ErrClosed,
		},
		{
			name: "close queued",
			cfg:  Config{MaxConcurrency: 1},
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				g := make(gate)
				mustSubmit(t, k, Task{Run: g.run})
				mustSubmit(t, k, Task{Run: noop, OnEnd: onEnd})
				synctest.Wait()
				if err := k.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
			},
			state:   Canceled,
			wantErr: ErrClosed,
		},
		{
			name: "shutdown abandons delayed",
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				mustSubmit(t, k, Task{Delay: time.Hour, Run: noop, OnEnd: onEnd})
				synctest.Wait()
				if err := k.Shutdown(context.Background()); err != nil {
					t.Fatalf("Shutdown() = %v", err)
				}
			},
			state:   Abandoned,
			wantErr: ErrAbandoned,
		},
		{
			name: "evicted",
			cfg:  Config{MaxConcurrency: 1, EvictLow: true, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 1}, DegradeAt: 1},
			run: func(t *testing.T, k *Kernel, onEnd func(State, error)) {
				g := make(gate)
				mustSubmit(t, k, Task{Run: g.run})
				synctest.Wait()
				mustSubmit(t, k, Task{Priority: Low, Run: noop, OnEnd: onEnd})
				mustSubmit(t, k, Task{Priority: High, Run: noop})
				synctest.Wait()
				if _, err := k.TrySubmit(Task{Priority: High, Run: noop}); err != nil {
					t.Fatalf("TrySubmit(High) with EvictLow = %v, want accepted", err)
				}
				synctest.Wait()
				g.open()
			},
			state:   Evicted,
			wantErr: ErrEvicted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newTestKernel(t, tt.cfg)
				r := make(endRecorder, 16)
				tt.run(t, k, r.onEnd)
				c := r.one(t)
				if c.state != tt.state || !errors.Is(c.err, tt.wantErr) || (tt.wantErr == nil) != (c.err == nil) {
					t.Fatalf("OnEnd(%v, %v), want (%v, %v)", c.state, c.err, tt.state, tt.wantErr)
				}
				if q := k.ends.q.Load(); q == nil || c.gid != q.GID() {
					t.Fatalf("OnEnd ran on goroutine %d, want the OnEnd goroutine", c.gid)
				}
				if err := k.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
				synctest.Wait()
				if len(r) != 0 {
					t.Fatalf("OnEnd called %d more times after the end", len(r))
				}
			})
		})
	}
}

// A blocked OnEnd holds back neither the loop nor other tasks; the calls after it
// wait, in order, and Shutdown delivers them.
func TestOnEndBlockedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1})
		release := make(chan struct{})
		var order []int
		for i := range 5 {
			mustSubmit(t, k, Task{Run: noop, OnEnd: func(State, error) {
				if i == 0 {
					<-release
				}
				order = append(order, i)
			}})
		}
		h := mustSubmit(t, k, Task{Run: noop})
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("Wait() behind a blocked OnEnd = %v", err)
		}
		close(release)
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
		if len(order) != 5 {
			t.Fatalf("OnEnd calls after Shutdown = %v, want 5", order)
		}
		for i, v := range order {
			if v != i {
				t.Fatalf("OnEnd order = %v, want 0..4", order)
			}
		}
	})
}

// A panicking OnEnd is recovered and counted; the next calls go on.
func TestOnEndPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{})
		mustSubmit(t, k, Task{Run: noop, OnEnd: func(State, error) { panic("boom") }})
		synctest.Wait()
		r := make(endRecorder, 4)
		mustSubmit(t, k, Task{Run: noop, OnEnd: r.onEnd})
		if c := r.one(t); c.state != Succeeded {
			t.Fatalf("OnEnd after a panic: state %v, want Succeeded", c.state)
		}
		if n := k.Stats().CallbackPanics; n != 1 {
			t.Fatalf("Stats().CallbackPanics = %d, want 1", n)
		}
	})
}

// Shutdown called from OnEnd does not wait for its caller.
func TestOnEndShutdownFromInside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{})
		got := make(chan error, 1)
		mustSubmit(t, k, Task{Run: noop, OnEnd: func(State, error) { got <- k.Shutdown(context.Background()) }})
		synctest.Wait()
		if err := <-got; !errors.Is(err, ErrStopFromInside) {
			t.Fatalf("Shutdown() from OnEnd = %v, want ErrStopFromInside", err)
		}
	})
}

// A task with OnEnd never takes a path that ends it off the loop.
func TestOnEndPath(t *testing.T) {
	k := newTestKernel(t, Config{})
	rc := k.rc.Load()
	for _, task := range []Task{
		{Run: noop, OnEnd: func(State, error) {}},
		{Run: noop, Delay: time.Second, OnEnd: func(State, error) {}},
	} {
		if p := k.pathOf(&task, Normal, rc, true); p != pathRecord {
			t.Fatalf("pathOf(task with OnEnd, Delay %v) = %d, want pathRecord", task.Delay, p)
		}
	}
}
