package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func testBigBatch(t *testing.T, s store.Store) {
	const n = 5000
	ch := make([]store.Change, 0, n)
	for i := range n {
		tk := task(fmt.Sprintf("big-%05d", i))
		if i%2 == 0 {
			tk.UniqueKey = fmt.Sprintf("big-key-%05d", i)
		}
		tk.Priority = []store.Priority{store.High, store.Normal, store.Low}[i%3]
		tk.RunAt = at(i)
		ch = append(ch, ins(tk))
	}
	t0 := time.Now()
	mustCommit(t, s, ch...)
	t.Logf("%d inserts in one commit: %v", n, time.Since(t0))

	// One commit of 5,000 state changes: half end, half wait for a retry.
	ch = ch[:0]
	for i := range n {
		id := fmt.Sprintf("big-%05d", i)
		if i%2 == 0 {
			ch = append(ch, start(id, 1, 2, 1))
			if i%4 == 0 {
				ch[len(ch)-1] = succeed(id, 1)
			}
		} else {
			ch = append(ch, retry(id, 1, at(10_000+i), "later"))
		}
	}
	t0 = time.Now()
	mustCommit(t, s, ch...)
	t.Logf("%d updates in one commit: %v", n, time.Since(t0))
	live := recoverAll(t, s)
	if len(live) != n*3/4 {
		t.Fatalf("len(Recover()) = %d, want %d", len(live), n*3/4)
	}
	counts := map[store.State]int{}
	for _, tk := range live {
		counts[tk.State]++
	}
	if counts[store.Running] != n/4 || counts[store.Retrying] != n/2 {
		t.Errorf("Recover() states = %v, want %d running and %d retrying", counts, n/4, n/2)
	}
	wantKeyFree := []store.Change{ins(keyed("new-0", "big-key-00000")), ins(keyed("new-2", "big-key-00002"))}
	wantResults(t, wantKeyFree, commit(t, s, wantKeyFree...), nil, store.ErrDuplicateKey)
}

func testConcurrentCommits(t *testing.T, s store.Store) {
	const workers, batches, per = 6, 15, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for b := range batches {
				var ch []store.Change
				for i := range per {
					id := fmt.Sprintf("w%d-b%02d-%02d", w, b, i)
					ch = append(ch, ins(keyed(id, id)))
					if b > 0 { // finish the tasks of the previous batch
						prev := fmt.Sprintf("w%d-b%02d-%02d", w, b-1, i)
						ch = append(ch, start(prev, 1, 2, 1), succeed(prev, 2))
					}
				}
				res, err := s.Commit(ctx, ch)
				if err == nil {
					err = errors.Join(res...)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d batch %d: %w", w, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if live := recoverAll(t, s); len(live) != workers*per {
		t.Errorf("len(Recover()) = %d, want %d", len(live), workers*per)
	}
	if n, err := s.PurgeCompleted(context.Background(), at(1_000_000)); n != workers*(batches-1)*per || err != nil {
		t.Errorf("PurgeCompleted() = %d, %v; want %d", n, err, workers*(batches-1)*per)
	}
}

func testContextDone(t *testing.T, s store.Store) {
	ctx, cancelCtx := context.WithCancel(context.Background())
	cancelCtx()
	if _, err := s.Commit(ctx, []store.Change{ins(task("a"))}); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit(canceled ctx) error = %v, want context.Canceled", err)
	}
	wantUnknown(t, s, "a")
	if _, err := s.Recover(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Recover(canceled ctx) error = %v, want context.Canceled", err)
	}
}

func testClose(t *testing.T, s store.Store) {
	mustCommit(t, s, ins(task("a")))
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	ctx := context.Background()
	if _, err := s.Commit(ctx, []store.Change{ins(task("b"))}); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("Commit() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("Get() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Recover(ctx); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("Recover() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.DeadLetters(ctx, 1, ""); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("DeadLetters() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.CountDeadLetters(ctx); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("CountDeadLetters() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Requeue(ctx, t0, "a"); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("Requeue() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Purge(ctx, "a"); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("Purge() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.PurgeCompleted(ctx, t0); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("PurgeCompleted() after Close = %v, want ErrStoreClosed", err)
	}
}
