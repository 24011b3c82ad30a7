package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// TestStatementsUseThePrimaryKey EXPLAINs the statements a batch generates, for one row
// and for several, by a store with the multi-statement pool and by one without: each
// must read the primary key, never scan the table, and name each row once. Upserts
// (INSERT … ON DUPLICATE KEY UPDATE, for rows with many distinct values, and for a batch
// of several sets of values on a store without the pool) are primary-key writes by
// construction, with no plan to EXPLAIN.
func TestStatementsUseThePrimaryKey(t *testing.T) {
	s := internalStore(t, "explain")
	db, table, ctx := s.db, s.opts.Table, context.Background()
	// Enough rows that a scan would not be the cheapest plan.
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var ins []store.Change
	for i := range 2000 {
		ins = append(ins, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: fmt.Sprintf("t%05d", i), Kind: "k", State: store.Queued, Fence: 1, UpdatedAt: now,
		}})
	}
	if _, err := s.Commit(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("ANALYZE TABLE `" + table + "`"); err != nil {
		t.Fatal(err)
	}
	pool := s.multi
	defer func() { s.multi = pool }()
	for _, tc := range []struct {
		n          int
		retry      bool // each row gets its own due time and error: an upsert
		multi      bool // a store with the multi-statement pool
		upsert     bool
		statements int
	}{
		{1, true, false, false, 1},
		{2, true, true, true, 1},
		{50, true, true, true, 1},
		{50, true, false, true, 1},
		{50, false, true, false, 5}, // five sets of ten rows (five UpdatedAt): five UPDATEs
		{50, false, false, true, 1},
	} {
		n := tc.n
		s.multi = nil
		if tc.multi {
			s.multi = s.db // only tested for nil: the statements are EXPLAINed on s.db
		}
		var changes []store.Change
		for i := range n {
			id := fmt.Sprintf("t%05d", i*7)
			at := now.Add(time.Duration(i%5) * time.Millisecond) // a few distinct times
			changes = append(changes,
				store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: at}})
			if tc.retry {
				changes = append(changes,
					store.Change{Op: store.OpRetry, Fence: 2, Task: store.StoredTask{ID: id, RunAt: now.Add(time.Duration(i) * time.Second), LastError: "error of " + id, UpdatedAt: at}})
			} else {
				changes = append(changes, store.Change{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: at}})
			}
		}
		b := s.newBatch(changes)
		rows := map[string]*row{}
		for k, id := range b.ids {
			c := &b.changes[b.first[k]]
			rows[id] = &row{id: id, attempt: -1, exists: true, present: true, preFence: c.Fence, fence: c.Fence, state: store.Queued}
		}
		plan(b, rows, &keyPlan{holders: map[string]keyHolder{}})
		stmts := s.statements(rows, b.ids, false, 0, "")
		if len(stmts) != tc.statements {
			t.Errorf("%d rows, multi %v: %d statements, want %d", n, tc.multi, len(stmts), tc.statements)
		}
		for _, id := range b.ids {
			hex := newQuery(64).hexString(id).String()
			named := 0
			for _, st := range stmts {
				named += strings.Count(st.sql, hex)
			}
			if named != 1 {
				t.Errorf("%d rows, multi %v: %s named %d times, want once", n, tc.multi, id, named)
			}
		}
		q := newQuery(64).raw("SELECT id FROM ").raw(s.table).raw(" WHERE id IN ").hexList(b.ids).raw(" FOR UPDATE")
		queries := []string{q.String()}
		for _, st := range stmts {
			if upsert := strings.HasPrefix(st.sql, "INSERT"); upsert != tc.upsert {
				t.Errorf("%d rows, multi %v: %.80s…, want upsert %v", n, tc.multi, st.sql, tc.upsert)
			}
			if strings.HasPrefix(st.sql, "INSERT") {
				if !strings.Contains(st.sql, "ON DUPLICATE KEY UPDATE") {
					t.Errorf("%d rows: %.80s…, want an upsert", n, st.sql)
				}
				continue
			}
			queries = append(queries, st.sql)
		}
		for _, query := range queries {
			var (
				id                                        int
				selectType, table                         string
				typ, keys, key, keyLen, ref, rowsN, extra sql.NullString
			)
			err := db.QueryRow("EXPLAIN "+query).Scan(&id, &selectType, &table, &typ, &keys, &key, &keyLen, &ref, &rowsN, &extra)
			if err != nil {
				t.Fatalf("EXPLAIN %.80s…: %v", query, err)
			}
			if typ.String != "range" && typ.String != "const" && typ.String != "eq_ref" || key.String != "PRIMARY" {
				t.Errorf("%d rows: %.60s… reads %s on %q, want a range of PRIMARY", n, query, typ.String, key.String)
			}
			if !strings.HasPrefix(query, "SELECT") && !strings.Contains(query, " WHERE id = ") && !strings.Contains(query, " WHERE id IN (") {
				t.Errorf("statement without id = or id IN: %.80s", query)
			}
		}
	}
}

