package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// slowStarts is a store.Store whose commits that record an attempt's start (OpStart)
// wait until release closes: a slow commit, as a loaded database makes one. (On an
// idle kernel the start rides in the commit of the task's insert, which then waits
// too.)
type slowStarts struct {
	store.Store
	held    chan struct{} // closed when the first such commit waits
	release chan struct{}
	once    sync.Once
	id      string // the task of that start; written before held closes
}

func (s *slowStarts) Commit(ctx context.Context, cs []store.Change) ([]error, error) {
	for _, c := range cs {
		if c.Op == store.OpStart {
			s.once.Do(func() { s.id = c.Task.ID; close(s.held) })
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			break
		}
	}
	return s.Store.Commit(ctx, cs)
}

// TestRunsOnlyOnceStartStored is the crash test's re-run bound made deterministic. A
// process that dies while a durable task runs runs it again on restart, which is
// bounded by the tasks in flight at the crash only if the store knew them to be in
// flight: a task must not run before its start (OpStart) is stored. Here the commit
// of the start is slow; if the task runs meanwhile, the process "dies" at that moment
// (its journal can write nothing more) and a new kernel starts on the table: it finds
// the row Queued and runs the task a second time, though no row was Running.
func TestRunsOnlyOnceStartStored(t *testing.T) {
	t.Parallel()
	const (
		kind = "e2e.rerun"
		// How long the task may take to start while its start is not stored yet. A
		// kernel that waits for the commit never starts it; one that does not starts
		// it at once.
		startWait = 2 * time.Second
	)
	db := openDB(t)
	table := ownTable(t, db, "rerun")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	slow := &slowStarts{Store: s, held: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(slow.release) }) }
	k1, err := kernel.New(kernel.Config{Store: slow, StoreTimeout: time.Minute, Owner: "e2e-rerun"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		releaseAll()
		_ = k1.Close()
	})
	running := make(chan struct{})
	var runOnce sync.Once
	if err := k1.Register(kind, func(ctx context.Context, _ []byte) error {
		runOnce.Do(func() { close(running) })
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	// The submit returns once the task's insert is stored, which may be in the held
	// commit: it does not wait here.
	submitted := make(chan error, 1)
	go func() {
		_, err := k1.SubmitDurable(ctx, kernel.DurableTask{Kind: kind, Payload: []byte("once")})
		submitted <- err
	}()
	t.Cleanup(func() {
		releaseAll()
		if err := <-submitted; err != nil {
			t.Logf("SubmitDurable() = %v", err)
		}
	})
	axtest.WaitOrTimeout(t, slow.held, "the commit of the task's start")
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case <-running:
	case <-timer.C:
		return // the task waits for its start to be stored: a crash now cannot run it twice
	}

	// The task runs; its start is not stored. The process dies here.
	stored, err := s.Get(ctx, slow.id)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := kernel.New(kernel.Config{Store: s, Owner: "e2e-rerun"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k2.Close() }()
	again := make(chan struct{})
	var againOnce sync.Once
	if err := k2.Register(kind, func(context.Context, []byte) error {
		againOnce.Do(func() { close(again) })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	axtest.WaitOrTimeout(t, again, "the restarted kernel to run the recovered task")
	t.Errorf("task %s ran in the first process while its row was %v (its start not stored), "+
		"then again in the next one: a crash re-ran a task that no row showed Running; "+
		"a durable task must not run before its OpStart is committed", slow.id, stored.State)
}
