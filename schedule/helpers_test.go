package schedule

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
)

// setup starts a kernel and a scheduler bound to it, both stopped at the end of
// the test.
func setup(t testing.TB, kc kernel.Config, sc Config) (*kernel.Kernel, *Scheduler) {
	t.Helper()
	k, err := kernel.New(kc)
	if err != nil {
		t.Fatalf("kernel.New() = %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	s, err := New(k, sc)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(s.Stop)
	return k, s
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

func noop(context.Context) error { return nil }

// mustSubmit submits or fails the test.
func mustSubmit(t testing.TB, k *kernel.Kernel, task kernel.Task) *kernel.Handle {
	t.Helper()
	h, err := k.TrySubmit(task)
	if err != nil {
		t.Fatalf("TrySubmit() = %v", err)
	}
	return h
}

// advance moves a synctest bubble's virtual clock by d, then waits until every
// goroutine of the bubble is blocked. Only for use inside synctest.Test.
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}
