package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// schemaWithoutOwner is the task table as stores without owners create it.
const schemaWithoutOwner = `CREATE TABLE %s (
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
	PRIMARY KEY (id),
	UNIQUE KEY live_key (live_key),
	KEY state_updated_at (state, updated_at),
	KEY state_priority_run_at (state, priority, run_at)
) ENGINE=InnoDB`

// TestMigrateAddsOwner migrates a task table made without the owner column, from several
// stores at once, then again: the column and its index are added once (the index it
// replaces dropped), the stored rows are kept with no owner, a rescue takes the running
// one, and the waiting one is in the pool, for a claim.
func TestMigrateAddsOwner(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	table := tableName(t)
	t.Cleanup(func() { _ = dropTables(context.Background(), db, table) })
	if _, err := db.ExecContext(ctx, fmt.Sprintf(schemaWithoutOwner, "`"+table+"`")); err != nil {
		t.Fatal(err)
	}
	// A waiting task, a running one and an ended one, written as a store without owners
	// writes them.
	for id, state := range map[string]int{"old-live": 2 /* queued */, "old-running": 3, "old-done": 5 /* succeeded */} {
		_, err := db.ExecContext(ctx, "INSERT INTO `"+table+"` (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, "+
			"fence, unique_key, live_key, state, last_error, created_at, updated_at) VALUES (?, 'k', '', 2, 0, 0, 1, 0, 7, '', NULL, ?, '', 0, 0)",
			id, state)
		if err != nil {
			t.Fatal(err)
		}
	}
	const stores = 4
	ss := make([]*mysqlstore.Store, stores)
	for i := range ss {
		s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ss[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, stores)
	for i, s := range ss {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate() #%d = %v", i, err)
		}
	}
	if err := ss[0].Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again = %v", err)
	}
	var column, index, old int
	err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = ? AND COLUMN_NAME = 'owner'), (SELECT COUNT(*) FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = 'state_owner_priority_run_at'), "+
		"(SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? "+
		"AND INDEX_NAME = 'state_priority_run_at')", table, table, table).Scan(&column, &index, &old)
	if err != nil {
		t.Fatal(err)
	}
	if column != 1 || index != 4 || old != 0 { // one row per column of an index
		t.Fatalf("after Migrate: %d owner columns, %d columns of the index with owner, %d of the one it replaces; want 1, 4, 0",
			column, index, old)
	}
	var owners int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE owner = 0").Scan(&owners); err != nil || owners != 3 {
		t.Fatalf("rows with no owner = %d, %v; want the 3 stored", owners, err)
	}
	s := ss[1]
	o, err := s.Join(ctx, "upgraded", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Rescue(ctx, o, 0)
	if err != nil || len(got) != 1 || got[0].ID != "old-running" || got[0].Fence != store.FenceOfEpoch(got[0].Fence>>32) || got[0].Fence>>32 <= o.Epoch {
		t.Fatalf("Rescue() = %+v, %v; want old-running with the first fence of a new epoch", got, err)
	}
	got, _, err = s.Claim(ctx, o, store.ClaimRequest{Now: time.Unix(1, 0), Want: store.ByPriority[int]{Normal: 5}, Kinds: []string{"k"}})
	if err != nil || len(got) != 1 || got[0].ID != "old-live" || got[0].State != store.Running {
		t.Fatalf("Claim() = %+v, %v; want old-live, running", got, err)
	}
}