// TestRescueUsesOwnerIndex EXPLAINs the reads of a rescue and of Owners on a table where
// most live rows belong to a live owner and most unowned rows have ended: the rows of
// ended owners and the running rows of no owner must be found on ranges of the index
// state_owner_priority_run_at, not by scanning all the live rows or the table.
func TestRescueUsesOwnerIndex(t *testing.T) {
	s := internalStore(t, "explain_rescue")
	db, table, ctx := s.db, s.opts.Table, context.Background()
	live, err := s.Join(ctx, "live", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.Join(ctx, "gone", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(prefix string, n int) []store.Change {
		var cs []store.Change
		for i := range n {
			cs = append(cs, store.Change{Op: store.OpInsert, Task: store.StoredTask{
				ID: fmt.Sprintf("%s%05d", prefix, i), Kind: "k", State: store.Queued, Fence: 1, RunAt: now, UpdatedAt: now,
			}})
		}
		return cs
	}
	mustNil := func(res []error, err error) {
		t.Helper()
		if err := errors.Join(append(res, err)...); err != nil {
			t.Fatal(err)
		}
	}
	mustNil(s.CommitAs(ctx, live, insert("live", 2000)))
	mustNil(s.CommitAs(ctx, gone, insert("gone", 20)))
	ended := insert("ended", 1000) // unowned, and ended
	for _, c := range slices.Clone(ended) {
		ended = append(ended, store.Change{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: c.Task.ID, UpdatedAt: now}})
	}
	mustNil(s.Commit(ctx, ended))
	unowned := insert("unowned", 20) // half of them left running by a store without owners
	for _, c := range slices.Clone(unowned[:10]) {
		unowned = append(unowned, store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: c.Task.ID, Fence: 2, Attempt: 1, UpdatedAt: now}})
	}
	mustNil(s.Commit(ctx, unowned))
	if _, err := db.Exec("ANALYZE TABLE `" + table + "`"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, query, key string
	}{
		{"rescue", s.rescueQuery([]uint64{gone.Epoch}, 0, false), "state_owner_priority_run_at"},
		{"rescue, limited", s.rescueQuery([]uint64{gone.Epoch}, 10, true), "state_owner_priority_run_at"},
		{"rescue retried, the rows taken before", s.takenQuery(live.Epoch, rescued{epoch: 9, ids: []string{"live00001", "live00002"}}), "PRIMARY"},
	} {
		plans := explain(t, db, tc.query)
		if p := plans[table]; p.key != tc.key || p.typ != "range" {
			t.Errorf("%s: %s reads %s on %q, want a range of %s (plan %+v)", tc.name, tc.query, p.typ, p.key, tc.key, plans)
		}
	}
	// Owners counts each owner's live tasks on the index alone, without reading the rows.
	plans := explain(t, db, "SELECT o.epoch, (SELECT COUNT(*) FROM "+s.table+" t WHERE t.state IN "+liveCodes+
		" AND t.owner = o.epoch) FROM "+s.owners+" o")
	if p := plans["t"]; p.key != "state_owner_priority_run_at" || !strings.Contains(p.extra, "Using index") {
		t.Errorf("Owners' count reads %s on %q (%s), want state_owner_priority_run_at alone (plan %+v)", p.typ, p.key, p.extra, plans)
	}
	// And a rescue finds the rows of the ended owner and the running rows of no owner;
	// the waiting ones are the pool's.
	if err := s.Leave(ctx, gone); err != nil {
		t.Fatal(err)
	}
	got, err := s.Rescue(ctx, live, 0)
	if err != nil || len(got) != 30 {
		t.Fatalf("Rescue() = %d tasks, %v; want 30", len(got), err)
	}
}

