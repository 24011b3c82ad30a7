package kernel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// commitLog is a MemoryStore that records the changes of each commit and may hold
// the commits that insert a task until release is closed.
type commitLog struct {
	*storekit.MemoryStore
	mu      sync.Mutex
	commits [][]store.Change
	holdIns bool
	release chan struct{}
}

func newCommitLog() *commitLog {
	return &commitLog{MemoryStore: storekit.NewMemoryStore(), release: make(chan struct{})}
}

func (s *commitLog) record(cs []store.Change) {
	s.mu.Lock()
	s.commits = append(s.commits, append([]store.Change(nil), cs...))
	hold := s.holdIns
	s.mu.Unlock()
	if hold {
		for _, c := range cs {
			if c.Op == store.OpInsert {
				<-s.release
				return
			}
		}
	}
}

func (s *commitLog) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	s.record(cs)
	return s.MemoryStore.Commit(ctx, cs)
}

func (s *commitLog) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	s.record(cs)
	return s.MemoryStore.CommitAs(ctx, o, cs)
}

// opsOf returns, per commit, the ops that name id.
func (s *commitLog) opsOf(id string) [][]store.ChangeOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]store.ChangeOp
	for _, cs := range s.commits {
		var ops []store.ChangeOp
		for _, c := range cs {
			if c.Task.ID == id {
				ops = append(ops, c.Op)
			}
		}
		if len(ops) > 0 {
			out = append(out, ops)
		}
	}
	return out
}

// submitResult is what a SubmitDurable made on a goroutine of its own returned.
type submitResult struct {
	h   *kernel.Handle
	err error
}

// submitAsync submits t on a goroutine of its own, for a submit whose commit the
// test holds.
func submitAsync(k *kernel.Kernel, t kernel.DurableTask) <-chan submitResult {
	res := make(chan submitResult, 1)
	go func() {
		h, err := k.SubmitDurable(context.Background(), t)
		res <- submitResult{h, err}
	}()
	return res
}

func TestDurablePrestart(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "shared"}[shared]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newCommitLog()
				var st store.Store = s
				if !shared {
					st = struct{ store.Store }{s} // hides SharedStore: no owner
				}
				k := newTestKernel(t, kernel.Config{Store: st, MaxConcurrency: 1})
				var ran int
				_ = k.Register("k", func(context.Context, []byte) error { ran++; return nil })
				synctest.Wait() // the claimer's first claim, which reserves the free slots, is over

				// An idle kernel: the task is stored Running, in one commit with its insert.
				h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Wait(context.Background()); err != nil || ran != 1 {
					t.Fatalf("Wait() = %v, ran %d", err, ran)
				}
				synctest.Wait() // the end's commit
				ops := s.opsOf(h.ID())
				if len(ops) != 2 || len(ops[0]) != 2 || ops[0][0] != store.OpInsert || ops[0][1] != store.OpStart {
					t.Fatalf("commits of the task = %v, want [[insert start] [succeed]]", ops)
				}
				if got := stored(t, s, h.ID()); got.State != kernel.Succeeded || got.Attempt != 1 {
					t.Fatalf("stored %v attempt %d, want Succeeded attempt 1", got.State, got.Attempt)
				}

				// No free slot: the insert commits alone, the start follows.
				free := busySlot(t, k)
				h2, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
				if err != nil {
					t.Fatal(err)
				}
				free()
				if err := h2.Wait(context.Background()); err != nil || ran != 2 {
					t.Fatalf("Wait() = %v, ran %d", err, ran)
				}
				synctest.Wait()
				ops = s.opsOf(h2.ID())
				if len(ops) != 3 || len(ops[0]) != 1 || ops[0][0] != store.OpInsert {
					t.Fatalf("commits of the queued task = %v, want [[insert] [start] [succeed]]", ops)
				}
				stats := k.Stats()
				if got := stats.ByPriority.Normal.Succeeded; got != 3 {
					t.Fatalf("Stats().ByPriority.Normal.Succeeded = %d, want 3 (two durable tasks and the busy one)", got)
				}
				if got := stats.Store.Prestarted; got != 1 {
					t.Fatalf("Stats().Store.Prestarted = %d, want 1", got)
				}
				if stats.Running != 0 || stats.Queued.Normal != 0 {
					t.Fatalf("Stats() running %d queued %d after both ended", stats.Running, stats.Queued.Normal)
				}
			})
		})
	}
}

// A task waiting in a bucket takes the free slot before a new submit: the new one
// is not started in its insert's commit.
func TestDurablePrestartLeavesQueuedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newCommitLog()
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 1})
		var order []string
		var mu sync.Mutex
		_ = k.Register("k", func(_ context.Context, p []byte) error {
			mu.Lock()
			order = append(order, string(p))
			mu.Unlock()
			return nil
		})
		free := busySlot(t, k)
		first, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("queued")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// The slot frees while the second submit's commit is made: the queued task
		// takes it.
		free()
		second, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("new")})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []*kernel.Handle{first, second} {
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if len(order) != 2 || order[0] != "queued" {
			t.Fatalf("ran %v, want the queued task first", order)
		}
	})
}