// TestDrop: Drop removes every table Migrate made, is idempotent, and a new Migrate
// makes them again.
func TestDrop(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	count := func() int {
		t.Helper()
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN (?, ?, ?, ?, ?, ?, ?)",
			s.Table(), s.Table()+"_owners", s.Table()+"_leases", s.Table()+"_epochs", s.Table()+"_sched", s.Table()+"_starts", s.Table()+"_stats").Scan(&n)
		if err != nil {
			t.Fatalf("count tables: %v", err)
		}
		return n
	}
	if _, err := s.Join(ctx, "drop-test", time.Minute); err != nil { // makes sure the side tables are used
		t.Fatalf("Join() error = %v", err)
	}
	if n := count(); n != 7 {
		t.Fatalf("%d tables after Migrate, want 7", n)
	}
	for i := range 2 {
		if err := s.Drop(ctx); err != nil {
			t.Fatalf("Drop() #%d error = %v", i+1, err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d tables after Drop() #%d, want 0", n, i+1)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() after Drop error = %v", err)
	}
	if n := count(); n != 7 {
		t.Fatalf("%d tables after Migrate again, want 7", n)
	}
}

// ownersSchemaBeforeStarts is the owner table as stores that record starts in the task
// rows create it: no start set.
const ownersSchemaBeforeStarts = `CREATE TABLE %s (
	epoch      BIGINT UNSIGNED NOT NULL,
	name       VARBINARY(64)   NOT NULL,
	lease_us   BIGINT          NOT NULL,
	expires_at DATETIME(6)     NOT NULL COMMENT 'UTC, server clock',
	ended      TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT '1: left, replaced or rescued; never renewed again',
	conn_id    BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'CONNECTION_ID() of the last writer',
	PRIMARY KEY (epoch),
	KEY name (name)
) ENGINE=InnoDB`

// TestMigrateAddsStartSets migrates tables made by stores that record starts in the
// task rows (an owner table without started and started_v, no _starts table), with a
// live member whose tasks wait and run there, from several stores at once and then
// again: the columns and the table are added once; the member of before keeps its
// lease, its running task still reads Running, its new starts go to its set (and read
// Running), and a rescue after it leaves returns the tasks that began Running at their
// attempt and the one that never began waiting.
func TestMigrateAddsStartSets(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	owners := "`" + s.Table() + "_owners`"
	for _, q := range []string{
		"DROP TABLE " + owners, fmt.Sprintf(ownersSchemaBeforeStarts, owners), "DROP TABLE `" + s.Table() + "_starts`",
		"INSERT INTO " + owners + " (epoch, name, lease_us, expires_at) VALUES (5, 'old', 60000000, UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The tasks of the member of before, as such a store writes them: o-run's start
	// in its row.
	for id, st := range map[string][2]int{"o-wait": {2, 0}, "o-later": {2, 0}, "o-run": {3, 1}} {
		_, err := db.ExecContext(ctx, "INSERT INTO `"+s.Table()+"` (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, "+
			"fence, unique_key, live_key, state, last_error, created_at, updated_at, owner) VALUES (?, 'k', '', 2, 0, 0, 5, ?, ?, '', NULL, ?, '', 0, 0, 5)",
			id, st[1], 1+st[1], st[0])
		if err != nil {
			t.Fatal(err)
		}
	}
	const stores = 3
	var wg sync.WaitGroup
	errs := make([]error, stores)
	for i := range stores {
		si, err := mysqlstore.New(db, mysqlstore.Options{Table: s.Table(), Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = si.Close() })
		wg.Go(func() { errs[i] = si.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate() #%d = %v", i, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again = %v", err)
	}
	var cols int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? "+
		"AND COLUMN_NAME IN ('started', 'started_v')", s.Table()+"_owners").Scan(&cols); err != nil || cols != 2 {
		t.Fatalf("start set columns after Migrate = %d, %v; want 2", cols, err)
	}
	old := store.Owner{Name: "old", Epoch: 5, Lease: time.Minute}
	get := func(id string) store.StoredTask {
		t.Helper()
		tk, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%q) = %v", id, err)
		}
		return tk
	}
	if tk := get("o-run"); tk.State != store.Running || tk.Attempt != 1 {
		t.Fatalf("o-run after Migrate = %v attempt %d, want running attempt 1", tk.State, tk.Attempt)
	}
	start := store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: "o-wait", Attempt: 1, Fence: 2, UpdatedAt: time.UnixMilli(1000)}}
	res, err := s.CommitAs(ctx, old, []store.Change{start})
	if err != nil || res[0] != nil {
		t.Fatalf("CommitAs(start) by the member of before = %v, %v", res, err)
	}
	if tk := get("o-wait"); tk.State != store.Running || tk.Attempt != 1 || tk.Fence != 2 {
		t.Fatalf("o-wait after its start = %v attempt %d fence %d, want running attempt 1 fence 2", tk.State, tk.Attempt, tk.Fence)
	}
	var state int
	if err := db.QueryRowContext(ctx, "SELECT state FROM `"+s.Table()+"` WHERE id = 'o-wait'").Scan(&state); err != nil || state != 2 {
		t.Fatalf("o-wait's row state = %d, %v; want 2 (queued): the start is in the owner's set", state, err)
	}
	if err := s.Leave(ctx, old); err != nil {
		t.Fatal(err)
	}
	o, err := s.Join(ctx, "new", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Rescue(ctx, o, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("Rescue() = %d tasks, %v; want 3", len(got), err)
	}
	for _, tk := range got {
		want := map[string]store.State{"o-wait": store.Running, "o-run": store.Running, "o-later": store.Queued}[tk.ID]
		if tk.State != want || (want == store.Running) != (tk.Attempt == 1) {
			t.Errorf("rescued %q = %v attempt %d, want %v", tk.ID, tk.State, tk.Attempt, want)
		}
	}
}

