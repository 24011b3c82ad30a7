package kernel

import (
	"context"
	"sync"
	"testing"
)

// TestWaitersForRoomAllGetThrough: many submitters blocking on a kernel with
// room for one waiting task all get their tasks in (one yields for room, the
// others sleep), and none is left counted as spinning.
func TestWaitersForRoomAllGetThrough(t *testing.T) {
	k := newTestKernel(t, Config{MaxConcurrency: 1, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 1}})
	const submitters, each = 20, 50
	var wg sync.WaitGroup
	for range submitters {
		wg.Go(func() {
			for range each {
				if err := k.Go(context.Background(), Task{Run: noop}); err != nil {
					t.Errorf("Go() = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	if got := k.Stats().ByPriority.Normal.Succeeded; got != submitters*each {
		t.Errorf("succeeded = %d, want %d", got, submitters*each)
	}
	if n := k.roomSpinners.Load(); n != 0 {
		t.Errorf("roomSpinners = %d after every wait ended, want 0", n)
	}
}
