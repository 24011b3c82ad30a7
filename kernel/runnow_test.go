package kernel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// The RunNow tests never advance the bubble's clock: a task they start waited an
// hour, so it runs at the bubble's start time only if RunNow moved it.

// TestRunNowDelayed: a task delayed by an hour runs at once after RunNow, and
// RunNow counts it.
func TestRunNowDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{})
		start := time.Now()
		var ranAt time.Time
		h, err := k.TrySubmit(kernel.Task{ID: "job", Delay: time.Hour, Run: func(context.Context) error {
			ranAt = time.Now()
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := h.State(); s != kernel.Delayed {
			t.Fatalf("before RunNow: state %v, want Delayed", s)
		}
		if n, err := k.RunNow(context.Background(), "job"); n != 1 || err != nil {
			t.Fatalf("RunNow(job) = %d, %v; want 1, nil", n, err)
		}
		synctest.Wait()
		if s := h.State(); s != kernel.Succeeded || !ranAt.Equal(start) {
			t.Fatalf("after RunNow: state %v, ran at +%v; want Succeeded at +0", s, ranAt.Sub(start))
		}
	})
}

// TestRunNowRetrying: a task waiting an hour for its retry runs its second attempt
// at once after RunNow.
func TestRunNowRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{RetryBudget: kernel.RetryBudget{Disabled: true}})
		start := time.Now()
		calls := 0
		h, err := k.TrySubmit(kernel.Task{
			ID:    "job",
			Retry: &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Hour, BackoffFunc: func(int, error) time.Duration { return time.Hour }},
			Run: func(context.Context) error {
				calls++
				if calls == 1 {
					return errors.New("flaky")
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s, a := h.State(), h.Attempts(); s != kernel.Retrying || a != 1 {
			t.Fatalf("before RunNow: state %v, attempts %d; want Retrying, 1", s, a)
		}
		if n, err := k.RunNow(context.Background(), "job"); n != 1 || err != nil {
			t.Fatalf("RunNow(job) = %d, %v; want 1, nil", n, err)
		}
		synctest.Wait()
		if s, a := h.State(), h.Attempts(); s != kernel.Succeeded || a != 2 || time.Since(start) != 0 {
			t.Fatalf("after RunNow: state %v, attempts %d at +%v; want Succeeded, 2 at +0", s, a, time.Since(start))
		}
	})
}

// TestRunNowQueuedAndRunning: RunNow counts a queued task and moves a delayed one of
// the same ID, both then waiting for the one slot; a running task is not counted.
func TestRunNowQueuedAndRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{MaxConcurrency: 1})
		ctx := context.Background()
		start := time.Now()
		busy := make(gate)
		mustSubmit := func(task kernel.Task) *kernel.Handle {
			t.Helper()
			h, err := k.TrySubmit(task)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		hBusy := mustSubmit(kernel.Task{ID: "busy", Run: busy.run})
		synctest.Wait()
		hQueued := mustSubmit(kernel.Task{ID: "job", Run: func(context.Context) error { return nil }})
		hDelayed := mustSubmit(kernel.Task{ID: "job", Delay: time.Hour, Run: func(context.Context) error { return nil }})
		synctest.Wait()
		if n, err := k.RunNow(ctx, "job"); n != 2 || err != nil {
			t.Fatalf("RunNow(job) = %d, %v; want 2, nil", n, err)
		}
		if n, err := k.RunNow(ctx, "busy"); n != 0 || err != nil {
			t.Fatalf("RunNow(busy) = %d, %v; want 0, nil (running)", n, err)
		}
		synctest.Wait()
		if sq, sd := hQueued.State(), hDelayed.State(); sq != kernel.Queued || sd != kernel.Queued {
			t.Fatalf("behind the busy slot: queued %v, delayed %v; want both Queued", sq, sd)
		}
		busy.open()
		synctest.Wait()
		for name, h := range map[string]*kernel.Handle{"busy": hBusy, "queued": hQueued, "delayed": hDelayed} {
			if s := h.State(); s != kernel.Succeeded || time.Since(start) != 0 {
				t.Errorf("%s: state %v at +%v; want Succeeded at +0", name, s, time.Since(start))
			}
		}
	})
}