// TestMigrateAddsConnID migrates an owner table made without the conn_id column (by an
// earlier version of the store), with a member in it: the column is added, the member
// renews its lease, and a renewal records its connection.
func TestMigrateAddsConnID(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	owners := "`" + s.Table() + "_owners`"
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+owners+" DROP COLUMN conn_id"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+owners+" (epoch, name, lease_us, expires_at) VALUES (1, 'old', 60000000, UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE)"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate() #%d = %v", i+1, err)
		}
	}
	old := store.Owner{Name: "old", Epoch: 1, Lease: time.Minute}
	if _, err := s.CommitAs(ctx, old, nil); err != nil {
		t.Fatalf("CommitAs() by the member of before = %v", err)
	}
	var conn int64
	if err := db.QueryRowContext(ctx, "SELECT conn_id FROM "+owners+" WHERE epoch = 1").Scan(&conn); err != nil || conn == 0 {
		t.Fatalf("conn_id after a renewal = %d, %v; want the renewing connection's ID", conn, err)
	}
}

// TestMigrateAddsGroupKey migrates a task table made without the grp and gkey columns
// (by a store before groups), with rows in it, from several stores at once and then
// again: each column is added once, the old rows read back with no group, and a task
// inserted after keeps its group and key.
func TestMigrateAddsGroupKey(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	table := "`" + s.Table() + "`"
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" DROP COLUMN grp, DROP COLUMN gkey"); err != nil {
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
	var grp, gkey int
	err = db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = ? AND COLUMN_NAME = 'grp'), (SELECT COUNT(*) FROM information_schema.COLUMNS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'gkey')", s.Table(), s.Table()).Scan(&grp, &gkey)
	if err != nil || grp != 1 || gkey != 1 {
		t.Fatalf("after Migrate: grp columns %d, gkey columns %d, %v; want 1, 1", grp, gkey, err)
	}
	now := time.UnixMilli(1_000)
	ins := store.StoredTask{ID: "new", Kind: "k", Group: "hosts", Key: "a.example", State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now}
	if res, err := s.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: ins}}); err != nil || res[0] != nil {
		t.Fatalf("Commit(insert) = %v, %v", res, err)
	}
	got, err := s.Recover(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("Recover() = %+v, %v; want old and new", got, err)
	}
	for _, tk := range got {
		want := map[string][2]string{"old": {"", ""}, "new": {"hosts", "a.example"}}[tk.ID]
		if tk.Group != want[0] || tk.Key != want[1] {
			t.Errorf("recovered %s: group %q key %q, want %q %q", tk.ID, tk.Group, tk.Key, want[0], want[1])
		}
	}
}

// schemaWithStateUpdated is the task table as stores with the index (state, updated_at)
// create it.
const schemaWithStateUpdated = `CREATE TABLE %s (
	id           VARBINARY(128)  NOT NULL,
	kind         VARBINARY(255)  NOT NULL,
	payload      LONGBLOB        NOT NULL,
	priority     TINYINT UNSIGNED NOT NULL,
	run_at       BIGINT          NOT NULL COMMENT 'unix ms',
	timeout_ns   BIGINT          NOT NULL,
	max_attempts INT             NOT NULL,
	attempt      INT             NOT NULL,
	fence        BIGINT UNSIGNED NOT NULL,
	unique_key   VARBINARY(255)  NOT NULL,
	live_key     VARBINARY(255)  NULL COMMENT 'unique_key while live, NULL once terminal',
	state        TINYINT UNSIGNED NOT NULL,
	last_error   BLOB            NOT NULL,
	created_at   BIGINT          NOT NULL COMMENT 'unix ms',
	updated_at   BIGINT          NOT NULL COMMENT 'unix ms',
	version      BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'bumped by every write',
	owner BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'epoch of the owner, 0 for none',
	grp VARBINARY(64) NOT NULL DEFAULT '' COMMENT 'group (DurableTask.Group), empty for none',
	gkey VARBINARY(255) NOT NULL DEFAULT '' COMMENT 'key within the group (DurableTask.Key)',
	unique_until BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms; 0: none',
	unique_for_ms BIGINT NOT NULL DEFAULT 0 COMMENT 'window after the end, ms; 0: none',
	headers BLOB NULL,
	PRIMARY KEY (id),
	UNIQUE KEY live_key (live_key),
	KEY state_updated_at (state, updated_at),
	KEY state_owner_priority_run_at (state, owner, priority, run_at)
) ENGINE=InnoDB`

