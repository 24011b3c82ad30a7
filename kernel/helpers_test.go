package kernel

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// newTestKernel starts a kernel closed at the end of the test.
func newTestKernel(t testing.TB, cfg Config) *Kernel {
	t.Helper()
	k, err := New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// gate is a task function that blocks until the gate opens or its context ends.
type gate chan struct{}

func (g gate) run(ctx context.Context) error {
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g gate) open() { close(g) }

// stubborn blocks for d of (virtual) time, ignoring its context.
func stubborn(d time.Duration) func(context.Context) error {
	return func(context.Context) error {
		t := time.NewTimer(d)
		<-t.C
		return nil
	}
}

func noop(context.Context) error { return nil }

// mustSubmit submits or fails the test.
func mustSubmit(t testing.TB, k *Kernel, task Task) *Handle {
	t.Helper()
	h, err := k.TrySubmit(task)
	if err != nil {
		t.Fatalf("TrySubmit() = %v", err)
	}
	return h
}

// waitAll waits for every handle and returns the count per terminal state.
func waitAll(t testing.TB, hs []*Handle) map[State]int {
	t.Helper()
	out := map[State]int{}
	for _, h := range hs {
		<-h.Done()
		out[h.State()]++
	}
	return out
}

func runtimeGosched() { runtime.Gosched() }

// advance moves a synctest bubble's virtual clock by d, then waits until every
// goroutine of the bubble is blocked. Only for use inside synctest.Test.
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}
