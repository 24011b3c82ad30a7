package kernel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// TestTaskInfo: a task's function learns its ID, priority, attempt and durable
// kind from its context, or from a context derived from it; other contexts have
// no Info.
func TestTaskInfo(t *testing.T) {
	if _, ok := TaskInfo(context.Background()); ok {
		t.Error("TaskInfo(Background) ok = true, want false")
	}
	var none context.Context // a nil context is what is tested
	if _, ok := TaskInfo(none); ok {
		t.Error("TaskInfo(nil) ok = true, want false")
	}
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{RetryBudget: RetryBudget{Disabled: true}})
		var mu sync.Mutex
		var got []Info
		h := mustSubmit(t, k, Task{
			ID: "job-1", Priority: High, Retry: &RetryPolicy{MaxAttempts: 2, Base: time.Millisecond, Jitter: JitterNone},
			Run: func(ctx context.Context) error {
				info, ok := TaskInfo(context.WithValue(ctx, ctxKey{}, 1))
				if !ok {
					return Permanent(errors.New("no Info"))
				}
				mu.Lock()
				got = append(got, info)
				n := len(got)
				mu.Unlock()
				if n == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			},
		})
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("Wait() = %v", err)
		}
		want := []Info{{ID: "job-1", Priority: High, Attempt: 1}, {ID: "job-1", Priority: High, Attempt: 2}}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("TaskInfo in the attempts = %+v, want %+v", got, want)
		}
		// A kernel-made ID is the handle's.
		var info Info
		h2 := mustSubmit(t, k, Task{Run: func(ctx context.Context) error { info, _ = TaskInfo(ctx); return nil }})
		if err := h2.Wait(context.Background()); err != nil || info.ID != h2.ID() || info.Priority != Normal {
			t.Errorf("TaskInfo of a task without ID = %+v (err %v), want ID %q, Normal", info, err, h2.ID())
		}
	})
}
