package kernel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestCancelByID: Kernel.Cancel finds every live task of an ID, whatever its state
// (queued, delayed, retrying, running) and however it was submitted (with a
// Handle or fire-and-forget); each ends Canceled with ErrCanceled; tasks of other
// IDs run on; unknown and kernel-made IDs find nothing.
func TestCancelByID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{MaxConcurrency: 1, RetryBudget: kernel.RetryBudget{Disabled: true}})
		ctx := context.Background()
		running := make(gate)
		submit := func(task kernel.Task) *kernel.Handle {
			t.Helper()
			h, err := k.TrySubmit(task)
			if err != nil {
				t.Fatalf("TrySubmit(%q) = %v", task.ID, err)
			}
			return h
		}
		hRunning := submit(kernel.Task{ID: "job", Run: running.run})
		synctest.Wait()
		if s := hRunning.State(); s != kernel.Running {
			t.Fatalf("first task is %v, want Running", s)
		}
		hQueued := submit(kernel.Task{ID: "job", Run: func(context.Context) error { return nil }})
		hDelayed := submit(kernel.Task{ID: "job", Delay: time.Hour, Run: func(context.Context) error { return nil }})
		var goRan bool
		if err := k.TryGo(kernel.Task{ID: "job", Delay: time.Minute, Run: func(context.Context) error { goRan = true; return nil }}); err != nil {
			t.Fatal(err)
		}
		other := submit(kernel.Task{ID: "other", Delay: time.Second, Run: func(context.Context) error { return nil }})
		anon := submit(kernel.Task{Delay: time.Second, Run: func(context.Context) error { return nil }})
		synctest.Wait()

		n, err := k.Cancel(ctx, "job")
		if err != nil || n != 4 {
			t.Fatalf("Cancel(job) = %d, %v; want 4, nil", n, err)
		}
		for name, h := range map[string]*kernel.Handle{"running": hRunning, "queued": hQueued, "delayed": hDelayed} {
			if err := h.Wait(ctx); !errors.Is(err, kernel.ErrCanceled) || h.State() != kernel.Canceled {
				t.Errorf("%s task: Wait() = %v, state %v; want ErrCanceled, Canceled", name, err, h.State())
			}
		}
		if n, err := k.Cancel(ctx, "job"); n != 0 || err != nil {
			t.Errorf("Cancel(job) again = %d, %v; want 0, nil", n, err)
		}
		if n, err := k.Cancel(ctx, "nobody"); n != 0 || err != nil {
			t.Errorf("Cancel(nobody) = %d, %v; want 0, nil", n, err)
		}
		if n, err := k.Cancel(ctx, anon.ID()); n != 0 || err != nil {
			t.Errorf("Cancel(a kernel-made ID) = %d, %v; want 0, nil", n, err)
		}
		if _, err := k.Cancel(ctx, ""); err == nil {
			t.Error("Cancel(\"\") = nil error, want one")
		}
		advance(2 * time.Hour)
		if goRan {
			t.Error("the cancelled fire-and-forget task ran")
		}
		for _, h := range []*kernel.Handle{other, anon} {
			if err := h.Wait(ctx); err != nil {
				t.Errorf("task %s: Wait() = %v, want it to run", h.ID(), err)
			}
		}

		// A task waiting for its retry.
		fails := 0
		retrying := submit(kernel.Task{
			ID:    "retry",
			Retry: &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Hour, Jitter: kernel.JitterNone},
			Run:   func(context.Context) error { fails++; return errors.New("down") },
		})
		synctest.Wait()
		if s := retrying.State(); s != kernel.Retrying {
			t.Fatalf("retrying task is %v, want Retrying", s)
		}
		if n, err := k.Cancel(ctx, "retry"); n != 1 || err != nil {
			t.Fatalf("Cancel(retry) = %d, %v; want 1, nil", n, err)
		}
		if err := retrying.Wait(ctx); !errors.Is(err, kernel.ErrCanceled) || fails != 1 {
			t.Errorf("retrying task: Wait() = %v after %d attempts; want ErrCanceled after 1", err, fails)
		}

		var canceled uint64
		s := k.Stats()
		for _, p := range []kernel.Priority{kernel.High, kernel.Normal, kernel.Low} {
			canceled += s.ByPriority.Get(p).Canceled
		}
		if canceled != 5 {
			t.Errorf("Stats Canceled = %d, want 5", canceled)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Cancel(ctx, "job"); !errors.Is(err, kernel.ErrClosed) {
			t.Errorf("Cancel after Close = %v, want ErrClosed", err)
		}
	})
}

// TestCancelDurable: Kernel.Cancel finds durable tasks by their stored ID —
// submitted here, recovered and scheduled, and recovered but held for a kind not
// registered yet — and their rows are stored Canceled.
func TestCancelDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		now := time.Now()
		seed(t, s,
			store.StoredTask{ID: "rec-later", Kind: "rec", Payload: []byte("later"), State: kernel.Delayed, RunAt: now.Add(time.Hour), Fence: 1},
			store.StoredTask{ID: "rec-crashed", Kind: "rec", Payload: []byte("crashed"), State: kernel.Running, Attempt: 1, MaxAttempts: 3, Fence: 4},
			store.StoredTask{ID: "held", Kind: "unknown", State: kernel.Queued, Fence: 1, UniqueKey: "u"},
		)
		k := newTestKernel(t, kernel.Config{Store: s})
		ctx := context.Background()

		// Held for an unregistered kind: cancelled in the store, and its unique key free.
		if n, err := k.Cancel(ctx, "held"); n != 1 || err != nil {
			t.Fatalf("Cancel(held) = %d, %v; want 1, nil", n, err)
		}
		if held := k.Stats().Store.Held; held != 2 {
			t.Errorf("Held = %d after cancelling one of 3, want 2", held)
		}

		block := make(gate)
		if err := k.Register("rec", func(ctx context.Context, p []byte) error {
			if string(p) == "crashed" {
				return block.run(ctx)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		h, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "rec", Payload: []byte("new"), Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, id := range []string{"rec-later", "rec-crashed", h.ID()} {
			if n, err := k.Cancel(ctx, id); n != 1 || err != nil {
				t.Fatalf("Cancel(%s) = %d, %v; want 1, nil", id, n, err)
			}
		}
		if err := h.Wait(ctx); !errors.Is(err, kernel.ErrCanceled) {
			t.Errorf("submitted durable task: Wait() = %v, want ErrCanceled", err)
		}
		if _, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "rec", UniqueKey: "u"}); err != nil {
			t.Errorf("submit with the cancelled held task's unique key = %v, want it free", err)
		}
		if err := k.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"held", "rec-later", "rec-crashed", h.ID()} {
			if st := stored(t, s, id); st.State != kernel.Canceled {
				t.Errorf("%s stored %v, want Canceled", id, st.State)
			}
		}
	})
}
