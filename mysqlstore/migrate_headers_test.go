package mysqlstore_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestMigrateAddsHeaders migrates a task table made without the headers column (by a
// store before headers), with a row in it, from several stores at once and then again:
// the column is added once, the old row reads back with no headers, and a task inserted
// after keeps its headers through a recovery.
func TestMigrateAddsHeaders(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	table := "`" + s.Table() + "`"
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" DROP COLUMN headers"); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, "+
		"fence, unique_key, live_key, state, last_error, created_at, updated_at) VALUES ('old', 'k', 'p', 2, 0, 0, 1, 0, 7, '', NULL, 2, '', 0, 0)")
	if err != nil {
		t.Fatal(err)
	}
	const stores = 4
	ss := []*mysqlstore.Store{s}
	for range stores - 1 {
		o, err := mysqlstore.New(db, mysqlstore.Options{Table: s.Table(), Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = o.Close() })
		ss = append(ss, o)
	}
	var wg sync.WaitGroup
	errs := make([]error, stores)
	for i, st := range ss {
		wg.Go(func() { errs[i] = st.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate() #%d = %v", i, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again = %v", err)
	}
	var n int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = ? AND COLUMN_NAME = 'headers'", s.Table()).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("after Migrate: headers columns %d, %v; want 1", n, err)
	}
	now := time.UnixMilli(1_000)
	h := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ins := store.StoredTask{ID: "new", Kind: "k", State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now, Headers: h}
	if res, err := s.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: ins}}); err != nil || res[0] != nil {
		t.Fatalf("Commit(insert) = %v, %v", res, err)
	}
	got, err := s.Recover(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("Recover() = %+v, %v; want old and new", got, err)
	}
	for _, tk := range got {
		want := map[string]map[string]string{"old": nil, "new": h}[tk.ID]
		if !maps.Equal(tk.Headers, want) {
			t.Errorf("recovered %s: headers %q, want %q", tk.ID, tk.Headers, want)
		}
	}
}
