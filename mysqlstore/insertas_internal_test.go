package mysqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func insertOf(id string, now time.Time) store.Change {
	return store.Change{Op: store.OpInsert, Task: store.StoredTask{
		ID: id, Kind: "k", Priority: store.Normal, State: store.Queued, Fence: 1, RunAt: now, CreatedAt: now, UpdatedAt: now,
	}}
}

// TestInsertAsBesideCommit: while a transaction holds the owner's row (as a commit
// of its journal does, from its renewal to its end), InsertAs stores the owner's and
// the pool's new tasks in its one-query transaction without waiting for it.
func TestInsertAsBesideCommit(t *testing.T) {
	s := openStore(t, "stream_ins_beside")
	ctx := context.Background()
	if err := s.checkPacket(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := s.Join(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	if err := s.renew(ctx, tx, &a); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pool := insertOf("p", now)
	pool.Pool = true
	// A wait for the row would last LockWait (2 s) and fail the query.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, done, err := s.insertFast(short, &a, []store.Change{insertOf("x", now), insertOf("y", now), pool})
	if err != nil || !done || errors.Join(res...) != nil {
		t.Fatalf("insertFast() beside a held owner row = %v, done %v, %v; want done", res, done, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	owners, err := s.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 1 || owners[0].Epoch != a.Epoch || owners[0].Tasks != 2 {
		t.Errorf("Owners() = %+v, want a with 2 tasks", owners)
	}
	for _, id := range []string{"x", "y", "p"} {
		if st, err := s.Get(ctx, id); err != nil || st.State != store.Queued {
			t.Errorf("Get(%s) = %v, %v; want Queued", id, st.State, err)
		}
	}
	// A keyed insert goes the way of CommitAs, and is stored as well.
	k := insertOf("k1", now)
	k.Task.UniqueKey = "key"
	if res, err := s.InsertAs(ctx, a, []store.Change{k}); err != nil || errors.Join(res...) != nil {
		t.Fatalf("InsertAs(keyed) = %v, %v", res, err)
	}
	if _, err := s.Get(ctx, "k1"); err != nil {
		t.Errorf("Get(k1) = %v", err)
	}
}

// TestInsertAsRefusedOnceEnded: once the owner left, InsertAs stores nothing (the
// pool's tasks of the batch neither) and reports ErrLeaseLost; the one-query
// transaction undoes its own inserts.
func TestInsertAsRefusedOnceEnded(t *testing.T) {
	s := openStore(t, "stream_ins_ended")
	ctx := context.Background()
	if err := s.checkPacket(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := s.Join(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Leave(ctx, a); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pool := insertOf("p", now)
	pool.Pool = true
	if _, done, err := s.insertFast(ctx, &a, []store.Change{insertOf("x", now), pool}); done || !errors.Is(err, errLost) {
		t.Fatalf("insertFast() after Leave = done %v, %v; want errLost", done, err)
	}
	if _, err := s.InsertAs(ctx, a, []store.Change{insertOf("x", now), pool}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("InsertAs() after Leave = %v, want ErrLeaseLost", err)
	}
	for _, id := range []string{"x", "p"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrUnknownTask) {
			t.Errorf("Get(%s) = %v, want ErrUnknownTask", id, err)
		}
	}
}