// Shutdown while the commit holding a prestart is in flight: the task was
// acknowledged, and runs in the drain.
func TestDurablePrestartDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newCommitLog()
		s.holdIns = true
		k := newTestKernel(t, kernel.Config{Store: s})
		var ran int
		_ = k.Register("k", func(context.Context, []byte) error { ran++; return nil })
		synctest.Wait()
		res := submitAsync(k, kernel.DurableTask{Kind: "k"})
		synctest.Wait() // the commit is held
		stopped := make(chan error, 1)
		go func() { stopped <- k.Shutdown(context.Background()) }()
		synctest.Wait()
		close(s.release)
		r := <-res
		if r.err != nil {
			t.Fatalf("SubmitDurable() = %v", r.err)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
		if err := r.h.Wait(context.Background()); err != nil || ran != 1 {
			t.Fatalf("Wait() = %v, ran %d, want the acknowledged task run in the drain", err, ran)
		}
		if got := stored(t, s, r.h.ID()); got.State != kernel.Succeeded {
			t.Fatalf("stored %v, want Succeeded", got.State)
		}
	})
}

// Close while the commit holding a prestart is in flight: the task ends Canceled
// with ErrClosed, and its row stays Running, for the next owner.
func TestDurablePrestartClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newCommitLog()
		s.holdIns = true
		k := newTestKernel(t, kernel.Config{Store: s})
		var ran int
		_ = k.Register("k", func(context.Context, []byte) error { ran++; return nil })
		synctest.Wait()
		res := submitAsync(k, kernel.DurableTask{Kind: "k"})
		synctest.Wait()
		closed := make(chan struct{})
		go func() { _ = k.Close(); close(closed) }()
		synctest.Wait()
		close(s.release)
		<-closed
		r := <-res
		if r.err == nil {
			if err := r.h.Wait(context.Background()); !errors.Is(err, kernel.ErrClosed) {
				t.Fatalf("Wait() = %v, want ErrClosed", err)
			}
			if got := stored(t, s, r.h.ID()); got.State != kernel.Running {
				t.Fatalf("stored %v, want Running (the next owner's to rescue); commits %v", got.State, s.opsOf(r.h.ID()))
			}
		} else if !errors.Is(r.err, kernel.ErrClosed) {
			t.Fatalf("SubmitDurable() = %v, want nil or ErrClosed", r.err)
		}
		if ran != 0 {
			t.Fatalf("ran %d times after Close", ran)
		}
	})
}

// A paused durable kind or priority is not started in the commit that stores its
// task: it waits for Resume.
func TestDurablePrestartHonoursPause(t *testing.T) {
	for _, sel := range []kernel.Selector{{Kind: "k"}, {Priority: kernel.Normal}} {
		t.Run(sel.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newCommitLog()
				k := newTestKernel(t, kernel.Config{Store: s})
				var ran int
				_ = k.Register("k", func(context.Context, []byte) error { ran++; return nil })
				synctest.Wait()
				if err := k.Pause(sel); err != nil {
					t.Fatal(err)
				}
				h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if ran != 0 || h.State() == kernel.Running {
					t.Fatalf("paused: ran %d, state %v", ran, h.State())
				}
				if ops := s.opsOf(h.ID()); len(ops) != 1 || len(ops[0]) != 1 {
					t.Fatalf("commits of the paused task = %v, want its insert alone", ops)
				}
				if err := k.Resume(sel); err != nil {
					t.Fatal(err)
				}
				if err := h.Wait(context.Background()); err != nil || ran != 1 {
					t.Fatalf("after Resume: Wait() = %v, ran %d", err, ran)
				}
			})
		})
	}
}

// A durable task of a group is never started in its insert's commit: it waits for
// its key's permit like any task of the group.
func TestDurablePrestartLeavesGroupsToTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newCommitLog()
		k := newTestKernel(t, kernel.Config{Store: s, Groups: map[string]kernel.GroupConfig{
			"g": {PerKey: kernel.Limits{Concurrency: 1}},
		}})
		var mu sync.Mutex
		running, most := 0, 0
		_ = k.Register("k", func(ctx context.Context, _ []byte) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			<-time.After(10 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		})
		synctest.Wait()
		ts := make([]kernel.DurableTask, 4)
		for i := range ts {
			ts[i] = kernel.DurableTask{Kind: "k", Group: "g", Key: "a"}
		}
		hs, err := k.SubmitDurableMany(context.Background(), ts)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if most != 1 {
			t.Errorf("at most %d ran at once, want 1 (PerKey.Concurrency)", most)
		}
		if got := k.Stats().Store.Prestarted; got != 0 {
			t.Errorf("Stats().Store.Prestarted = %d, want 0 for tasks of a group", got)
		}
	})
}
