package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/axsched/ax/store/storetest"
)

// The durable tests run in package kernel_test: package kernel cannot import storekit,
// which imports it.

// newTestKernel starts a kernel closed at the end of the test.
func newTestKernel(t testing.TB, cfg kernel.Config) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// gate is a task function that blocks until the gate opens or its context ends.
type gate chan struct{}

func (g gate) run(ctx context.Context) error {
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g gate) open() { close(g) }

// waitAll waits for every handle and returns the count per terminal state.
func waitAll(t testing.TB, hs []*kernel.Handle) map[kernel.State]int {
	t.Helper()
	out := map[kernel.State]int{}
	for _, h := range hs {
		<-h.Done()
		out[h.State()]++
	}
	return out
}

// advance moves a synctest bubble's virtual clock by d, then waits until every
// goroutine of the bubble is blocked. Only for use inside synctest.Test.
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// stored reads one task back from a store or fails the test.
func stored(t *testing.T, s store.Store, id string) store.StoredTask {
	t.Helper()
	st, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("store.Get(%q) = %v", id, err)
	}
	return st
}

// recorder is a durable kind that records its payloads.
type recorder struct {
	mu   sync.Mutex
	runs map[string]int
	at   map[string]time.Time
}

func newRecorder() *recorder {
	return &recorder{runs: map[string]int{}, at: map[string]time.Time{}}
}

func (r *recorder) run(_ context.Context, p []byte) error {
	r.mu.Lock()
	r.runs[string(p)]++
	if _, ok := r.at[string(p)]; !ok {
		r.at[string(p)] = time.Now()
	}
	r.mu.Unlock()
	return nil
}

func (r *recorder) count(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[p]
}

func TestDurableSubmitRunsAndJournals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{MaxConcurrency: 4, Store: s})
		rec := newRecorder()
		if err := k.Register("rec", rec.run); err != nil {
			t.Fatal(err)
		}
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "rec", Payload: []byte("p1"), Priority: kernel.High})
		if err != nil {
			t.Fatalf("SubmitDurable() = %v", err)
		}
		// Acknowledged: the insert is stored when SubmitDurable returns.
		if st := stored(t, s, h.ID()); st.Kind != "rec" || string(st.Payload) != "p1" || st.Priority != kernel.High {
			t.Fatalf("stored after ack = %+v", st)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("Wait() = %v", err)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := stored(t, s, h.ID())
		if st.State != kernel.Succeeded || st.Attempt != 1 || st.Fence != 2 || rec.count("p1") != 1 {
			t.Fatalf("stored = state %v attempt %d fence %d, runs %d; want succeeded/1/2/1", st.State, st.Attempt, st.Fence, rec.count("p1"))
		}
		if got := k.Stats().Store; got.Commits == 0 || got.Changes != 3 || got.Refused != 0 || got.Pending != 0 {
			t.Fatalf("Stats.Store = %+v, want 3 changes, none refused", got)
		}
	})
}

func TestDurableBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s})
		if err := k.Register("ok", func(context.Context, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			task  kernel.DurableTask
			field string
		}{
			{"unregistered", kernel.DurableTask{Kind: "nope"}, "DurableTask.Kind"},
			{"empty kind", kernel.DurableTask{}, "DurableTask.Kind"},
			{"negative delay", kernel.DurableTask{Kind: "ok", Delay: -1}, "DurableTask.Delay"},
			{"delay and at", kernel.DurableTask{Kind: "ok", Delay: 1, At: time.Now()}, "DurableTask.At"},
			{"negative attempts", kernel.DurableTask{Kind: "ok", MaxAttempts: -1}, "DurableTask.MaxAttempts"},
			{"long key", kernel.DurableTask{Kind: "ok", UniqueKey: strings.Repeat("k", store.UniqueKeyMax+1)}, "DurableTask.UniqueKey"},
			{"bad priority", kernel.DurableTask{Kind: "ok", Priority: 9}, "DurableTask.Priority"},
		} {
			_, err := k.SubmitDurable(context.Background(), tc.task)
			var ce *kernel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("%s: SubmitDurable() = %v, want a *ConfigError for %s", tc.name, err, tc.field)
			}
		}
		if n := k.Stats().Store.Changes; n != 0 {
			t.Fatalf("%d changes written for refused submits", n)
		}
		if err := k.Register("ok", func(context.Context, []byte) error { return nil }); err == nil {
			t.Fatal("second Register of a kind succeeded")
		}
		var ce *kernel.ConfigError
		if err := k.Register("", nil); !errors.As(err, &ce) || ce.Field != "Register: kind" {
			t.Fatalf("Register(\"\") = %v", err)
		}
		if err := k.Register("x", nil); !errors.As(err, &ce) || ce.Field != "Register: fn" {
			t.Fatalf("Register(nil fn) = %v", err)
		}
		plain := newTestKernel(t, kernel.Config{})
		if _, err := plain.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "ok"}); err == nil {
			t.Fatal("SubmitDurable without a store succeeded")
		}
	})
}

// cappedStore is a MemoryStore that announces a payload cap.
type cappedStore struct{ *storekit.MemoryStore }

func (cappedStore) MaxPayload() int { return 8 }

func TestDurablePayloadCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cappedStore{storekit.NewMemoryStore()}
		k := newTestKernel(t, kernel.Config{Store: s})
		_ = k.Register("ok", func(context.Context, []byte) error { return nil })
		_, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "ok", Payload: make([]byte, 9)})
		if !errors.Is(err, store.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "DurableTask.Payload") {
			t.Fatalf("SubmitDurable(9 bytes) = %v, want ErrPayloadTooLarge naming the field", err)
		}
		if k.Stats().Store.Changes != 0 {
			t.Fatal("rows written for an oversized payload")
		}
		if _, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "ok", Payload: make([]byte, 8)}); err != nil {
			t.Fatalf("SubmitDurable(8 bytes) = %v", err)
		}
	})
}

func TestDurableUniqueKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s})
		g := make(gate)
		_ = k.Register("wait", func(ctx context.Context, _ []byte) error { return g.run(ctx) })
		h1, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "wait", UniqueKey: "order-7"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "wait", UniqueKey: "order-7"}); !errors.Is(err, store.ErrDuplicateKey) {
			t.Fatalf("second submit with a live key = %v, want ErrDuplicateKey", err)
		}
		hs, err := k.SubmitDurableMany(context.Background(), []kernel.DurableTask{{Kind: "wait", UniqueKey: "a"}, {Kind: "wait", UniqueKey: "a"}})
		if !errors.Is(err, store.ErrDuplicateKey) || hs[0] == nil || hs[1] != nil || !strings.Contains(err.Error(), "DurableTask[1]") {
			t.Fatalf("SubmitDurableMany(same key twice) = %v, %v", hs, err)
		}
		g.open()
		if err := h1.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		h3, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "wait", UniqueKey: "order-7"})
		if err != nil {
			t.Fatalf("submit after the holder ended = %v", err)
		}
		if err := h3.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDurableRetriesAndDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, Retry: kernel.ByPriority[kernel.RetryPolicy]{Normal: kernel.RetryPolicy{Base: 10 * time.Millisecond, Jitter: kernel.JitterNone}}})
		var calls atomic.Int32
		_ = k.Register("flaky", func(context.Context, []byte) error {
			if calls.Add(1) < 3 {
				return errors.New("flaky")
			}
			return nil
		})
		_ = k.Register("bad", func(context.Context, []byte) error { return errors.New("always bad") })
		h1, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "flaky"})
		if err != nil {
			t.Fatal(err)
		}
		h2, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "bad", MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := h1.Wait(context.Background()); err != nil {
			t.Fatalf("flaky: %v", err)
		}
		if err := h2.Wait(context.Background()); err == nil {
			t.Fatal("bad succeeded")
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, s, h1.ID()); st.State != kernel.Succeeded || st.Attempt != 3 || st.LastError != "flaky" {
			t.Fatalf("flaky stored %+v", st)
		}
		st := stored(t, s, h2.ID())
		if st.State != kernel.Failed || st.Attempt != 2 || st.LastError != "always bad" {
			t.Fatalf("bad stored %+v", st)
		}
		if n, _ := s.CountDeadLetters(context.Background()); n != 1 {
			t.Fatalf("dead letters = %d, want 1", n)
		}
	})
}

func TestDurableRequeueRunsDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s})
		var fail atomic.Bool
		fail.Store(true)
		var runs atomic.Int32
		_ = k.Register("k", func(context.Context, []byte) error {
			runs.Add(1)
			if fail.Load() {
				return kernel.Permanent(errors.New("down"))
			}
			return nil
		})
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", UniqueKey: "once"})
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Wait(context.Background())
		advance(time.Millisecond) // the journal writes the dead letter
		dl, err := s.DeadLetters(context.Background(), 0, "")
		if err != nil || len(dl) != 1 || dl[0].ID != h.ID() {
			t.Fatalf("DeadLetters() = %v, %v", dl, err)
		}
		fail.Store(false)
		n, err := k.Requeue(context.Background(), h.ID(), "unknown-id")
		if err != nil || n != 1 {
			t.Fatalf("Requeue() = %d, %v; want 1", n, err)
		}
		advance(time.Millisecond)
		if runs.Load() != 2 {
			t.Fatalf("runs = %d after Requeue, want 2", runs.Load())
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, s, h.ID()); st.State != kernel.Succeeded || st.Attempt != 1 {
			t.Fatalf("requeued task stored %+v, want succeeded on its first new attempt", st)
		}
	})
}

// seed commits tasks to a store as a previous kernel would have left them: on a
// SharedStore, as the tasks of an owner that left.
func seed(t *testing.T, s store.Store, tasks ...store.StoredTask) {
	t.Helper()
	cs := make([]store.Change, len(tasks))
	for i, st := range tasks {
		if st.UpdatedAt.IsZero() {
			st.UpdatedAt = time.Now()
			st.CreatedAt = st.UpdatedAt
		}
		cs[i] = store.Change{Op: store.OpInsert, Task: st}
	}
	commit := s.Commit
	if ss, ok := s.(store.SharedStore); ok {
		o, err := ss.Join(context.Background(), "seed", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := ss.Leave(context.Background(), o); err != nil {
				t.Fatal(err)
			}
		}()
		commit = func(ctx context.Context, cs []store.Change) ([]error, error) { return ss.CommitAs(ctx, o, cs) }
	}
	res, err := commit(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != nil {
			t.Fatalf("seed %d: %v", i, r)
		}
	}
}

func TestDurableRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		now := time.Now()
		seed(t, s,
			store.StoredTask{ID: "queued", Kind: "rec", Payload: []byte("queued"), State: kernel.Queued, RunAt: now, Fence: 1},
			store.StoredTask{ID: "late", Kind: "rec", Payload: []byte("late"), State: kernel.Delayed, RunAt: now.Add(-time.Hour), Fence: 1},
			store.StoredTask{ID: "later", Kind: "rec", Payload: []byte("later"), State: kernel.Delayed, RunAt: now.Add(time.Minute), Fence: 1},
			store.StoredTask{ID: "crashed", Kind: "rec", Payload: []byte("crashed"), State: kernel.Running, Attempt: 1, MaxAttempts: 3, Fence: 5},
			store.StoredTask{ID: "spent", Kind: "rec", Payload: []byte("spent"), State: kernel.Running, Attempt: 2, MaxAttempts: 2, Fence: 7, UniqueKey: "u"},
			store.StoredTask{ID: "other", Kind: "unknown", State: kernel.Queued, Fence: 1},
		)
		k := newTestKernel(t, kernel.Config{Store: s})
		if held := k.Stats().Store.Held; held != 6 {
			t.Fatalf("Held = %d before Register, want 6", held)
		}
		// A recovered live unique key is held.
		_ = k.Register("noop", func(context.Context, []byte) error { return nil })
		if _, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "noop", UniqueKey: "u"}); !errors.Is(err, store.ErrDuplicateKey) {
			t.Fatalf("submit with a recovered key = %v", err)
		}
		rec := newRecorder()
		start := time.Now()
		if err := k.Register("rec", rec.run); err != nil {
			t.Fatal(err)
		}
		advance(30 * time.Second) // "later" is not due yet
		for _, p := range []string{"queued", "late", "crashed"} {
			if rec.count(p) != 1 {
				t.Fatalf("%s ran %d times, want 1", p, rec.count(p))
			}
		}
		if rec.count("later") != 0 || rec.count("spent") != 0 {
			t.Fatalf("later ran early (%d) or spent ran (%d)", rec.count("later"), rec.count("spent"))
		}
		advance(31 * time.Second)
		if rec.count("later") != 1 {
			t.Fatal("later did not run once due")
		}
		if at := rec.at["later"]; at.Before(start.Add(time.Minute)) {
			t.Fatalf("later ran at +%v, before its due time", at.Sub(start))
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Rescued with the fence of a new epoch, then started once.
		if st := stored(t, s, "crashed"); st.State != kernel.Succeeded || st.Attempt != 2 || st.Fence != store.FenceOfEpoch(st.Fence>>32)+1 || st.Fence>>32 == 0 {
			t.Fatalf("crashed stored %+v, want succeeded on attempt 2 with the first fence of an epoch, plus 1", st)
		}
		if st := stored(t, s, "spent"); st.State != kernel.Failed || !strings.Contains(st.LastError, "interrupted") {
			t.Fatalf("spent stored %+v, want a dead letter", st)
		}
		if st := stored(t, s, "other"); st.State != kernel.Queued {
			t.Fatalf("unregistered kind's task = %v, want left Queued", st.State)
		}
	})
}

func TestDurableSurvivesShutdownAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k1, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		g := make(gate)
		_ = k1.Register("k", func(ctx context.Context, _ []byte) error { return g.run(ctx) })
		running, _ := k1.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("running")})
		synctest.Wait()
		queued, _ := k1.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("queued")})
		delayed, err := k1.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("delayed"), Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := k1.Close(); err != nil {
			t.Fatal(err)
		}
		for _, h := range []*kernel.Handle{running, queued, delayed} {
			if !errors.Is(h.Err(), kernel.ErrClosed) {
				t.Fatalf("%s: Err() = %v, want ErrClosed in this process", h.ID(), h.Err())
			}
		}
		if st := stored(t, s, running.ID()); st.State != kernel.Running {
			t.Fatalf("running task stored %v after Close, want Running", st.State)
		}
		if st := stored(t, s, queued.ID()); st.State != kernel.Queued {
			t.Fatalf("queued task stored %v after Close, want Queued", st.State)
		}
		if st := stored(t, s, delayed.ID()); st.State != kernel.Delayed {
			t.Fatalf("delayed task stored %v after Close, want Delayed", st.State)
		}

		// The next kernel runs all three; the delayed one when due.
		k2 := newTestKernel(t, kernel.Config{Store: s})
		rec := newRecorder()
		_ = k2.Register("k", rec.run)
		synctest.Wait()
		if rec.count("running") != 1 || rec.count("queued") != 1 || rec.count("delayed") != 0 {
			t.Fatalf("after restart: %v", rec.runs)
		}
		advance(time.Hour)
		if rec.count("delayed") != 1 {
			t.Fatal("delayed task did not run after the restart")
		}
		if err := k2.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, s, running.ID()); st.State != kernel.Succeeded || st.Attempt != 2 {
			t.Fatalf("interrupted task stored %+v, want succeeded on attempt 2", st)
		}
	})
}

