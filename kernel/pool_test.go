package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// TestPoolSharedPoolOneKernel: with Config.SharedPool a lone kernel sends every
// durable task to the pool and claims them back as its slots free: every task runs
// once, and its handle ends with it.
func TestPoolSharedPoolOneKernel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		k := newTestKernel(t, kernel.Config{Store: s, Owner: "solo", MaxConcurrency: 4, SharedPool: true})
		_ = k.Register("k", log.fn("solo", nil))
		var hs []*kernel.Handle
		for i := range 200 {
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i)})
			if err != nil {
				t.Fatalf("SubmitDurable() = %v", err)
			}
			hs = append(hs, h)
		}
		ends := waitAll(t, hs)
		if ends[kernel.Succeeded] != 200 {
			t.Fatalf("ends = %v, want 200 succeeded", ends)
		}
		for i := range 200 {
			if n := log.count(fmt.Sprintf("t%d", i)); n != 1 {
				t.Fatalf("t%d ran %d times", i, n)
			}
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		live, _ := s.Recover(context.Background())
		if len(live) != 0 {
			t.Fatalf("%d tasks live in the store, want 0", len(live))
		}
	})
}

// TestPoolShutdownDrainsOverflow: a burst past Capacity goes to the pool instead of
// waiting for room, and Shutdown right after it runs those tasks too (the kernel
// claims while it follows any), as it runs its queued ones.
func TestPoolShutdownDrainsOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		log := newRunLog()
		k := newTestKernel(t, kernel.Config{
			Store: s, Owner: "solo", MaxConcurrency: 2,
			Capacity: kernel.ByPriority[int]{High: 8, Normal: 8, Low: 8},
		})
		_ = k.Register("k", log.fn("solo", nil))
		var ts []kernel.DurableTask
		for i := range 64 {
			ts = append(ts, kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i)})
		}
		var live atomic.Int64 // tasks seen in the pool (unowned) after the submits
		for range 3 {
			if _, err := k.SubmitDurableMany(context.Background(), ts); err != nil {
				t.Fatal(err)
			}
		}
		owners, _ := s.Owners(context.Background())
		rows, _ := s.Recover(context.Background())
		held := 0
		for _, o := range owners {
			held += o.Tasks
		}
		live.Store(int64(len(rows) - held))
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := live.Load(); n == 0 {
			t.Fatal("no task went to the pool")
		}
		for i := range 64 {
			if n := log.count(fmt.Sprintf("t%d", i)); n != 3 {
				t.Fatalf("t%d ran %d times, want 3 (one per submit)", i, n)
			}
		}
		if live, _ := s.Recover(context.Background()); len(live) != 0 {
			t.Fatalf("%d tasks live in the store after Shutdown, want 0", len(live))
		}
	})
}

// TestPoolCancelAndClose: Cancel of a task waiting in the pool asks the store, and
// the handle ends Canceled as the store then says; Close ends the handles of the
// other followed tasks Canceled with ErrClosed and leaves their rows in the pool.
func TestPoolCancelAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		g := make(gate)
		log := newRunLog()
		k, err := kernel.New(kernel.Config{Store: s, Owner: "solo", MaxConcurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		_ = k.Register("k", log.fn("solo", g))
		busy, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: []byte("busy")})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // busy holds the one slot: pool tasks stay unclaimed
		var hs []*kernel.Handle
		for i := range 3 {
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "p%d", i), Pool: true})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		hs[0].Cancel()
		if err := hs[0].Wait(context.Background()); !errors.Is(err, kernel.ErrCanceled) || hs[0].State() != kernel.Canceled {
			t.Fatalf("cancelled pool task: %v, %v; want canceled with ErrCanceled", hs[0].State(), err)
		}
		if st := stored(t, s, hs[0].ID()); st.State != kernel.Canceled {
			t.Fatalf("cancelled pool task stored %v, want canceled", st.State)
		}
		if n := log.count("p0"); n != 0 {
			t.Fatalf("cancelled pool task ran %d times", n)
		}
		done := make(chan error, 1)
		go func() { done <- k.Close() }()
		for _, h := range hs[1:] {
			if err := h.Wait(context.Background()); !errors.Is(err, kernel.ErrClosed) || h.State() != kernel.Canceled {
				t.Fatalf("followed pool task after Close: %v, %v; want canceled with ErrClosed", h.State(), err)
			}
			if st := stored(t, s, h.ID()); st.State != kernel.Queued {
				t.Fatalf("followed pool task stored %v after Close, want queued (the pool's)", st.State)
			}
		}
		<-busy.Done()
		g.open()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		st := k.Stats().ByPriority.Normal
		if ended := st.Succeeded + st.Failed + st.Canceled + st.Abandoned + st.TimedOut + st.Evicted; ended != st.Submitted {
			t.Fatalf("Stats: submitted %d, ended %d", st.Submitted, ended)
		}
	})
}