// TestRunNowUnknown: RunNow of an ID no live task has (never submitted, or ended)
// returns ErrUnknownTask; an empty ID is an error of its own.
func TestRunNowUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{})
		ctx := context.Background()
		if n, err := k.RunNow(ctx, "nobody"); n != 0 || !errors.Is(err, kernel.ErrUnknownTask) {
			t.Errorf("RunNow(nobody) = %d, %v; want 0, ErrUnknownTask", n, err)
		}
		h, err := k.TrySubmit(kernel.Task{ID: "done", Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := k.RunNow(ctx, "done"); n != 0 || !errors.Is(err, kernel.ErrUnknownTask) {
			t.Errorf("RunNow(done) = %d, %v; want 0, ErrUnknownTask", n, err)
		}
		if _, err := k.RunNow(ctx, ""); err == nil || errors.Is(err, kernel.ErrUnknownTask) {
			t.Errorf(`RunNow("") = %v; want an error about the empty id`, err)
		}
		_ = k.Close()
		if _, err := k.RunNow(ctx, "nobody"); !errors.Is(err, kernel.ErrClosed) {
			t.Errorf("RunNow after Close = %v; want ErrClosed", err)
		}
	})
}

// TestRunNowGroup: a delayed task of a group goes through the group's gate when
// RunNow moves it: it waits for its key's permit, then runs, without the hour.
func TestRunNowGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{Groups: map[string]kernel.GroupConfig{
			"api": {PerKey: kernel.Limits{Concurrency: 1}},
		}})
		start := time.Now()
		busy := make(gate)
		if _, err := k.TrySubmit(kernel.Task{Group: "api", Key: "host", Run: busy.run}); err != nil {
			t.Fatal(err)
		}
		h, err := k.TrySubmit(kernel.Task{ID: "job", Group: "api", Key: "host", Delay: time.Hour, Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n, err := k.RunNow(context.Background(), "job"); n != 1 || err != nil {
			t.Fatalf("RunNow(job) = %d, %v; want 1, nil", n, err)
		}
		synctest.Wait()
		if s := h.State(); s != kernel.Queued {
			t.Fatalf("while its key is busy: state %v, want Queued (held by the gate)", s)
		}
		busy.open()
		synctest.Wait()
		if s := h.State(); s != kernel.Succeeded || time.Since(start) != 0 {
			t.Fatalf("after its key freed: state %v at +%v; want Succeeded at +0", s, time.Since(start))
		}
	})
}

// TestRunNowDurable: a durable task delayed by an hour, or waiting an hour for its
// retry, moves in memory and in the store (its RunAt becomes now, so a restart
// finds it due), then runs at once, its retry as the same second attempt.
func TestRunNowDurable(t *testing.T) {
	for _, retrying := range []bool{false, true} {
		t.Run(map[bool]string{false: "delayed", true: "retrying"}[retrying], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore()
				hour := kernel.RetryPolicy{MaxAttempts: 3, BackoffFunc: func(int, error) time.Duration { return time.Hour }}
				k := newTestKernel(t, kernel.Config{
					Store: s, Owner: "a", MaxConcurrency: 1,
					Retry: kernel.ByPriority[kernel.RetryPolicy]{High: hour, Normal: hour, Low: hour},
				})
				ctx := context.Background()
				start := time.Now()
				runs := 0
				_ = k.Register("k", func(context.Context, []byte) error {
					if runs++; retrying && runs == 1 {
						return errors.New("flaky")
					}
					return nil
				})
				task := kernel.DurableTask{Kind: "k", Delay: time.Hour}
				want := kernel.Delayed
				if retrying {
					task.Delay, want = 0, kernel.Retrying
				}
				h, err := k.SubmitDurable(ctx, task)
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				busy := make(gate) // holds the one slot: the task moved waits, queued
				if _, err := k.TrySubmit(kernel.Task{Run: busy.run}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if s := h.State(); s != want {
					t.Fatalf("before RunNow: state %v, want %v", s, want)
				}
				if n, err := k.RunNow(ctx, h.ID()); n != 1 || err != nil {
					t.Fatalf("RunNow() = %d, %v; want 1, nil", n, err)
				}
				st, err := s.Get(ctx, h.ID())
				if err != nil {
					t.Fatal(err)
				}
				if !st.RunAt.Equal(start) || st.State != want {
					t.Fatalf("stored: RunAt +%v, state %v; want +0, %v (waiting for the slot)", st.RunAt.Sub(start), st.State, want)
				}
				busy.open()
				synctest.Wait()
				wantRuns := map[bool]int{false: 1, true: 2}[retrying]
				if s, a := h.State(), h.Attempts(); s != kernel.Succeeded || a != wantRuns || runs != wantRuns || time.Since(start) != 0 {
					t.Fatalf("state %v, attempts %d, runs %d at +%v; want Succeeded, %d, %d at +0", s, a, runs, time.Since(start), wantRuns, wantRuns)
				}
			})
		})
	}
}

