package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// stuckStore is a store.Store on a real table whose first commit after arm() hangs
// until release closes and then fails, as a commit to a server that stopped answering
// does when the connection is torn down late.
type stuckStore struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when the stuck commit began
	release chan struct{}
}

func (s *stuckStore) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *stuckStore) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	s.mu.Lock()
	stuck := s.armed
	s.armed = false
	s.mu.Unlock()
	if !stuck {
		return s.Store.Commit(ctx, cs)
	}
	close(s.entered)
	<-s.release
	return nil, fmt.Errorf("stuck: connection lost: %w", store.ErrStoreUnavailable)
}

// signalHandler is a slog.Handler that closes ch on the first record whose message
// contains substr.
type signalHandler struct {
	substr string
	once   *sync.Once
	ch     chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalHandler) WithGroup(string) slog.Handler            { return h }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

// TestSubmitReturnsWhenCloseGivesUp closes the kernel while a commit hangs and another
// acknowledged submit waits in the journal's queue behind it. Close gives up on the
// journal after StoreTimeout and stops it; the waiting submit must then return (with
// an error) rather than block forever.
func TestSubmitReturnsWhenCloseGivesUp(t *testing.T) {
	t.Parallel()
	const kind = "e2e.close"
	db := openDB(t)
	table := ownTable(t, db, "close")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	stuck := &stuckStore{Store: s, entered: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(stuck.release) }) }
	t.Cleanup(release)
	gaveUp := signalHandler{substr: "close gave up", once: &sync.Once{}, ch: make(chan struct{})}
	k, err := kernel.New(kernel.Config{Store: stuck, StoreTimeout: 300 * time.Millisecond, Logger: slog.New(gaveUp)})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(kind, func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}

	stuck.arm()
	var errA, errB error
	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(aDone)
		_, errA = k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: kind, Payload: []byte("a")})
	}()
	axtest.WaitOrTimeout(t, stuck.entered, "the commit of the first submit")
	go func() {
		defer close(bDone)
		_, errB = k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: kind, Payload: []byte("b")})
	}()
	axtest.Eventually(t, func() bool { return k.Stats().Store.Pending > 0 }, "the second submit's insert to be queued")

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = k.Close()
	}()
	axtest.WaitOrTimeout(t, gaveUp.ch, "Close to give up on the journal")
	release() // the stuck commit fails now
	axtest.WaitOrTimeout(t, closed, "Close to return")
	axtest.WaitOrTimeout(t, aDone, "the first submit to return")
	if !errors.Is(errA, store.ErrStoreUnavailable) {
		t.Errorf("first submit = %v, want ErrStoreUnavailable", errA)
	}

	timer := time.NewTimer(3 * time.Second)
	defer timer.Stop()
	select {
	case <-bDone:
		if errB == nil {
			t.Errorf("second submit acknowledged though its insert was never committed")
		}
	case <-timer.C:
		t.Errorf("the second SubmitDurable is still blocked 3 s after Close returned: the journal stopped with its " +
			"insert queued and nothing settles it; its goroutine leaks")
	}
}
