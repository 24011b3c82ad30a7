package kernel

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestDefaultSharesAndFloors checks the default quotas through the whole kernel:
// with every priority of a mix saturated, Normal and Low get their floors (2 and 1
// picks in every cycle of 20) and the highest priority of the mix the rest, ± 1 pp
// of the dispatches: the floors hold with any mix, and the share of an absent
// priority passes to the highest one present.
func TestDefaultSharesAndFloors(t *testing.T) {
	quota := map[Priority]float64{High: quotaHighDefault, Normal: quotaNormalDefault, Low: quotaLowDefault}
	n := 100_000
	if raceEnabled {
		n = 30_000
	}
	for _, tt := range []struct {
		name string
		mix  []Priority
	}{
		{"all three", []Priority{High, Normal, Low}},
		{"high and normal", []Priority{High, Normal}},
		{"high and low", []Priority{High, Low}},
		{"normal and low", []Priority{Normal, Low}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newTestKernel(t, Config{
					MaxConcurrency: 4, DegradeAt: 1,
					Capacity: ByPriority[int]{High: n, Normal: n, Low: n},
				})
				g := make(gate)
				for range 4 {
					mustSubmit(t, k, Task{Priority: High, Timeout: time.Hour, Run: g.run})
				}
				synctest.Wait()
				var mu sync.Mutex
				counts := map[Priority]int{}
				started := 0
				rec := func(p Priority) func(context.Context) error {
					return func(context.Context) error {
						mu.Lock()
						if started < n {
							counts[p]++
							started++
						}
						mu.Unlock()
						return nil
					}
				}
				// Each priority of the mix holds more than its share of n.
				for _, p := range tt.mix {
					for range n {
						if err := k.TryGo(Task{Priority: p, Run: rec(p)}); err != nil {
							t.Fatal(err)
						}
					}
				}
				synctest.Wait()
				g.open()
				for {
					synctest.Wait()
					mu.Lock()
					done := started == n
					mu.Unlock()
					if done {
						break
					}
				}
				// Normal and Low get their floors; the highest priority of the mix
				// gets the rest.
				cycle := quota[High] + quota[Normal] + quota[Low]
				want := map[Priority]float64{tt.mix[0]: 1}
				for _, p := range tt.mix[1:] {
					want[p] = quota[p] / cycle
					want[tt.mix[0]] -= want[p]
				}
				for _, p := range tt.mix {
					if got := float64(counts[p]) / float64(n); got < want[p]-0.01 || got > want[p]+0.01 {
						t.Errorf("share of %v = %.4f, want %.4f ± 0.01", p, got, want[p])
					}
				}
			})
		})
	}
}

// TestHigherPriorityOvertakesPickedWork fills every slot and the run queue's
// lookahead with Low work (or Normal over Low), then submits one task of a higher
// priority: it starts in the next slot that frees, before any lower-priority task
// that was picked ahead of it, and its wait is the time to the next completion.
func TestHigherPriorityOvertakesPickedWork(t *testing.T) {
	for _, tt := range []struct {
		name      string
		bulk, urg Priority
	}{
		{"high over low", Low, High},
		{"normal over low", Low, Normal},
		{"high over normal", Normal, High},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const slots = 50
				k := newTestKernel(t, Config{MaxConcurrency: slots, DegradeAt: 1})
				var mu sync.Mutex
				var bulkStarts, bulkEnds []time.Time
				for i := range 2000 {
					d := 20*time.Millisecond + time.Duration(i)*7*time.Microsecond
					mustSubmit(t, k, Task{Priority: tt.bulk, Run: func(context.Context) error {
						mu.Lock()
						bulkStarts = append(bulkStarts, time.Now())
						mu.Unlock()
						tm := time.NewTimer(d)
						<-tm.C
						mu.Lock()
						bulkEnds = append(bulkEnds, time.Now())
						mu.Unlock()
						return nil
					}})
				}
				advance(5 * time.Millisecond)
				st := k.Stats()
				if st.Running != slots || st.Dispatched != lookaheadOf(slots) {
					t.Fatalf("before the urgent task: running %d, dispatched %d; want %d and a full lookahead (%d)",
						st.Running, st.Dispatched, slots, lookaheadOf(slots))
				}
				submitted := time.Now()
				var urgentStart time.Time
				h := mustSubmit(t, k, Task{Priority: tt.urg, Run: func(context.Context) error {
					urgentStart = time.Now()
					return nil
				}})
				if err := h.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				next := time.Time{}
				for _, e := range bulkEnds {
					if !e.Before(submitted) && (next.IsZero() || e.Before(next)) {
						next = e
					}
				}
				if urgentStart.After(next) {
					t.Errorf("urgent task started %v after its submission, the next completion came after %v",
						urgentStart.Sub(submitted), next.Sub(submitted))
				}
				for _, s := range bulkStarts {
					if s.After(submitted) && s.Before(urgentStart) {
						t.Fatalf("a %v task picked ahead started %v after the %v task's submission, before it (%v)",
							tt.bulk, s.Sub(submitted), tt.urg, urgentStart.Sub(submitted))
					}
				}
			})
		})
	}
}
