package kernel

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestFastLaneBurstStartsEveryTask: a burst of tasks that block, submitted while
// the loop sleeps with the fast lane open, all start. The executors' chain of
// wake-ups may stop short of the last of them; the loop, woken by the burst,
// restarts it.
func TestFastLaneBurstStartsEveryTask(t *testing.T) {
	for rep := range 100 {
		const n = 24
		k := newTestKernel(t, Config{MaxConcurrency: 64})
		<-k.ready
		gate := make(chan struct{})
		var started atomic.Int32
		allStarted := make(chan struct{})
		for range n {
			if _, err := k.TrySubmit(Task{Run: func(ctx context.Context) error {
				if started.Add(1) == n {
					close(allStarted)
				}
				select {
				case <-gate:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}); err != nil {
				t.Fatal(err)
			}
		}
		tm := time.NewTimer(10 * time.Second)
		select {
		case <-allStarted:
			tm.Stop()
		case <-tm.C:
			st := k.Stats()
			t.Fatalf("burst %d: %d of %d tasks started in 10 s (Dispatched %d, Running %d, Executors %d)", rep, started.Load(), n, st.Dispatched, st.Running, st.Executors)
		}
		close(gate)
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
