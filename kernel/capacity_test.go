package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// yieldy is a task that holds its slot for a few yields.
func yieldy(context.Context) error {
	for range 8 {
		runtimeGosched()
	}
	return nil
}

// queuedOf returns Stats().Queued and the ax_queue_depth gauges, by level.
func queuedOf(t *testing.T, k *Kernel) (st, gauge [3]int) {
	t.Helper()
	s := k.Stats()
	st = [3]int{s.Queued.High, s.Queued.Normal, s.Queued.Low}
	var b bytes.Buffer
	k.WritePrometheus(&b)
	for i, p := range []string{"high", "normal", "low"} {
		pre := fmt.Sprintf("ax_queue_depth{priority=%q} ", p)
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, pre); ok {
				_, _ = fmt.Sscan(v, &gauge[i])
			}
		}
	}
	return st, gauge
}

// TestCapacityCountsPicksAhead: a task picked ahead into the run queue (the
// lookahead) still waits, so Capacity counts it and Stats().Queued shows it.
func TestCapacityCountsPicksAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 8 slots: a lookahead of 2.
		k := newTestKernel(t, Config{MaxConcurrency: 8, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 1}})
		g := make(gate)
		defer g.open()
		for range 8 {
			mustSubmit(t, k, Task{Priority: High, Run: g.run})
			synctest.Wait()
		}
		mustSubmit(t, k, Task{Priority: High, Run: noop}) // picked ahead: waits in the run queue
		synctest.Wait()
		if st, gauge := queuedOf(t, k); st[0] != 1 || gauge[0] != 1 {
			t.Errorf("Queued.High = %d, gauge %d, want 1 (the pick ahead)", st[0], gauge[0])
		}
		if _, err := k.TrySubmit(Task{Priority: High, Run: noop}); !errors.Is(err, ErrQueueFull) {
			t.Errorf("TrySubmit(High) beyond Capacity.High = %v, want ErrQueueFull", err)
		}
	})
}

// TestCapacityEvictLowQueued is the case: one slot busy, Capacity 1 per
// priority, EvictLow, High submitters racing Low arrivals. A High task holding an
// evicted Low task's room counts against Capacity.Low, and so in Queued.Low.
func TestCapacityEvictLowQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, EvictLow: true, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 1}})
		g := make(gate)
		mustSubmit(t, k, Task{Priority: Normal, Run: g.run})
		synctest.Wait()
		mustSubmit(t, k, Task{Priority: High, Run: noop})
		mustSubmit(t, k, Task{Priority: Low, Run: noop})
		synctest.Wait()
		mustSubmit(t, k, Task{Priority: High, Run: noop}) // evicts the Low task
		synctest.Wait()
		st, gauge := queuedOf(t, k)
		if st != gauge {
			t.Errorf("Stats().Queued = %v, gauges %v, want equal", st, gauge)
		}
		if st != [3]int{1, 0, 1} {
			t.Errorf("Stats().Queued = %v, want [1 0 1] (the evicting task under Low's bound)", st)
		}
		g.open()
	})
}

// TestCapacityQueuedWithinBound: whatever the capacities, slots and submitters,
// every observation of Stats().Queued stays within Capacity, and agrees with the
// gauges.
func TestCapacityQueuedWithinBound(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			capa := [3]int{1 + r.IntN(3), 1 + r.IntN(3), 1 + r.IntN(3)}
			cfg := Config{
				MaxConcurrency: 1 + r.IntN(12), EvictLow: r.IntN(2) == 0, DegradeAt: 1,
				Capacity: ByPriority[int]{High: capa[0], Normal: capa[1], Low: capa[2]},
			}
			synctest.Test(t, func(t *testing.T) {
				k := newTestKernel(t, cfg)
				var wg sync.WaitGroup
				for s := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 30 {
							p := []Priority{High, Low, High, Normal}[(s+i)%4]
							_ = k.Go(context.Background(), Task{Priority: p, Run: yieldy})
						}
					}()
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				check := func() {
					st, _ := queuedOf(t, k)
					for l := range 3 {
						if st[l] > capa[l] {
							t.Fatalf("cfg %+v: Stats().Queued = %v beyond Capacity %v", cfg.Capacity, st, capa)
						}
					}
				}
				for {
					select {
					case <-done:
						synctest.Wait()
						check()
						if st, gauge := queuedOf(t, k); st != gauge || st != [3]int{} {
							t.Fatalf("idle: Stats().Queued = %v, gauges %v, want zeros", st, gauge)
						}
						return
					default:
					}
					check()
					runtimeGosched()
				}
			})
		})
	}
}

// TestCapacityQueuedCountsGroupWaits: a task of a group waiting for its key holds
// its priority's ticket, so Capacity counts it, and Stats().Queued shows it.
func TestCapacityQueuedCountsGroupWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{
			MaxConcurrency: 4, Capacity: ByPriority[int]{High: 2, Normal: 2, Low: 2},
			Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}},
		})
		g := make(gate)
		mustSubmit(t, k, Task{Group: "g", Key: "a", Run: g.run})
		h := mustSubmit(t, k, Task{Group: "g", Key: "a", Run: noop}) // waits for the key
		synctest.Wait()
		if st, gauge := queuedOf(t, k); st != [3]int{0, 1, 0} || gauge != st {
			t.Errorf("Stats().Queued = %v, gauges %v, want [0 1 0] (the task waiting for its key)", st, gauge)
		}
		h.Cancel()
		synctest.Wait()
		if st, _ := queuedOf(t, k); st != [3]int{} {
			t.Errorf("Stats().Queued after Cancel = %v, want zeros", st)
		}
		g.open()
	})
}

// TestCapacityWaiterWakesWhenAPickStarts: a submitter waiting for room gets the
// ticket of a pick ahead as soon as that pick starts, not once the run queue
// drained.
func TestCapacityWaiterWakesWhenAPickStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 8 slots: a lookahead of 2, both taken by the High tasks picked ahead.
		k := newTestKernel(t, Config{MaxConcurrency: 8, Capacity: ByPriority[int]{High: 2, Normal: 2, Low: 2}})
		var gates []gate
		for range 8 {
			g := make(gate)
			gates = append(gates, g)
			mustSubmit(t, k, Task{Priority: High, Run: g.run})
			synctest.Wait()
		}
		last := make(gate)
		defer last.open()
		mustSubmit(t, k, Task{Priority: High, Run: last.run})
		mustSubmit(t, k, Task{Priority: High, Run: last.run})
		synctest.Wait()
		admitted := make(chan error, 1)
		go func() {
			_, err := k.Submit(context.Background(), Task{Priority: High, Run: noop})
			admitted <- err
		}()
		synctest.Wait()
		select {
		case err := <-admitted:
			t.Fatalf("Submit() beyond Capacity.High = %v, want it to wait", err)
		default:
		}
		gates[0].open() // its slot takes the first pick ahead
		synctest.Wait()
		select {
		case err := <-admitted:
			if err != nil {
				t.Fatalf("Submit() = %v", err)
			}
		default:
			t.Fatal("Submit() still waits after a pick ahead started")
		}
		for _, g := range gates[1:] {
			g.open()
		}
	})
}
