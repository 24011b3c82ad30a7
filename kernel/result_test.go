package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

func TestResultInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{MaxResult: 8})
		var tooLarge, after error
		var keep context.Context
		h, err := k.Submit(context.Background(), kernel.Task{Run: func(ctx context.Context) error {
			if err := kernel.SetResult(ctx, []byte("first")); err != nil {
				return err
			}
			tooLarge = kernel.SetResult(ctx, []byte("123456789")) // 9 bytes > 8: refused, "first" kept
			keep = ctx
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Result(); got != nil {
			t.Fatalf("Result() before the end = %q, want nil", got)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("Wait() = %v, want nil: an oversized result does not fail the task", err)
		}
		if !errors.Is(tooLarge, kernel.ErrResultTooLarge) || !strings.Contains(tooLarge.Error(), "limit of 8 bytes") {
			t.Fatalf("SetResult(9 bytes) = %v, want ErrResultTooLarge naming the limit of 8 bytes", tooLarge)
		}
		if got := string(h.Result()); got != "first" {
			t.Fatalf("Result() = %q, want first", got)
		}
		after = kernel.SetResult(keep, []byte("late"))
		if after == nil || string(h.Result()) != "first" {
			t.Fatalf("SetResult after the end = %v, Result() = %q; want an error and first", after, h.Result())
		}
		if err := kernel.SetResult(context.Background(), []byte("x")); err == nil {
			t.Fatal("SetResult(context.Background()) = nil, want an error")
		}
	})
}

func TestResultOfLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{})
		n := 0
		fail := errors.New("boom")
		retry := &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond}
		h, err := k.Submit(context.Background(), kernel.Task{Retry: retry, Run: func(ctx context.Context) error {
			n++
			if n == 1 {
				_ = kernel.SetResult(ctx, []byte("attempt 1")) // dropped: attempt 2 ends the task
				return fail
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := h.Result(); got != nil {
			t.Fatalf("Result() = %q, want nil: the last attempt set none", got)
		}
		h2, _ := k.Submit(context.Background(), kernel.Task{Run: func(ctx context.Context) error {
			_ = kernel.SetResult(ctx, []byte("why"))
			return kernel.Permanent(fail)
		}})
		if err := h2.Wait(context.Background()); !errors.Is(err, fail) || string(h2.Result()) != "why" {
			t.Fatalf("failed task: Wait() = %v, Result() = %q; want boom and why", err, h2.Result())
		}
	})
}

func TestResultAndHistoryDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, Retry: kernel.ByPriority[kernel.RetryPolicy]{Normal: kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond}}})
		calls := 0
		if err := k.Register("res", func(ctx context.Context, p []byte) error {
			calls++
			if calls == 1 {
				return errors.New("first attempt fails")
			}
			return kernel.SetResult(ctx, append([]byte("done:"), p...))
		}); err != nil {
			t.Fatal(err)
		}
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "res", Payload: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := string(h.Result()); got != "done:p" {
			t.Fatalf("Handle.Result() = %q, want done:p", got)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := stored(t, s, h.ID())
		if string(st.Result) != "done:p" {
			t.Fatalf("stored Result = %q, want done:p", st.Result)
		}
		if len(st.History) != 2 {
			t.Fatalf("stored History = %+v, want 2 attempts", st.History)
		}
		a1, a2 := st.History[0], st.History[1]
		if a1.Number != 1 || a1.Outcome != store.Failed || a1.Error != "first attempt fails" || a1.Start.IsZero() || a1.End.Before(a1.Start) {
			t.Fatalf("History[0] = %+v, want attempt 1 Failed with its error", a1)
		}
		if a2.Number != 2 || a2.Outcome != store.Succeeded || a2.Error != "" || a2.Start.Before(a1.End) {
			t.Fatalf("History[1] = %+v, want attempt 2 Succeeded after attempt 1", a2)
		}
	})
}

// TestHistoryRecordsInterrupted: a task the store holds Running when a kernel
// starts was interrupted: its attempt is recorded Abandoned with the next start,
// or with the dead letter when it was the last.
func TestHistoryRecordsInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		at := time.Now()
		running := func(id string, maxAttempts int) store.Change {
			return store.Change{Op: store.OpInsert, Task: store.StoredTask{
				ID: id, Kind: "k", State: store.Running, Attempt: 1,
				MaxAttempts: maxAttempts, Fence: 2, CreatedAt: at, UpdatedAt: at,
			}}
		}
		if _, err := s.Commit(context.Background(), []store.Change{running("again", 3), running("last", 1)}); err != nil {
			t.Fatal(err)
		}
		k := newTestKernel(t, kernel.Config{Store: s, Owner: "k2"})
		if err := k.Register("k", func(context.Context, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		again, last := stored(t, s, "again"), stored(t, s, "last")
		if h := again.History; again.State != store.Succeeded || len(h) != 2 || h[0].Number != 1 || h[0].Outcome != store.Abandoned ||
			!h[0].Start.Equal(at.Truncate(time.Millisecond)) || h[1].Number != 2 || h[1].Outcome != store.Succeeded {
			t.Errorf("again: %s, history %+v; want succeeded after attempt 1 abandoned and attempt 2 succeeded", again.State, h)
		}
		if h := last.History; last.State != store.Failed || len(h) != 1 || h[0].Number != 1 || h[0].Outcome != store.Abandoned {
			t.Errorf("last: %s, history %+v; want failed with attempt 1 abandoned", last.State, h)
		}
	})
}

// limitedStore is a MemoryStore that accepts results of at most 4 bytes.
type limitedStore struct{ *storekit.MemoryStore }

func (limitedStore) MaxResult() int { return 4 }

// TestResultStoreLimit: a store's lower limit lowers Config.MaxResult; a result
// over it is refused and the task still succeeds, stored without one.
func TestResultStoreLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := limitedStore{storekit.NewMemoryStore()}
		k := newTestKernel(t, kernel.Config{Store: s})
		var setErr error
		if err := k.Register("k", func(ctx context.Context, _ []byte) error {
			setErr = kernel.SetResult(ctx, []byte("12345"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(setErr, kernel.ErrResultTooLarge) || !strings.Contains(setErr.Error(), "limit of 4 bytes") {
			t.Fatalf("SetResult(5 bytes) = %v, want ErrResultTooLarge naming the limit of 4 bytes", setErr)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, s, h.ID()); st.State != store.Succeeded || st.Result != nil {
			t.Fatalf("stored = %s, result %q; want succeeded, none", st.State, st.Result)
		}
	})
}
