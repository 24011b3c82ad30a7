package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/axsched/ax/internal/axtest"
)

// holdWorkers fills every worker of ex with a Low task that waits for the
// returned release func, and returns once all of them run.
func holdWorkers(t *testing.T, ex Executor, conc int) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var running sync.WaitGroup
	running.Add(conc)
	for range conc {
		err := ex.Submit(Task{Priority: Low, Run: func(context.Context) error {
			running.Done()
			<-gate
			return nil
		}})
		if err != nil {
			t.Fatalf("Submit(holder) = %v, want nil", err)
		}
	}
	all := make(chan struct{})
	go func() {
		running.Wait()
		close(all)
	}()
	axtest.WaitOrTimeout(t, all, "every worker running a holder")
	return func() { close(gate) }
}

func TestPrioPoolRunsHighBeforeQueuedLow(t *testing.T) {
	ex := Emulate(newPrioPool(1, 64, false))
	release := holdWorkers(t, ex, 1)
	var mu sync.Mutex
	var order []string // guarded by mu
	submit := func(pr Priority, name string) {
		err := ex.Submit(Task{Priority: pr, Run: func(context.Context) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return nil
		}})
		if err != nil {
			t.Fatalf("Submit(%s) = %v, want nil", name, err)
		}
	}
	// Low work queued first, then Normal, then High, behind the one busy worker.
	for i := range 5 {
		submit(Low, fmt.Sprintf("low%d", i))
	}
	submit(Normal, "normal")
	submit(High, "high")
	release()
	ex.Wait()
	ex.Close()
	want := []string{"high", "normal", "low0", "low1", "low2", "low3", "low4"}
	if !slices.Equal(order, want) {
		t.Errorf("start order = %v, want %v", order, want)
	}
}

func TestPrioPoolStarvesLowWhileHighSaturates(t *testing.T) {
	tests := []struct {
		name string
		conc int // workers, and chains of High tasks keeping them busy
	}{
		{"one worker", 1},
		{"three workers", 3},
	}
	const chainLen = 200
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := Emulate(newPrioPool(tt.conc, 64, false))
			release := holdWorkers(t, ex, tt.conc)
			total := int64(tt.conc * chainLen)
			var highStarted atomic.Int64
			lowSaw := int64(-1) // High tasks started when Low started; read after Wait
			if err := ex.Submit(Task{Priority: Low, Run: func(context.Context) error {
				lowSaw = highStarted.Load()
				return nil
			}}); err != nil {
				t.Fatalf("Submit(low) = %v, want nil", err)
			}
			// Each chain's task submits its successor before it ends, so a
			// freed worker always finds High work; the chains' last tasks wait
			// for each other, so no chain ends while another still runs.
			var last sync.WaitGroup
			last.Add(tt.conc)
			var link func(k int) func(context.Context) error
			link = func(k int) func(context.Context) error {
				return func(context.Context) error {
					highStarted.Add(1)
					if k == chainLen-1 {
						last.Done()
						last.Wait()
						return nil
					}
					return ex.Submit(Task{Priority: High, Run: link(k + 1)})
				}
			}
			for range tt.conc {
				if err := ex.Submit(Task{Priority: High, Run: link(0)}); err != nil {
					t.Fatalf("Submit(high) = %v, want nil", err)
				}
			}
			release()
			done := make(chan struct{})
			go func() {
				ex.Wait()
				ex.Close()
				close(done)
			}()
			axtest.WaitOrTimeout(t, done, "Wait")
			if got := highStarted.Load(); got != total {
				t.Fatalf("High tasks started = %d, want %d", got, total)
			}
			if lowSaw != total {
				t.Errorf("Low started after %d High tasks, want after all %d", lowSaw, total)
			}
		})
	}
}

func TestPrioPoolNonBlockingRefusesPerPriority(t *testing.T) {
	p := newPrioPool(1, 2, true)
	ex := Emulate(p)
	release := holdWorkers(t, ex, 1)
	noop := func(context.Context) error { return nil }
	for i := range 2 {
		if err := ex.Submit(Task{Priority: Low, Run: noop}); err != nil {
			t.Fatalf("Submit(low %d) = %v, want nil", i, err)
		}
	}
	if err := ex.Submit(Task{Priority: Low, Run: noop}); !errors.Is(err, ErrRejected) {
		t.Errorf("Submit(low into a full channel) = %v, want ErrRejected", err)
	}
	if err := ex.Submit(Task{Priority: High, Run: noop}); err != nil {
		t.Errorf("Submit(high beside a full Low channel) = %v, want nil", err)
	}
	release()
	ex.Wait()
	ex.Close()
}