func TestDurableStoreDown(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := storetest.NewFaultStore(storekit.NewMemoryStore())
				k := newTestKernel(t, kernel.Config{Store: s})
				rec := newRecorder()
				_ = k.Register("rec", rec.run)
				s.InjectFault(1, applied)
				_, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "rec", Payload: []byte("lost"), UniqueKey: "k"})
				want, other := store.ErrStoreUnavailable, store.ErrOutcomeUnknown
				if applied {
					want, other = other, want
				}
				if !errors.Is(err, want) || errors.Is(err, other) {
					t.Fatalf("submit while the store fails = %v, want %v and not %v", err, want, other)
				}
				if !k.Stats().Store.Down {
					t.Fatal("Stats.Store.Down false after a failed commit")
				}
				// Known down: fail fast, no commit attempted.
				before := k.Stats().Store.Errors
				if _, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "rec"}); !errors.Is(err, store.ErrStoreUnavailable) || errors.Is(err, store.ErrOutcomeUnknown) {
					t.Fatalf("second submit = %v, want a fast ErrStoreUnavailable (nothing stored)", err)
				}
				if k.Stats().Store.Errors != before {
					t.Fatal("a fast-failed submit tried a commit")
				}
				// The journal probes the store and comes back.
				advance(time.Second)
				if k.Stats().Store.Down {
					t.Fatal("store still down after the fault cleared")
				}
				h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "rec", Payload: []byte("ok"), UniqueKey: "k"})
				if err != nil {
					t.Fatalf("submit after recovery = %v", err)
				}
				if err := h.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := k.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if rec.count("lost") != 0 {
					t.Fatal("a task whose submit failed ran")
				}
				// The refused insert, if it landed, was cancelled: it never runs later.
				live, _ := s.Recover(context.Background())
				if len(live) != 0 {
					t.Fatalf("live tasks left: %+v", live)
				}
			})
		})
	}
}

func TestDurableSnapshotMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, SnapshotEvery: 50 * time.Millisecond})
		rec := newRecorder()
		_ = k.Register("rec", rec.run)
		var hs []*kernel.Handle
		for i := range 100 {
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "rec", Payload: fmt.Appendf(nil, "t%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		if n := k.Stats().Store.Commits; n != 0 {
			t.Fatalf("%d commits before the first snapshot tick", n)
		}
		waitAll(t, hs)
		advance(60 * time.Millisecond)
		st := k.Stats().Store
		if st.Commits == 0 || st.Changes != 300 || st.Refused != 0 {
			t.Fatalf("Stats.Store = %+v, want 300 changes in snapshots", st)
		}
		for _, h := range hs {
			if got := stored(t, s, h.ID()); got.State != kernel.Succeeded {
				t.Fatalf("%s stored %v", h.ID(), got.State)
			}
		}
	})
}

func TestDurableManyAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 8})
		rec := newRecorder()
		_ = k.Register("rec", rec.run)
		ts := make([]kernel.DurableTask, 1000)
		for i := range ts {
			ts[i] = kernel.DurableTask{Kind: "rec", Payload: fmt.Appendf(nil, "m%d", i), Priority: kernel.Priority(1 + i%3)}
		}
		ts[500].Kind = "missing"
		hs, err := k.SubmitDurableMany(context.Background(), ts)
		if err == nil || !strings.Contains(err.Error(), "DurableTask[500]") || hs[500] != nil {
			t.Fatalf("SubmitDurableMany with one bad kind = %v", err)
		}
		live := append(append([]*kernel.Handle{}, hs[:500]...), hs[501:]...)
		if got := waitAll(t, live); got[kernel.Succeeded] != 999 {
			t.Fatalf("outcomes %v, want 999 succeeded", got)
		}
		d, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "rec", Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		d.Cancel()
		if err := d.Wait(context.Background()); !errors.Is(err, kernel.ErrCanceled) {
			t.Fatalf("cancelled durable task: %v", err)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, s, d.ID()); st.State != kernel.Canceled {
			t.Fatalf("cancelled task stored %v", st.State)
		}
		if live, _ := s.Recover(context.Background()); len(live) != 0 {
			t.Fatalf("%d live tasks left", len(live))
		}
	})
}

