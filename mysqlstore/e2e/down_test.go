package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// blipStore is a store.Store on a real table whose next commit fails once after
// fail(), as a dropped connection makes one fail. While it streams, each successful
// commit makes the kernel journal one more change (it cancels one of the tasks handed
// to it) before it returns, as a kernel busy running durable tasks always has changes
// queued for the next commit.
type blipStore struct {
	store.Store

	mu        sync.Mutex
	k         *kernel.Kernel
	failNext  bool
	streaming bool
	todo      []*kernel.Handle // tasks to cancel, one per commit
	okAfter   int              // successful commits since the failure
	failed    chan struct{}    // closed by the failing commit
	recovered chan struct{}    // closed after recoveredAt successful commits
}

const recoveredAt = 20

func (b *blipStore) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	b.mu.Lock()
	if b.failNext {
		b.failNext = false
		close(b.failed)
		b.mu.Unlock()
		return nil, fmt.Errorf("blip: connection lost: %w", store.ErrStoreUnavailable)
	}
	b.mu.Unlock()
	res, err := b.Store.Commit(ctx, cs)
	if err != nil {
		return res, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.streaming {
		return res, nil
	}
	if b.okAfter++; b.okAfter == recoveredAt {
		close(b.recovered)
	}
	if len(b.todo) > 0 {
		h := b.todo[0]
		b.todo = b.todo[1:]
		h.Cancel()
		// Return once the cancel is queued for the next commit. (No channel tells it;
		// bounded, and from the journal's goroutine, so no t.Fatal.)
		deadline := time.Now().Add(5 * time.Second)
		for b.k.Stats().Store.Pending == 0 && time.Now().Before(deadline) {
			t := time.NewTimer(50 * time.Microsecond)
			<-t.C
		}
	}
	return res, nil
}

// TestSubmitsResumeWhenCommitsSucceed fails one commit, so that the kernel marks the
// store down and refuses durable submits fast, then lets every commit succeed while
// the kernel keeps journaling changes (as it does while it runs durable tasks). Once
// commits succeed again, submits must be accepted again: the store answers.
func TestSubmitsResumeWhenCommitsSucceed(t *testing.T) {
	t.Parallel()
	const kind = "e2e.blip"
	db := openDB(t)
	table := ownTable(t, db, "blip")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := &blipStore{Store: s, failed: make(chan struct{}), recovered: make(chan struct{})}
	k, err := kernel.New(kernel.Config{Store: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	if err := k.Register(kind, func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var hs []*kernel.Handle
	for i := range 200 {
		h, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: kind, Payload: fmt.Appendf(nil, "d%d", i), Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}

	b.mu.Lock()
	b.k = k
	b.failNext = true
	b.streaming = true
	b.todo = hs[1:]
	b.mu.Unlock()
	hs[0].Cancel() // its commit is the one that fails
	axtest.WaitOrTimeout(t, b.failed, "the failing commit")
	axtest.WaitOrTimeout(t, b.recovered, fmt.Sprintf("%d successful commits after the failure", recoveredAt))

	st := k.Stats().Store
	_, err = k.SubmitDurable(ctx, kernel.DurableTask{Kind: kind, Payload: []byte("after")})
	b.mu.Lock()
	b.streaming = false
	b.mu.Unlock()
	if err != nil {
		t.Errorf("after %d successful commits in a row, SubmitDurable() = %v (Stats().Store.Down = %v); want it accepted: "+
			"the journal clears Down only by a probe, which runs only when nothing is queued, so a kernel that keeps "+
			"journaling changes refuses durable submits as long as it stays busy", recoveredAt, err, st.Down)
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Errorf("and the error does not even wrap ErrStoreUnavailable")
		}
	}
}