// TestRunNowPool: a delayed task waiting in the shared pool runs at once after
// RunNow, called by the kernel that put it there or by another one on the store
// (which does not follow it); an unknown ID is ErrUnknownTask there too.
func TestRunNowPool(t *testing.T) {
	for _, by := range []string{"a", "b"} {
		t.Run("by "+by, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore()
				log := newRunLog()
				ctx := context.Background()
				start := time.Now()
				a := newTestKernel(t, kernel.Config{Store: s, Owner: "a", Lease: sharedLease})
				b := newTestKernel(t, kernel.Config{Store: s, Owner: "b", Lease: sharedLease})
				_ = a.Register("k", log.fn("a", nil))
				_ = b.Register("k", log.fn("b", nil))
				h, err := a.SubmitDurable(ctx, kernel.DurableTask{Kind: "k", Payload: []byte("job"), Delay: time.Hour, Pool: true})
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				k := map[string]*kernel.Kernel{"a": a, "b": b}[by]
				if n, err := k.RunNow(ctx, h.ID()); n != 1 || err != nil {
					t.Fatalf("RunNow() = %d, %v; want 1, nil", n, err)
				}
				synctest.Wait()
				if n := log.count("job"); n != 1 || time.Since(start) != 0 {
					t.Fatalf("ran %d times at +%v; want once at +0", n, time.Since(start))
				}
				if n, err := k.RunNow(ctx, "nobody"); n != 0 || !errors.Is(err, kernel.ErrUnknownTask) {
					t.Errorf("RunNow(nobody) = %d, %v; want 0, ErrUnknownTask", n, err)
				}
			})
		})
	}
}

// TestRunNowRecovered: a recovered durable task, delayed by an hour, is made due by
// RunNow while it waits for its kind's Register (held), for room in its bucket (the
// backlog) or in the timer; it then runs at once, and its stored RunAt is now.
func TestRunNowRecovered(t *testing.T) {
	for _, where := range []string{"held", "backlog", "timer"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storekit.NewMemoryStore()
				ctx := context.Background()
				log := newRunLog()
				first := newTestKernel(t, kernel.Config{Store: s, Owner: "a"})
				_ = first.Register("k", log.fn("first", nil))
				h, err := first.SubmitDurable(ctx, kernel.DurableTask{Kind: "k", Payload: []byte("job"), Delay: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				cfg := kernel.Config{Store: s, Owner: "a"}
				if where == "backlog" {
					cfg.Capacity = kernel.ByPriority[int]{High: 1, Normal: 1, Low: 1}
				}
				k := newTestKernel(t, cfg)
				if where == "backlog" {
					// The one ticket of Normal, held by a filler: the recovered task waits for it.
					if _, err := k.TrySubmit(kernel.Task{ID: "filler", Delay: 2 * time.Hour, Run: func(context.Context) error { return nil }}); err != nil {
						t.Fatal(err)
					}
				}
				if where != "held" {
					_ = k.Register("k", log.fn("second", nil))
				}
				synctest.Wait()
				if n, err := k.RunNow(ctx, h.ID()); n != 1 || err != nil {
					t.Fatalf("RunNow() = %d, %v; want 1, nil", n, err)
				}
				// Due now in the store too, unless it started already (its start is stored).
				if st, err := s.Get(ctx, h.ID()); err != nil || st.State == kernel.Delayed && !st.RunAt.Equal(start) {
					t.Fatalf("stored: RunAt +%v, state %v, %v; want +0 while delayed", st.RunAt.Sub(start), st.State, err)
				}
				switch where {
				case "held":
					_ = k.Register("k", log.fn("second", nil))
				case "backlog":
					if n, err := k.Cancel(ctx, "filler"); n != 1 || err != nil {
						t.Fatalf("Cancel(filler) = %d, %v", n, err)
					}
				}
				synctest.Wait()
				if n := log.count("job"); n != 1 || time.Since(start) != 0 {
					t.Fatalf("ran %d times at +%v; want once at +0", n, time.Since(start))
				}
			})
		})
	}
}
