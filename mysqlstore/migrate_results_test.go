package mysqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// schemaWithoutResults is the task table as stores without results and attempt
// history create it.
const schemaWithoutResults = `CREATE TABLE %s (
	id           VARBINARY(128)  NOT NULL,
	kind         VARBINARY(255)  NOT NULL,
	payload      LONGBLOB        NOT NULL,
	priority     TINYINT UNSIGNED NOT NULL,
	run_at       BIGINT          NOT NULL,
	timeout_ns   BIGINT          NOT NULL,
	max_attempts INT             NOT NULL,
	attempt      INT             NOT NULL,
	fence        BIGINT UNSIGNED NOT NULL,
	unique_key   VARBINARY(255)  NOT NULL,
	live_key     VARBINARY(255)  NULL,
	state        TINYINT UNSIGNED NOT NULL,
	last_error   BLOB            NOT NULL,
	created_at   BIGINT          NOT NULL,
	updated_at   BIGINT          NOT NULL,
	version      BIGINT UNSIGNED NOT NULL DEFAULT 0,
	owner BIGINT UNSIGNED NOT NULL DEFAULT 0,
	grp VARBINARY(64) NOT NULL DEFAULT '',
	gkey VARBINARY(255) NOT NULL DEFAULT '',
	PRIMARY KEY (id),
	UNIQUE KEY live_key (live_key),
	KEY state_owner_priority_run_at (state, owner, priority, run_at)
) ENGINE=InnoDB`

// TestMigrateAddsResults migrates a task table made without the result and history
// columns, from several stores at once, then again: the stored rows read back with
// no result and no records, and a task running then ends with both.
func TestMigrateAddsResults(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	table := tableName(t)
	t.Cleanup(func() { _ = dropTables(context.Background(), db, table) })
	if _, err := db.ExecContext(ctx, fmt.Sprintf(schemaWithoutResults, "`"+table+"`")); err != nil {
		t.Fatal(err)
	}
	for id, state := range map[string]int{"old-running": 3, "old-done": 5 /* succeeded */} {
		_, err := db.ExecContext(ctx, "INSERT INTO `"+table+"` (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, "+
			"fence, unique_key, live_key, state, last_error, created_at, updated_at) VALUES (?, 'k', '', 2, 0, 0, 3, 1, 7, '', NULL, ?, '', 0, 1000)",
			id, state)
		if err != nil {
			t.Fatal(err)
		}
	}
	ss := make([]*mysqlstore.Store, 3)
	for i := range ss {
		s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ss[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	for i, s := range ss {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate() of store %d = %v", i, err)
		}
	}
	s := ss[0]
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again = %v", err)
	}
	for _, id := range []string{"old-running", "old-done"} {
		got, err := s.Get(ctx, id)
		if err != nil || got.Result != nil || got.History != nil {
			t.Fatalf("Get(%s) = result %q, history %v, %v; want none, none, nil", id, got.Result, got.History, err)
		}
	}
	now := time.UnixMilli(5000)
	lost := store.Attempt{Number: 1, Start: time.UnixMilli(1000), End: now, Outcome: store.Abandoned, Error: "interrupted"}
	done := store.Attempt{Number: 2, Start: now, End: now.Add(time.Second), Outcome: store.Succeeded, Owner: "k1"}
	changes := []store.Change{
		{Op: store.OpStart, Fence: 7, Attempt: lost, Task: store.StoredTask{ID: "old-running", Fence: 8, Attempt: 2, UpdatedAt: now}},
		{Op: store.OpSucceed, Fence: 8, Attempt: done, Task: store.StoredTask{ID: "old-running", UpdatedAt: done.End, Result: []byte("42")}},
	}
	res, err := s.Commit(ctx, changes)
	if err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	got, err := s.Get(ctx, "old-running")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Result) != "42" || len(got.History) != 2 || got.History[0].Outcome != store.Abandoned || got.History[1].Owner != "k1" {
		t.Fatalf("Get(old-running) = result %q, history %+v; want 42 and the two attempts", got.Result, got.History)
	}
}