// TestMigrateDropsStateUpdated migrates a task table made with the index (state,
// updated_at), with rows of every kind in it, from several stores at once while a
// writer keeps committing, and then again: the index is dropped once, the others are
// kept, every row reads back as it was stored, and the tasks go on: a claim takes the
// pool's, a completion lands, the purge deletes the old completed rows and keeps the
// rest, a unique key is still held by its live task alone.
func TestMigrateDropsStateUpdated(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	table := tableName(t)
	t.Cleanup(func() { _ = dropTables(context.Background(), db, table) })
	if _, err := db.ExecContext(ctx, fmt.Sprintf(schemaWithStateUpdated, "`"+table+"`")); err != nil {
		t.Fatal(err)
	}
	old := time.UnixMilli(1_000_000).UTC()
	recent := time.UnixMilli(9_000_000).UTC()
	// Rows as a store of the earlier schema writes them: with Commit, before any Migrate
	// of this version (the side tables are not there yet).
	pre, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pre.Close() })
	task := func(id string, state store.State, at time.Time) store.StoredTask {
		return store.StoredTask{
			ID: id, Kind: "k", Payload: []byte("p-" + id), Priority: store.Normal, RunAt: at, Timeout: time.Second,
			MaxAttempts: 3, Fence: 5, State: state, CreatedAt: at, UpdatedAt: at, Group: "g", Key: "k-" + id,
		}
	}
	stored := []store.StoredTask{
		task("queued", store.Queued, old),
		task("keyed", store.Queued, old),
		task("done-old", store.Succeeded, old),
		task("done-recent", store.Succeeded, recent),
		task("canceled-old", store.Canceled, old),
		task("failed", store.Failed, old),
	}
	stored[1].UniqueKey = "the-key"
	stored[5].LastError, stored[5].Attempt = "boom", 3
	var ins []store.Change
	for _, tk := range stored {
		ins = append(ins, store.Change{Op: store.OpInsert, Task: tk})
	}
	if res, err := pre.Commit(ctx, ins); err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", errors.Join(res...), err)
	}

	// A writer commits all along: an online index drop does not stop it.
	stop := make(chan struct{})
	var writer sync.WaitGroup
	var writes int
	var writeErr error
	writer.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("during-%04d", i)
			res, err := pre.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: task(id, store.Queued, recent)}})
			if err == nil {
				err = errors.Join(res...)
			}
			if err != nil {
				writeErr = err
				return
			}
			writes++
		}
	})
	const stores = 4
	ss := make([]*mysqlstore.Store, stores)
	for i := range ss {
		s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ss[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, stores)
	for i, s := range ss {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	close(stop)
	writer.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate() #%d = %v", i, err)
		}
	}
	if writeErr != nil {
		t.Fatalf("a commit during Migrate: %v", writeErr)
	}
	s := ss[0]
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again = %v", err)
	}

	rows, err := db.QueryContext(ctx, "SELECT index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index) "+
		"FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? GROUP BY index_name", table)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var name, cols string
		if err := rows.Scan(&name, &cols); err != nil {
			t.Fatal(err)
		}
		got[name] = cols
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PRIMARY": "id", "live_key": "live_key", "state_owner_priority_run_at": "state,owner,priority,run_at"}
	if !maps.Equal(got, want) {
		t.Fatalf("indexes after Migrate = %v, want %v", got, want)
	}

	for _, w := range stored {
		g, err := s.Get(ctx, w.ID)
		if err != nil {
			t.Fatalf("Get(%s) = %v", w.ID, err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("Get(%s) after Migrate =\n%+v\nwant\n%+v", w.ID, g, w)
		}
	}
	var during int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE id LIKE 'during-%'").Scan(&during); err != nil || during != writes {
		t.Fatalf("rows committed during Migrate = %d, %v; want %d", during, err, writes)
	}

	// The key is held by its live task.
	res, err := s.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: func() store.StoredTask {
		tk := task("keyed-2", store.Queued, recent)
		tk.UniqueKey = "the-key"
		return tk
	}()}})
	if err != nil || !errors.Is(res[0], store.ErrDuplicateKey) {
		t.Fatalf("insert of a held key = %v, %v; want ErrDuplicateKey", res, err)
	}
	// A claim takes the pool's oldest, and its completion lands.
	o, err := s.Join(ctx, "after", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	claimed, _, err := s.Claim(ctx, o, store.ClaimRequest{Now: old, Want: store.ByPriority[int]{Normal: 5}, Kinds: []string{"k"}})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim() = %+v, %v; want queued and keyed", claimed, err)
	}
	var ends []store.Change
	for _, c := range claimed {
		ends = append(ends, store.Change{Op: store.OpSucceed, Fence: c.Fence, Task: store.StoredTask{ID: c.ID, UpdatedAt: recent}})
	}
	if res, err := s.CommitAs(ctx, o, ends); err != nil || errors.Join(res...) != nil {
		t.Fatalf("CommitAs(succeed) = %v, %v", errors.Join(res...), err)
	}
	// The purge deletes the completed rows older than its cutoff, and those alone.
	n, err := s.PurgeCompleted(ctx, recent)
	if err != nil || n != 2 {
		t.Fatalf("PurgeCompleted() = %d, %v; want done-old and canceled-old", n, err)
	}
	for id, want := range map[string]bool{"done-old": false, "canceled-old": false, "done-recent": true, "failed": true, "queued": true} {
		_, err := s.Get(ctx, id)
		if have := err == nil; have != want || err != nil && !errors.Is(err, store.ErrUnknownTask) {
			t.Errorf("Get(%s) after the purge = %v; want stored %v", id, err, want)
		}
	}
}

