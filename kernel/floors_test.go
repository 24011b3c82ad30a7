package kernel

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestFloorsHoldUnderArrivals: High and Normal arrive steadily, together asking for
// more than every slot, while Low has a backlog. Picks of Normal and Low waiting in
// the run queue are overtaken by later High picks only within their share, so Low
// keeps its floor and Normal its own, instead of starving behind the arrivals —
// also while some tasks outlive their timeouts as zombies.
func TestFloorsHoldUnderArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			slots = 100
			work  = 50 * time.Millisecond // capacity: 2,000 tasks/s
			span  = 5 * time.Second
		)
		k := newTestKernel(t, Config{
			MaxConcurrency: slots,
			Capacity:       ByPriority[int]{High: 10_000, Normal: 10_000, Low: 10_000},
			DegradeAt:      1,
		})
		var mu sync.Mutex
		starts := map[Priority]int{}
		counting := true
		seq := 0
		run := func(p Priority) func(context.Context) error {
			return func(context.Context) error {
				mu.Lock()
				if counting {
					starts[p]++
				}
				seq++
				d := work/2 + time.Duration(seq*7919%100)*work/100 // 0.5–1.5 × work
				if seq%300 == 0 {
					d = 10 * work // outlives its timeout, ignoring its context
				}
				mu.Unlock()
				busy := time.NewTimer(d) // on the bubble's clock, ignoring ctx
				<-busy.C
				return nil
			}
		}
		for range 5_000 {
			if err := k.TryGo(Task{Priority: Low, Timeout: 4 * work, Run: run(Low)}); err != nil {
				t.Fatal(err)
			}
		}
		// High asks for 75 % of the capacity, Normal for 50 %.
		var wg sync.WaitGroup
		for _, a := range []struct {
			p     Priority
			every time.Duration
		}{{High, time.Second / 1500}, {Normal, time.Second / 1000}} {
			wg.Go(func() {
				arrivals := time.NewTicker(a.every)
				defer arrivals.Stop()
				for end := time.Now().Add(span); time.Now().Before(end); {
					<-arrivals.C
					if err := k.TryGo(Task{Priority: a.p, Timeout: 4 * work, Run: run(a.p)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		mu.Lock()
		counting = false
		total := starts[High] + starts[Normal] + starts[Low]
		share := func(p Priority) float64 { return float64(starts[p]) / float64(total) }
		t.Logf("starts: High %d, Normal %d, Low %d", starts[High], starts[Normal], starts[Low])
		if s := share(Low); s < 0.04 {
			t.Errorf("Low's share = %.3f, want at least its 5 %% floor less 1 pp", s)
		}
		if s := share(Normal); s < 0.09 {
			t.Errorf("Normal's share = %.3f, want at least its 10 %% floor less 1 pp", s)
		}
		mu.Unlock()
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
