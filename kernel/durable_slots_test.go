package kernel_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// runningStore is a MemoryStore that counts, after each commit, the rows it holds
// Running, and records the commits that broke the bound: more rows Running than
// limit after a commit holding a start.
type runningStore struct {
	*storekit.MemoryStore
	limit atomic.Int64

	mu      sync.Mutex
	running int   // rows Running after the last commit
	most    int   // the most rows Running after any commit
	broke   []int // rows Running after commits that started a task past limit
}

func (s *runningStore) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	res, err := s.MemoryStore.Commit(ctx, cs)
	return s.count(ctx, cs, res, err)
}

func (s *runningStore) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	res, err := s.MemoryStore.CommitAs(ctx, o, cs)
	return s.count(ctx, cs, res, err)
}

// count records the rows Running after a commit of cs that returned res, err.
func (s *runningStore) count(ctx context.Context, cs []store.Change, res []error, err error) ([]error, error) {
	if err != nil {
		return res, err
	}
	live, rerr := s.Recover(ctx)
	if rerr != nil {
		return res, err
	}
	n := 0
	for _, t := range live {
		if t.State == kernel.Running {
			n++
		}
	}
	starts := false
	for _, c := range cs {
		starts = starts || c.Op == store.OpStart
	}
	s.mu.Lock()
	s.running, s.most = n, max(s.most, n)
	if starts && int64(n) > s.limit.Load() {
		s.broke = append(s.broke, n)
	}
	s.mu.Unlock()
	return res, err
}

func (s *runningStore) counts() (running, most int, broke []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.most, append([]int(nil), s.broke...)
}

// TestDurableRunningRowsWithinSlots: the rows the store shows Running never
// outnumber MaxConcurrency, although the starts of durable tasks are stored before
// they take a slot — also once an Update lowered MaxConcurrency.
func TestDurableRunningRowsWithinSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots, lowered, tasks = 4, 2, 40
		s := &runningStore{MemoryStore: storekit.NewMemoryStore()}
		s.limit.Store(slots)
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: slots})
		tokens := make(chan struct{})
		var began atomic.Int32
		_ = k.Register("k", func(ctx context.Context, _ []byte) error {
			began.Add(1)
			select {
			case <-tokens:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		ts := make([]kernel.DurableTask, tasks)
		for i := range ts {
			ts[i] = kernel.DurableTask{Kind: "k", MaxAttempts: 1, Priority: kernel.Priority(i%3 + 1)}
		}
		hs, err := k.SubmitDurableMany(context.Background(), ts)
		if err != nil {
			t.Fatalf("SubmitDurableMany() = %v", err)
		}
		synctest.Wait()
		if n, _, _ := s.counts(); began.Load() != slots || n != slots {
			t.Fatalf("with every slot blocked: %d began, %d rows Running, want %d and %d", began.Load(), n, slots, slots)
		}
		finish := func(n int) {
			t.Helper()
			for range n {
				tokens <- struct{}{}
				synctest.Wait()
			}
		}
		finish(10)
		if n, _, _ := s.counts(); began.Load() != slots+10 || n != slots {
			t.Fatalf("after 10 ended: %d began, %d rows Running, want %d and %d", began.Load(), n, slots+10, slots)
		}

		if err := k.Update(func(c *kernel.Config) { c.MaxConcurrency = lowered }); err != nil {
			t.Fatalf("Update() = %v", err)
		}
		s.limit.Store(lowered)
		finish(slots - lowered) // the running tasks end, none starts
		if n, _, _ := s.counts(); began.Load() != slots+10 || n != lowered {
			t.Fatalf("after lowering to %d and %d ends: %d began, %d rows Running, want %d and %d", lowered, slots-lowered, began.Load(), n, slots+10, lowered)
		}
		finish(1) // one more ends, one starts
		if n, _, _ := s.counts(); began.Load() != slots+11 || n != lowered {
			t.Fatalf("after one more end: %d began, %d rows Running, want %d and %d", began.Load(), n, slots+11, lowered)
		}
		finish(tasks - 10 - (slots - lowered) - 1)
		if got := waitAll(t, hs); got[kernel.Succeeded] != tasks {
			t.Fatalf("end states = %v, want %d Succeeded", got, tasks)
		}
		n, most, broke := s.counts()
		if n != 0 || most > slots || len(broke) > 0 {
			t.Fatalf("rows Running: %d at the end, at most %d (slots %d), past the limit after commits with starts: %v", n, most, slots, broke)
		}
	})
}

// TestDurableZombieLeavesTheRunningRows: a durable attempt that timed out and runs
// on as a zombie is no longer Running for the store (its end is journaled), so the
// next durable task starts in the slot it gave up.
func TestDurableZombieLeavesTheRunningRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &runningStore{MemoryStore: storekit.NewMemoryStore()}
		s.limit.Store(1)
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 1, MaxZombies: 1})
		tokens := make(chan struct{})
		var began atomic.Int32
		_ = k.Register("k", func(context.Context, []byte) error {
			began.Add(1)
			<-tokens // ignores its context
			return nil
		})
		ts := []kernel.DurableTask{
			{Kind: "k", MaxAttempts: 1, Timeout: 10 * time.Millisecond},
			{Kind: "k", MaxAttempts: 1, Timeout: time.Hour},
		}
		hs, err := k.SubmitDurableMany(context.Background(), ts)
		if err != nil {
			t.Fatalf("SubmitDurableMany() = %v", err)
		}
		synctest.Wait()
		if began.Load() != 1 {
			t.Fatalf("%d began, want 1", began.Load())
		}
		advance(20 * time.Millisecond)
		if n, _, _ := s.counts(); began.Load() != 2 || n != 1 || hs[0].State() != kernel.TimedOut {
			t.Fatalf("after the first timed out: %d began, %d rows Running, first %v; want 2, 1, TimedOut", began.Load(), n, hs[0].State())
		}
		tokens <- struct{}{}
		tokens <- struct{}{}
		waitAll(t, hs)
		synctest.Wait()
		n, most, broke := s.counts()
		if n != 0 || most > 1 || len(broke) > 0 {
			t.Fatalf("rows Running: %d at the end, at most %d, past the limit after commits with starts: %v", n, most, broke)
		}
	})
}
