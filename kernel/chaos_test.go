package kernel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestChaosAccounting submits a large mix of tasks of which 20 % panic, 10 % outlive
// their timeout ignoring their context and 10 % fail on all 3 attempts, and checks
// that every task reaches exactly one terminal state and every count adds up.
func TestChaosAccounting(t *testing.T) {
	n := 1_000_000
	if raceEnabled || testing.Short() {
		n = 100_000
	}
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{
			MaxConcurrency: 64,
			MaxZombies:     32,
			ZombieGrace:    time.Hour,
			RetryBudget:    RetryBudget{Disabled: true},
			Capacity:       ByPriority[int]{High: 5_000, Normal: 5_000, Low: 5_000},
			DegradeAt:      1,
		})
		boom := errors.New("boom")
		var (
			mu                                   sync.Mutex
			accepted                             []*Handle
			kinds                                []uint8
			rejected, panicsIn, timeoutsIn, fail atomic.Int64
		)
		const submitters = 4
		var wg sync.WaitGroup
		for s := range submitters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := s; i < n; i += submitters {
					kind := uint8(i % 10) // 0,1: panic; 2: timeout; 3: fail; else ok
					task := Task{Priority: Priority(1 + i%3)}
					switch kind {
					case 0, 1:
						task.Run = func(context.Context) error { panic("chaos") }
					case 2:
						task.Timeout = 5 * time.Millisecond
						task.Retry = &RetryPolicy{MaxAttempts: 1}
						task.Run = stubborn(20 * time.Millisecond)
					case 3:
						task.Retry = &RetryPolicy{MaxAttempts: 3, Base: time.Millisecond}
						task.Run = func(context.Context) error { return boom }
					default:
						task.Run = noop
					}
					h, err := k.TrySubmit(task)
					if err != nil {
						if !errors.Is(err, ErrQueueFull) {
							t.Errorf("TrySubmit() = %v", err)
						}
						rejected.Add(1)
						// Let the kernel drain a little (virtual time) before the next submission.
						<-time.After(time.Millisecond)
						continue
					}
					switch kind {
					case 0, 1:
						panicsIn.Add(1)
					case 2:
						timeoutsIn.Add(1)
					case 3:
						fail.Add(1)
					}
					mu.Lock()
					accepted = append(accepted, h)
					kinds = append(kinds, kind)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		states := waitAll(t, accepted)
		synctest.Wait()
		st := k.Stats()
		var sum PriorityStats
		for _, p := range []PriorityStats{st.ByPriority.High, st.ByPriority.Normal, st.ByPriority.Low} {
			sum.Submitted += p.Submitted
			sum.Succeeded += p.Succeeded
			sum.Failed += p.Failed
			sum.TimedOut += p.TimedOut
			sum.Rejected += p.Rejected
			sum.Canceled += p.Canceled
			sum.Panics += p.Panics
			sum.Retried += p.Retried
		}
		total := int64(n)
		if got := int64(sum.Submitted + sum.Rejected); got != total {
			t.Errorf("submitted %d + rejected %d = %d, want %d", sum.Submitted, sum.Rejected, got, total)
		}
		if got := int64(sum.Succeeded + sum.Failed + sum.TimedOut + sum.Canceled + sum.Rejected); got != total {
			t.Errorf("succeeded+failed+timed out+canceled+rejected = %d, want %d (lost %d)", got, total, total-got)
		}
		if int64(sum.Rejected) != rejected.Load() {
			t.Errorf("Stats rejected = %d, callers saw %d", sum.Rejected, rejected.Load())
		}
		if int64(sum.Panics) != panicsIn.Load() {
			t.Errorf("panics recovered = %d, injected %d", sum.Panics, panicsIn.Load())
		}
		if int64(sum.TimedOut) != timeoutsIn.Load() || int64(states[TimedOut]) != timeoutsIn.Load() {
			t.Errorf("timed out = %d (handles %d), want %d", sum.TimedOut, states[TimedOut], timeoutsIn.Load())
		}
		if int64(sum.Failed) != panicsIn.Load()+fail.Load() {
			t.Errorf("failed = %d, want %d", sum.Failed, panicsIn.Load()+fail.Load())
		}
		if int64(sum.Retried) != 2*fail.Load() {
			t.Errorf("retried = %d, want %d", sum.Retried, 2*fail.Load())
		}
		for i, h := range accepted {
			want := Succeeded
			switch kinds[i] {
			case 0, 1, 3:
				want = Failed
			case 2:
				want = TimedOut
			}
			if h.State() != want {
				t.Fatalf("task kind %d ended %v, want %v", kinds[i], h.State(), want)
			}
		}
		// Timed-out functions past the zombie cap hold their slots until they return.
		for st.Running != 0 || st.Zombies != 0 {
			<-time.After(time.Millisecond)
			st = k.Stats()
		}
		t.Logf("%d tasks: %d accepted, %d rejected, states %v", n, len(accepted), rejected.Load(), states)
	})
}