// holdStarts is a MemoryStore whose commits holding a start stored apart from its
// task's insert (not a prestart) wait for release.
type holdStarts struct {
	*storekit.MemoryStore
	release chan struct{}
}

func (s holdStarts) hold(cs []store.Change) {
	inserted := map[string]bool{}
	for _, c := range cs {
		if c.Op == store.OpInsert {
			inserted[c.Task.ID] = true
		}
		if c.Op == store.OpStart && !inserted[c.Task.ID] {
			<-s.release
			return
		}
	}
}

func (s holdStarts) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	s.hold(cs)
	return s.MemoryStore.Commit(ctx, cs)
}

func (s holdStarts) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	s.hold(cs)
	return s.MemoryStore.CommitAs(ctx, o, cs)
}

// busySlot occupies k's only slot with a plain task until the returned func is
// called, so that a durable task submitted meanwhile queues (and is not started in
// the commit that stores it, see TestDurablePrestart).
func busySlot(t *testing.T, k *kernel.Kernel) func() {
	t.Helper()
	hold := make(chan struct{})
	started := make(chan struct{})
	_, err := k.TrySubmit(kernel.Task{Run: func(context.Context) error { close(started); <-hold; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	return func() { close(hold) }
}

func TestDurableRunsOnlyOnceItsStartIsStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := holdStarts{storekit.NewMemoryStore(), make(chan struct{})}
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 1})
		var ran atomic.Int32
		_ = k.Register("k", func(context.Context, []byte) error { ran.Add(1); return nil })
		free := busySlot(t, k)
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		free()
		synctest.Wait()
		if ran.Load() != 0 || h.State() != kernel.Running {
			t.Fatalf("ran %d times, state %v, before its start was stored", ran.Load(), h.State())
		}
		if st := stored(t, s, h.ID()); st.State != kernel.Queued {
			t.Fatalf("stored %v while the start commit is held", st.State)
		}
		// The waiting attempt holds no slot: a plain task runs meanwhile.
		plain, err := k.TrySubmit(kernel.Task{Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatalf("TrySubmit() = %v", err)
		}
		if err := plain.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(s.release)
		if err := h.Wait(context.Background()); err != nil || ran.Load() != 1 {
			t.Fatalf("Wait() = %v, ran %d", err, ran.Load())
		}
		<-plain.Done()
	})
}

func TestDurableCloseEndsGatedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := holdStarts{storekit.NewMemoryStore(), make(chan struct{})}
		k, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		_ = k.Register("k", func(context.Context, []byte) error { return nil })
		free := busySlot(t, k)
		h, _ := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
		free()
		synctest.Wait()
		done := make(chan struct{})
		go func() { _ = k.Close(); close(done) }()
		<-h.Done()
		if !errors.Is(h.Err(), kernel.ErrClosed) {
			t.Fatalf("gated task ended with %v, want ErrClosed", h.Err())
		}
		close(s.release) // the held commit lands; Close returns
		<-done
		if st := stored(t, s, h.ID()); st.State != kernel.Running {
			t.Fatalf("stored %v, want Running (recovered as a new attempt next time)", st.State)
		}
	})
}

func TestDurableSnapshotBacklogIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := holdStarts{storekit.NewMemoryStore(), make(chan struct{})}
		// Batches of 4: submits wait once 16 changes wait for the store.
		k := newTestKernel(t, kernel.Config{Store: s, SnapshotEvery: time.Millisecond, StoreBatch: 4})
		var once sync.Once
		release := func() { once.Do(func() { close(s.release) }) }
		t.Cleanup(release) // runs before the kernel's Close
		_ = k.Register("k", func(context.Context, []byte) error { return nil })
		var submitted atomic.Int32
		go func() {
			for range 40 {
				if _, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"}); err != nil {
					t.Error(err)
					return
				}
				submitted.Add(1)
			}
		}()
		advance(10 * time.Millisecond) // the first commit holding a start is held
		// Each admitted task adds its start and end too: at most 3 changes per task.
		if n := submitted.Load(); n == 40 || k.Stats().Store.Pending > 3*(16+4) {
			t.Fatalf("%d submits returned with %d changes pending: the backlog is not bounded", n, k.Stats().Store.Pending)
		}
		release()
		advance(100 * time.Millisecond)
		if n := submitted.Load(); n != 40 {
			t.Fatalf("%d of 40 submits returned after the store caught up", n)
		}
	})
}

// TestTaskInfoDurable: a durable task's Info names its kind and stored ID.
func TestTaskInfoDurable(t *testing.T) {
	k := newTestKernel(t, kernel.Config{Store: storekit.NewMemoryStore()})
	infos := make(chan kernel.Info, 1)
	if err := k.Register("email.send", func(ctx context.Context, _ []byte) error {
		info, _ := kernel.TaskInfo(ctx)
		infos <- info
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "email.send", Priority: kernel.Low})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info := <-infos; info.Kind != "email.send" || info.ID != h.ID() || info.Attempt != 1 || info.Priority != kernel.Low {
		t.Errorf("TaskInfo of a durable task = %+v, want kind email.send, ID %q, attempt 1, Low", info, h.ID())
	}
}

// TestDurableSubmitWaitsForRoom: on a plain store, a durable submit that finds its
// priority full waits (asleep: its room frees at the journal's pace) until a task
// starts, then is admitted and runs; one whose context ends first is refused.
func TestDurableSubmitWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A plain store (a SharedStore would take the task into its pool instead).
		s := plainStore{storekit.NewMemoryStore()}
		k := newTestKernel(t, kernel.Config{MaxConcurrency: 1, Store: s, Capacity: kernel.ByPriority[int]{Normal: 1}, DegradeAt: 1})
		release := make(chan struct{})
		rec := newRecorder()
		if err := k.Register("block", func(ctx context.Context, p []byte) error {
			<-release
			return rec.run(ctx, p)
		}); err != nil {
			t.Fatal(err)
		}
		submit := func(ctx context.Context, p string) (*kernel.Handle, error) {
			return k.SubmitDurable(ctx, kernel.DurableTask{Kind: "block", Payload: []byte(p)})
		}
		running, err := submit(context.Background(), "running")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		queued, err := submit(context.Background(), "queued") // fills Capacity.Normal
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := submit(short, "refused"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SubmitDurable on a full kernel with a 1 s context = %v, want context.DeadlineExceeded", err)
		}
		waited := make(chan *kernel.Handle)
		go func() {
			h, err := submit(context.Background(), "waited")
			if err != nil {
				t.Errorf("SubmitDurable() = %v after waiting", err)
			}
			waited <- h
		}()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("SubmitDurable returned while the kernel was full")
		default:
		}
		close(release) // the running task ends, the queued one starts: room
		h := <-waited
		waitAll(t, []*kernel.Handle{running, queued, h})
		for _, p := range []string{"running", "queued", "waited"} {
			if rec.count(p) != 1 {
				t.Errorf("%s ran %d times, want 1", p, rec.count(p))
			}
		}
		if rec.count("refused") != 0 {
			t.Errorf("the refused submit ran")
		}
	})
}
