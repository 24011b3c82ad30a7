package kernel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
)

// TestStatsRunningDelayedDegraded: Stats counts the running and the delayed tasks
// of each priority, and tells when only High is admitted.
func TestStatsRunningDelayedDegraded(t *testing.T) {
	k := newTestKernel(t, kernel.Config{
		MaxConcurrency: 6, Capacity: kernel.ByPriority[int]{High: 10, Normal: 10, Low: 10}, DegradeAt: 0.2, // degraded at 6 waiting
	})
	g := make(gate)
	defer g.open()
	for _, p := range []kernel.Priority{kernel.High, kernel.High, kernel.Low, kernel.Normal, kernel.Low, kernel.Low} {
		if _, err := k.TrySubmit(kernel.Task{Priority: p, Run: g.run}); err != nil {
			t.Fatal(err)
		}
	}
	axtest.Eventually(t, func() bool { return k.Stats().Running == 6 }, "six running")
	st := k.Stats()
	if r := st.ByPriority; r.High.Running != 2 || r.Normal.Running != 1 || r.Low.Running != 3 {
		t.Errorf("running by priority = %d, %d, %d; want 2, 1, 3", r.High.Running, r.Normal.Running, r.Low.Running)
	}
	if st.Degraded {
		t.Errorf("Degraded with no task waiting")
	}
	for i := range 6 {
		p := []kernel.Priority{kernel.Normal, kernel.Low}[i%2]
		if _, err := k.TrySubmit(kernel.Task{Priority: p, Delay: time.Hour, Run: g.run}); err != nil {
			t.Fatal(err)
		}
	}
	axtest.Eventually(t, func() bool { return k.Stats().Delayed == 6 }, "six delayed")
	st = k.Stats()
	if d := st.ByPriority; d.High.Delayed != 0 || d.Normal.Delayed != 3 || d.Low.Delayed != 3 {
		t.Errorf("delayed by priority = %d, %d, %d; want 0, 3, 3", d.High.Delayed, d.Normal.Delayed, d.Low.Delayed)
	}
	if !st.Degraded {
		t.Errorf("not Degraded with 6 of 30 waiting at DegradeAt 0.2")
	}
	if _, err := k.TrySubmit(kernel.Task{Priority: kernel.Low, Run: g.run}); !errors.Is(err, kernel.ErrDegraded) {
		t.Errorf("TrySubmit(Low) while Degraded = %v, want ErrDegraded", err)
	}
}

// TestStatsPaused: Stats lists what is paused, in the order it was, once each,
// and forgets what was resumed; a refused pause is not listed.
func TestStatsPaused(t *testing.T) {
	k := newTestKernel(t, kernel.Config{Groups: map[string]kernel.GroupConfig{"hosts": {}}})
	if p := k.Stats().Paused; p != nil {
		t.Fatalf("Paused = %v, want nil", p)
	}
	sels := []kernel.Selector{
		{Priority: kernel.Low},
		{Group: "hosts", Key: "a.example"},
		{Kind: "mail"},
		{Group: "hosts"},
		{Priority: kernel.Normal},
	}
	for _, s := range append(sels, sels[0], sels[3]) {
		if err := k.Pause(s); err != nil {
			t.Fatalf("Pause(%v) = %v", s, err)
		}
	}
	if got := k.Stats().Paused; !slices.Equal(got, sels) {
		t.Fatalf("Paused = %v, want %v", got, sels)
	}
	for _, s := range []kernel.Selector{sels[1], {Priority: kernel.Normal}, {Group: "hosts", Key: "never-paused"}} {
		if err := k.Resume(s); err != nil {
			t.Fatalf("Resume(%v) = %v", s, err)
		}
	}
	if got, want := k.Stats().Paused, []kernel.Selector{sels[0], sels[2], sels[3]}; !slices.Equal(got, want) {
		t.Fatalf("Paused after resumes = %v, want %v", got, want)
	}
	if err := k.Pause(kernel.Selector{Group: "nope"}); err == nil {
		t.Fatalf("Pause of an unknown group = nil, want an error")
	}
	if got := k.Stats().Paused; len(got) != 3 {
		t.Fatalf("Paused after a refused pause = %v, want 3 selectors", got)
	}
}

// TestStatsRecent: the recent figures cover the span since the reading a Stats
// call kept a minute or more before (the first call keeps one and reports none),
// and the retry budget's use is the retries over those the budget allows in it.
func TestStatsRecent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{RetryBudget: kernel.RetryBudget{Ratio: 1e-9, MinPerSecond: 1, Window: time.Second}})
		run := func(p kernel.Priority, fails int) {
			t.Helper()
			n := 0
			h, err := k.TrySubmit(kernel.Task{
				Priority: p, Retry: &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond, Jitter: kernel.JitterNone},
				Run: func(context.Context) error {
					if n++; n <= fails {
						return errors.New("flaky")
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		run(kernel.High, 0) // before the first reading: never in a span
		st := k.Stats()
		if st.RecentSpan != 0 || st.ByPriority.High.WaitRecent.Count != 0 || st.RetryBudgetUse != 0 {
			t.Fatalf("first Stats: RecentSpan %v, High's WaitRecent %+v, RetryBudgetUse %v; want zeros",
				st.RecentSpan, st.ByPriority.High.WaitRecent, st.RetryBudgetUse)
		}
		run(kernel.Low, 2) // one first attempt, two retries
		run(kernel.Low, 0)
		advance(10 * time.Second)
		st = k.Stats()
		if st.RecentSpan < 10*time.Second || st.RecentSpan > 10*time.Second+100*time.Millisecond {
			t.Fatalf("RecentSpan = %v, want the 10 s advanced and the runs' few ms", st.RecentSpan)
		}
		if b := st.ByPriority; b.High.WaitRecent.Count != 0 || b.Low.WaitRecent.Count != 4 || b.Low.Wait.Count != 4 || b.High.Wait.Count != 1 {
			t.Errorf("recent waits High %d, Low %d (since start %d, %d); want 0, 4 (1, 4)",
				b.High.WaitRecent.Count, b.Low.WaitRecent.Count, b.High.Wait.Count, b.Low.Wait.Count)
		}
		// Two retries of the RecentSpan × 1/s the floor allows.
		if want := 2 / (1e-9*2 + st.RecentSpan.Seconds()); st.RetryBudgetUse < want*0.999 || st.RetryBudgetUse > want*1.001 {
			t.Errorf("RetryBudgetUse = %v, want %v", st.RetryBudgetUse, want)
		}
	})
}

// TestZombieInfoNamesTask: a zombie names its task's priority, group and key.
func TestZombieInfoNamesTask(t *testing.T) {
	k := newTestKernel(t, kernel.Config{Groups: map[string]kernel.GroupConfig{"hosts": {}}})
	release := make(chan struct{})
	defer close(release)
	if _, err := k.TrySubmit(kernel.Task{
		ID: "z", Priority: kernel.Low, Group: "hosts", Key: "a.example", Timeout: time.Millisecond,
		Retry: &kernel.RetryPolicy{MaxAttempts: 1}, Run: func(context.Context) error { <-release; return nil },
	}); err != nil {
		t.Fatal(err)
	}
	axtest.Eventually(t, func() bool { return len(k.Zombies()) == 1 }, "a zombie")
	z := k.Zombies()[0]
	if z.TaskID != "z" || z.Attempt != 1 || z.Priority != kernel.Low || z.Group != "hosts" || z.Key != "a.example" || z.Kind != "" {
		t.Errorf("Zombies()[0] = %+v, want z, attempt 1, Low, hosts/a.example, no kind", z)
	}
}