// TestMigrateAddsUniqueWindow migrates a task table made without the unique-key window
// columns, from several stores at once: the rows stored before have no window (an old
// holder frees its key at its end), and new rows keep theirs.
func TestMigrateAddsUniqueWindow(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	table := "`" + s.Table() + "`"
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" DROP COLUMN unique_until, DROP COLUMN unique_for_ms"); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, "+
		"fence, unique_key, live_key, state, last_error, created_at, updated_at) VALUES ('old', 'k', 'p', 2, 0, 0, 1, 0, 7, 'K', 'K', 2, '', 0, 0)")
	if err != nil {
		t.Fatal(err)
	}
	const stores = 3
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
	old, err := s.Get(ctx, "old")
	if err != nil || !old.UniqueUntil.IsZero() || old.UniqueFor != 0 {
		t.Fatalf("Get(old) = %+v, %v; want no window", old, err)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(1_000 + ms) }
	task := func(id string, when time.Time, window time.Duration) store.Change {
		return store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: id, Kind: "k", UniqueKey: "K", UniqueFor: window,
			State: store.Queued, Fence: 1, CreatedAt: when, UpdatedAt: when,
		}}
	}
	if res, err := s.Commit(ctx, []store.Change{task("dup", at(0), 0)}); err != nil || !errors.Is(res[0], store.ErrDuplicateKey) {
		t.Fatalf("Commit(insert dup) = %v, %v; want ErrDuplicateKey", res, err)
	}
	end := store.Change{Op: store.OpCancel, Fence: 7, Task: store.StoredTask{ID: "old", UpdatedAt: at(1)}}
	res, err := s.Commit(ctx, []store.Change{
		end, task("new", at(2), time.Minute),
		{Op: store.OpCancel, Fence: 1, Task: store.StoredTask{ID: "new", UpdatedAt: at(3)}},
		task("newer", at(4), 0),
	})
	if err != nil || res[0] != nil || res[1] != nil || res[2] != nil || !errors.Is(res[3], store.ErrDuplicateKey) {
		t.Fatalf("Commit(end old, insert new, end it, insert newer) = %v, %v; want nil, nil, nil, ErrDuplicateKey", res, err)
	}
	if got, err := s.Get(ctx, "new"); err != nil || got.UniqueFor != time.Minute {
		t.Fatalf("Get(new) = %+v, %v; want UniqueFor 1m", got, err)
	}
}
