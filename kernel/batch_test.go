package kernel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestMapFailsFastWithoutRetries: a failing item is not retried unless
// BatchOptions asks, and its error cancels the other items at once, as
// errgroup.WithContext does; with a Retry policy the item is retried.
func TestMapFailsFastWithoutRetries(t *testing.T) {
	errItem := errors.New("item failed")
	for _, tt := range []struct {
		name     string
		opts     *BatchOptions
		attempts int32
	}{
		{"default: no retry", nil, 1},
		{"retry asked", &BatchOptions{Retry: &RetryPolicy{MaxAttempts: 3, Base: time.Second, Jitter: JitterNone}}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newTestKernel(t, Config{MaxConcurrency: 8, RetryBudget: RetryBudget{Disabled: true}})
				var calls, canceled atomic.Int32
				start := time.Now()
				_, err := Map(context.Background(), k, []int{0, 1, 2, 3, 4, 5, 6, 7}, func(ctx context.Context, i int) (int, error) {
					if i == 0 {
						calls.Add(1)
						return 0, errItem
					}
					<-ctx.Done() // the others wait until the first error cancels them
					canceled.Add(1)
					return 0, ctx.Err()
				}, tt.opts)
				if !errors.Is(err, errItem) {
					t.Fatalf("Map() = %v, want the item's error", err)
				}
				if got := calls.Load(); got != tt.attempts {
					t.Errorf("failing item ran %d times, want %d", got, tt.attempts)
				}
				// Each other item either never started or saw its context end.
				if got := canceled.Load(); got > 7 {
					t.Errorf("items cancelled = %d, want at most 7", got)
				}
				// On the bubble's clock: no backoff was waited without a Retry.
				if d := time.Since(start); tt.opts == nil && d != 0 {
					t.Errorf("Map took %v of virtual time, want 0 (no retry backoff)", d)
				}
			})
		})
	}
}

// TestMapStopsQueuedItems: once an item failed, the items still queued behind the
// slots never run: Map returns after the running ones saw their context end, not
// after working through the queue.
func TestMapStopsQueuedItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots, n = 2, 10_000
		k := newTestKernel(t, Config{MaxConcurrency: slots, RetryBudget: RetryBudget{Disabled: true}})
		errItem := errors.New("item failed")
		var started atomic.Int32
		items := make([]int, n)
		for i := range items {
			items[i] = i
		}
		_, err := Map(context.Background(), k, items, func(ctx context.Context, i int) (int, error) {
			started.Add(1)
			if i == 0 {
				return 0, errItem
			}
			select { // a slow item, cut short by the cancellation
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Second):
				return i, nil
			}
		}, nil)
		if !errors.Is(err, errItem) {
			t.Fatalf("Map() = %v, want the item's error", err)
		}
		// The slots, and what the run queue held for them when the error came.
		if got := started.Load(); got > 4*slots {
			t.Errorf("%d of %d items started after the first error, want at most %d", got, n, 4*slots)
		}
		synctest.Wait()
		s := k.Stats()
		ps := s.ByPriority.Get(Normal)
		if ps.Canceled+ps.Failed+ps.Succeeded != n {
			t.Errorf("ended %d canceled + %d failed + %d succeeded, want %d in all", ps.Canceled, ps.Failed, ps.Succeeded, n)
		}
	})
}
