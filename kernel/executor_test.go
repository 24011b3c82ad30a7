package kernel

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/queue"
)

// TestNeedsWakeBoundsTheWaitForAWokenExecutor pins the wake-up policy: one
// executor on its way at a time while it arrives promptly, another once it is
// overdue (its thread held back), none while the run queue is empty.
func TestNeedsWakeBoundsTheWaitForAWokenExecutor(t *testing.T) {
	var q runq
	for l := range q.rings {
		q.rings[l], _ = queue.NewRing[ritem](4)
	}
	const t0 = int64(time.Second)

	if q.needsWake(t0) {
		t.Error("needsWake with an empty run queue = true, want false")
	}
	_ = q.rings[queue.Normal].Push(ritem{a: &attempt{}})
	if !q.needsWake(t0) {
		t.Error("needsWake with work waiting and nobody coming = false, want true")
	}
	q.coming, q.wokenAt = 1, t0
	if q.needsWake(t0 + overdue) {
		t.Errorf("needsWake %v after a wake-up = true, want false (not overdue yet)", time.Duration(overdue))
	}
	if !q.needsWake(t0 + overdue + 1) {
		t.Errorf("needsWake just past %v after a wake-up = false, want true (overdue)", time.Duration(overdue))
	}
	// The fast lane waits less for an executor on its way: it is open only
	// while the load is light.
	if q.needsWakeWithin(t0+fastOverdue, fastOverdue) {
		t.Errorf("needsWakeWithin %v after a wake-up = true, want false", time.Duration(fastOverdue))
	}
	if !q.needsWakeWithin(t0+fastOverdue+1, fastOverdue) {
		t.Errorf("needsWakeWithin just past %v after a wake-up = false, want true", time.Duration(fastOverdue))
	}
}

// TestBlockingWorkAfterShortWorkGetsEveryExecutor: executors that kept popping
// short tasks damp the wake-up chain (runq.chainWake); when the next tasks all
// block, the loop's stall check wakes the executors they need, so the limit is
// reached.
func TestBlockingWorkAfterShortWorkGetsEveryExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 8
		k := newTestKernel(t, Config{MaxConcurrency: limit})
		for range 2000 {
			if err := k.TryGo(Task{Run: noop}); err != nil {
				t.Fatal(err)
			}
		}
		g := make(gate)
		for range limit {
			if err := k.TryGo(Task{Run: g.run}); err != nil {
				t.Fatal(err)
			}
		}
		advance(time.Millisecond)
		if st := k.Stats(); st.Running != limit {
			t.Fatalf("running %d of %d blocking tasks after 1 ms (executors %d), want all; %+v", st.Running, limit, st.Executors, st)
		}
		g.open()
	})
}

// TestRunQueueRefilledAsItRunsLow: executors that finish take their next task
// from the run queue and poke the parked loop only once it runs low; the loop
// still keeps every slot busy, so 500 tasks of 1 ms on 16 slots take ~32 ms.
func TestRunQueueRefilledAsItRunsLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots, n = 16, 500
		k := newTestKernel(t, Config{MaxConcurrency: slots})
		start := time.Now()
		for range n {
			if err := k.TryGo(Task{Run: stubborn(time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 1000 && k.Stats().ByPriority.Normal.Succeeded < n; i++ {
			advance(time.Millisecond)
		}
		if el, want := time.Since(start), time.Duration(n/slots+2)*time.Millisecond; el > want {
			t.Fatalf("%d tasks of 1 ms on %d slots took %v, want at most %v (slots idled)", n, slots, el, want)
		}
	})
}

// TestLookaheadCoversTheSlotsOfALargeKernel pins lookaheadOf: a small kernel
// keeps near-exact picking order (a quarter of its slots ahead, none with up to
// 3), a large one holds about as many picks ahead as it has slots, so that a
// bunch of completions does not empty its run queue before the loop refills it.
func TestLookaheadCoversTheSlotsOfALargeKernel(t *testing.T) {
	for _, c := range []struct{ slots, want int }{
		{1, 0}, {3, 0}, {4, 1}, {16, 4}, {21, 5}, {22, 6}, {50, 34}, {500, 484}, {1040, 1024}, {100_000, maxLookahead},
	} {
		if got := lookaheadOf(c.slots); got != c.want {
			t.Errorf("lookaheadOf(%d) = %d, want %d", c.slots, got, c.want)
		}
	}
	prev := 0
	for s := 1; s <= 2*maxLookahead; s++ {
		got := lookaheadOf(s)
		if got < prev || got > s {
			t.Fatalf("lookaheadOf(%d) = %d after %d: want non-decreasing and at most the slots", s, got, prev)
		}
		prev = got
	}
}

// TestRunQueueHoldsTheLookahead checks that the loop fills the run queue to the
// slots plus the lookahead while tasks wait, and no further.
func TestRunQueueHoldsTheLookahead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots, n = 100, 1000
		k := newTestKernel(t, Config{MaxConcurrency: slots})
		g := make(gate)
		for range n {
			if err := k.TryGo(Task{Run: g.run}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		q := &k.rq
		q.mu.Lock()
		running, queued := q.running, q.queued()
		q.mu.Unlock()
		if want := lookaheadOf(slots); running != slots || queued != want {
			t.Errorf("running %d, run queue %d; want %d and %d", running, queued, slots, want)
		}
		g.open()
	})
}