type explainPlan struct{ table, typ, key, extra string }

// explainRows returns the plan of query, one row per table read, in EXPLAIN's order.
func explainRows(t *testing.T, db *sql.DB, query string) []explainPlan {
	t.Helper()
	rows, err := db.Query("EXPLAIN " + query)
	if err != nil {
		t.Fatalf("EXPLAIN %.80s…: %v", query, err)
	}
	defer func() { _ = rows.Close() }()
	var plans []explainPlan
	for rows.Next() {
		var (
			id                                               sql.NullInt64
			selectType                                       string
			table, typ, keys, key, keyLen, ref, rowsN, extra sql.NullString
		)
		if err := rows.Scan(&id, &selectType, &table, &typ, &keys, &key, &keyLen, &ref, &rowsN, &extra); err != nil {
			t.Fatal(err)
		}
		plans = append(plans, explainPlan{table.String, typ.String, key.String, extra.String})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plans
}

// explain returns the plan of query per table it reads, by the name EXPLAIN gives it
// (its alias, if any).
func explain(t *testing.T, db *sql.DB, query string) map[string]explainPlan {
	t.Helper()
	rows, err := db.Query("EXPLAIN " + query)
	if err != nil {
		t.Fatalf("EXPLAIN %.80s…: %v", query, err)
	}
	defer func() { _ = rows.Close() }()
	plans := map[string]explainPlan{}
	for rows.Next() {
		var (
			id                                        int
			selectType, table                         string
			typ, keys, key, keyLen, ref, rowsN, extra sql.NullString
		)
		if err := rows.Scan(&id, &selectType, &table, &typ, &keys, &key, &keyLen, &ref, &rowsN, &extra); err != nil {
			t.Fatal(err)
		}
		plans[table] = explainPlan{table, typ.String, key.String, extra.String}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plans
}

// TestClaimUsesOwnerIndex EXPLAINs the reads of a claim on a table where most live rows
// belong to an owner, many pool rows are of another kind and some are not due: each part
// of the locking read and of the read of next must be a range of the index
// state_owner_priority_run_at read in its order (no filesort), and so is the rescue of
// no ended owner, which must not read the pool's waiting rows.
func TestClaimUsesOwnerIndex(t *testing.T) {
	s := internalStore(t, "explain_claim")
	ctx := context.Background()
	o, err := s.Join(ctx, "live", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var mine, pool []store.Change
	for i := range 2000 {
		mine = append(mine, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: fmt.Sprintf("mine%05d", i), Kind: "k", State: store.Queued, Fence: 1, RunAt: now, UpdatedAt: now,
		}})
	}
	states := []store.State{store.Queued, store.Queued, store.Delayed, store.Retrying}
	for i := range 1200 {
		kind := "k"
		if i%2 == 1 {
			kind = "other"
		}
		pool = append(pool, store.Change{Op: store.OpInsert, Pool: true, Task: store.StoredTask{
			ID: fmt.Sprintf("pool%05d", i), Kind: kind, State: states[i%4], Priority: store.Priority(i%3 + 1),
			Fence: 1, RunAt: now.Add(time.Duration(i%7-3) * time.Second), UpdatedAt: now,
		}})
	}
	for _, cs := range [][]store.Change{mine, pool} {
		if res, err := s.CommitAs(ctx, o, cs); err != nil || errors.Join(res...) != nil {
			t.Fatalf("CommitAs() = %v, %v", errors.Join(res...), err)
		}
	}
	if _, err := s.db.Exec("ANALYZE TABLE " + s.table); err != nil {
		t.Fatal(err)
	}
	const key = "state_owner_priority_run_at"
	want := [len(claimOrder)]int{5, 5, 5}
	claimQ, _ := s.claimQuery([]string{"k"}, millis(now), want)
	for _, tc := range []struct {
		name, query string
		parts       int
	}{
		{"claim", claimQ, 9},
		{"next", s.nextQuery([]string{"k"}), 9},
		{"rescue of no ended owner", s.rescueQuery(nil, 0, false), 1},
	} {
		parts := 0
		for _, p := range explainRows(t, s.db, tc.query) {
			if p.table != s.opts.Table {
				continue // the derived table or the union's result
			}
			parts++
			if p.key != key || p.typ != "range" && p.typ != "ref" || strings.Contains(p.extra, "filesort") && tc.parts > 1 {
				t.Errorf("%s: a part reads %s on %q (%s), want a range of %s in index order", tc.name, p.typ, p.key, p.extra, key)
			}
			t.Logf("%s: %s on %s: %s", tc.name, p.typ, p.key, p.extra)
		}
		if parts != tc.parts {
			t.Errorf("%s: %d parts read the task table, want %d", tc.name, parts, tc.parts)
		}
	}
	// The claim takes what the plan promises: 5 of each priority, due, of kind k.
	got, next, err := s.Claim(ctx, o, store.ClaimRequest{Now: now, Want: store.ByPriority[int]{High: 5, Normal: 5, Low: 5}, Kinds: []string{"k"}})
	if err != nil || len(got) != 15 || !next.Equal(now.Add(-3*time.Second)) {
		t.Fatalf("Claim() = %d tasks, next %v, %v; want 15, next %v", len(got), next, err, now.Add(-3*time.Second))
	}
	for _, tk := range got {
		if tk.Kind != "k" || tk.RunAt.After(now) || tk.State != store.Running {
			t.Errorf("claimed %s: kind %q, due %v, %v", tk.ID, tk.Kind, tk.RunAt, tk.State)
		}
	}
}

// TestQueriesUseAnIndex EXPLAINs the reads and writes that find task rows by something
// else than a claim or a rescue (TestClaimUsesOwnerIndex, TestRescueUsesOwnerIndex), on
// a table of live, completed and dead rows of a few owners: Get, the purge (its read of
// owners, its reads of IDs, its DELETE), the dead letters, recovery, Join's read of the
// largest live fence and a schedule's fire. Each must read ranges of an index, never
// scan the table; the purger's read of IDs must be bounded by run_at in the index (a
// key of all four columns), so that it never reads the rows that ended after its
// cutoff.
func TestQueriesUseAnIndex(t *testing.T) {
	s := internalStore(t, "explain_queries")
	db, ctx := s.db, context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var owners []store.Owner
	for _, name := range []string{"a", "b", "c"} {
		o, err := s.Join(ctx, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
	}
	for k, o := range owners {
		var cs []store.Change
		for i := range 1000 {
			id := fmt.Sprintf("%s%05d", o.Name, i)
			at := now.Add(time.Duration(i) * time.Second)
			cs = append(cs, store.Change{Op: store.OpInsert, Task: store.StoredTask{
				ID: id, Kind: "k", State: store.Queued, Fence: 1, RunAt: at, CreatedAt: at, UpdatedAt: at, Priority: store.Priority(i%3 + 1),
			}})
			switch {
			case i%10 < 8: // most rows completed
				cs = append(cs, store.Change{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: id, UpdatedAt: at}})
			case i%10 == 8 && k == 0:
				cs = append(cs, store.Change{Op: store.OpFail, Fence: 1, Task: store.StoredTask{ID: id, State: store.Failed, LastError: "x", UpdatedAt: at}})
			}
		}
		if res, err := s.CommitAs(ctx, o, cs); err != nil || errors.Join(res...) != nil {
			t.Fatalf("CommitAs() = %v, %v", errors.Join(res...), err)
		}
	}
	if _, err := db.Exec("ANALYZE TABLE " + s.table); err != nil {
		t.Fatal(err)
	}
	cutoff := millis(now.Add(100 * time.Second))
	get := newQuery(128).raw("SELECT " + columns + " FROM ").raw(s.table).raw(" WHERE id = ").hexString("a00001").String()
	del := newQuery(128).raw("DELETE FROM ").raw(s.table).raw(" WHERE id IN ").hexList([]string{"a00001", "b00002"}).
		raw(" AND state IN " + completedCodes + " AND updated_at < ").int(cutoff).String()
	dead := newQuery(256).raw("SELECT " + columns + " FROM ").raw(s.table).raw(" WHERE state IN " + deadLetterCodes + " AND id > ").
		hexString("").raw(" ORDER BY id LIMIT 100").String()
	purgeIDs := newQuery(256).raw("SELECT id FROM ").raw(s.table).raw(" FORCE INDEX (" + ownerIndexName + ") WHERE state IN " +
		completedCodes + " AND owner IN ").raw(uintList([]uint64{owners[0].Epoch, owners[1].Epoch})).raw(" AND priority IN " + priorityCodes +
		" AND run_at < ").int(cutoff).raw(" AND updated_at < ").int(cutoff).raw(" LIMIT 5000").String()
	purgeAll := newQuery(256).raw("SELECT id FROM ").raw(s.table).raw(" FORCE INDEX (" + ownerIndexName + ") WHERE state IN " +
		completedCodes + " AND updated_at < ").int(cutoff).raw(" LIMIT 100").String()
	fire := s.fireUpdate(store.ScheduleFire{Name: "nightly", Expect: now, Next: now.Add(time.Hour)}, 7)
	for _, tc := range []struct {
		name, query, key string
		types            []string
		keyLen           string // the bytes of the index's columns the access bounds, when checked
	}{
		{"get", get, "PRIMARY", []string{"const"}, ""},
		{"purge's DELETE", del, "PRIMARY", []string{"range"}, ""},
		{"purger's read of owners", "SELECT state, owner FROM " + s.table + " FORCE INDEX (" + ownerIndexName + ") WHERE state IN " +
			completedCodes + " GROUP BY state, owner", ownerIndexName, []string{"range"}, ""},
		{"purger's read of IDs", purgeIDs, ownerIndexName, []string{"range"}, "18"},
		{"PurgeCompleted's read of IDs", purgeAll, ownerIndexName, []string{"range"}, ""},
		{"dead letters", dead, ownerIndexName, []string{"range"}, ""},
		{"count of dead letters", "SELECT COUNT(*) FROM " + s.table + " WHERE state IN " + deadLetterCodes, ownerIndexName, []string{"range"}, ""},
		{
			"recover", "SELECT " + columns + " FROM " + s.table + " WHERE state <= " + liveMaxCode + " ORDER BY priority, run_at, id",
			ownerIndexName,
			[]string{"range"},
			"",
		},
		{
			"join's largest live fence, when the counter is empty", "SELECT COALESCE(MAX(fence), 0) FROM " + s.table + " WHERE state <= " + liveMaxCode,
			ownerIndexName,
			[]string{"range"},
			"",
		},
		{"schedule fire", fire, "PRIMARY", []string{"range", "const"}, ""},
		{
			"renewal's check of starts", s.startCheck(owners[0].Epoch, []*row{{id: "a00009", preFence: 1}, {id: "a00019", preFence: 1}, {id: "a00029", preFence: 3}}),
			"PRIMARY",
			[]string{"range"},
			"",
		},
	} {
		rows, err := db.Query("EXPLAIN " + tc.query)
		if err != nil {
			t.Fatalf("%s: EXPLAIN %.80s…: %v", tc.name, tc.query, err)
		}
		n := 0
		for rows.Next() {
			var (
				id                                               sql.NullInt64
				selectType                                       string
				table, typ, keys, key, keyLen, ref, rowsN, extra sql.NullString
			)
			if err := rows.Scan(&id, &selectType, &table, &typ, &keys, &key, &keyLen, &ref, &rowsN, &extra); err != nil {
				t.Fatal(err)
			}
			n++
			if key.String != tc.key || !slices.Contains(tc.types, typ.String) || tc.keyLen != "" && keyLen.String != tc.keyLen {
				t.Errorf("%s: reads %s on %q (key length %s, %s), want %v of %s (key length %q): %.200s", tc.name, typ.String, key.String,
					keyLen.String, extra.String, tc.types, tc.key, tc.keyLen, tc.query)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s: %d tables read, want 1", tc.name, n)
		}
	}
	// And the purger deletes what its plan promises: the 80 completed rows of each owner
	// due and ended before the cutoff (seconds 0…99), none of the others.
	if n, err := s.purgeDue(ctx, time.UnixMilli(cutoff)); n != 3*80 || err != nil {
		t.Fatalf("purgeDue() = %d, %v; want 240", n, err)
	}
	if n, err := s.PurgeCompleted(ctx, time.UnixMilli(cutoff)); n != 0 || err != nil {
		t.Fatalf("PurgeCompleted() after purgeDue = %d, %v; want 0", n, err)
	}
}
