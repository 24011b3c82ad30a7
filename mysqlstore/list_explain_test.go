package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// recorder is a queryer that keeps the statements it runs.
type recorder struct {
	q     queryer
	stmts []string
}

func (r *recorder) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	r.stmts = append(r.stmts, query)
	return r.q.QueryContext(ctx, query, args...)
}

// TestListUsesIndexes EXPLAINs every statement that ListTasks runs on the task table,
// for each shape of filter, on the first page, a later one and a page backward, with
// and without the listing's indexes (Options.ListIndexes): each reads a range of the
// index its plan forces (or the primary key), never the whole table, and none sorts.
// It also walks each filter's pages: every match comes once.
func TestListUsesIndexes(t *testing.T) {
	s := internalStore(t, "hlistexplain")
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := s.Join(ctx, "explainer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []store.State{store.Queued, store.Delayed, store.Succeeded, store.Failed, store.Canceled, store.Retrying}
	var ins []store.Change
	for i := range 3000 {
		ins = append(ins, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: fmt.Sprintf("t%05d", i), Kind: fmt.Sprintf("kind%d", i%7), State: states[i%len(states)], Fence: 1,
			Priority: store.Priority(1 + i%3), RunAt: now.Add(time.Duration(i%50) * time.Second),
			Group: fmt.Sprintf("g%d", i%5), Key: fmt.Sprintf("k%d", i%11), UpdatedAt: now,
		}})
	}
	if _, err := s.CommitAs(ctx, o, ins[:1500]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, ins[1500:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitAs(ctx, o, []store.Change{{Op: store.OpStart, Fence: 1, Task: store.StoredTask{
		ID: "t00000", Fence: store.FenceOfEpoch(o.Epoch) + 1, Attempt: 1, UpdatedAt: now,
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("ANALYZE TABLE " + s.table); err != nil {
		t.Fatal(err)
	}
	queries := []store.TaskQuery{
		{},
		{State: store.Failed},
		{State: store.Running},
		{State: store.Queued, Owner: o.Epoch},
		{State: store.Succeeded, Kind: "kind3"},
		{State: store.Canceled, Group: "g2", Key: "k4"},
		{Kind: "kind2"},
		{Kind: "kind2", Pool: true},
		{Group: "g1"},
		{Group: "g1", Key: "k3", Kind: "kind1"},
		{Owner: o.Epoch},
		{Owner: o.Epoch, Kind: "kind4"},
		{Pool: true},
	}
	checkPlans(t, s, queries, ins, o.Epoch)
	// The same with the listing's indexes.
	si, err := New(s.db, Options{Table: s.opts.Table, Retention: -1, ListIndexes: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = si.Close() }()
	if err := si.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("ANALYZE TABLE " + s.table); err != nil {
		t.Fatal(err)
	}
	checkPlans(t, si, queries, ins, o.Epoch)
}

// checkPlans lists each query of queries on s: it EXPLAINs every statement of
// the first page, the page after it and the page before that one, and walks
// every page to check that it finds the tasks of ins that match (the first 1,500
// owned by epoch, t00000 running).
func checkPlans(t *testing.T, s *Store, queries []store.TaskQuery, ins []store.Change, epoch uint64) {
	t.Helper()
	ctx := context.Background()
	checked := 0
	for _, q := range queries {
		q.Limit = 20
		p := planList(&q, s.opts.ListIndexes)
		var from *listPos
		for page := range 3 {
			tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{q: tx}
			pg, err := s.listPage(ctx, rec, &q, &p, from)
			_ = tx.Rollback()
			if err != nil {
				t.Fatalf("listPage(%+v) error = %v", q, err)
			}
			for _, stmt := range rec.stmts {
				if !strings.Contains(stmt, " FROM "+s.table+" ") {
					continue // the owner table and the start sets, by primary key
				}
				checked++
				explainList(t, s.db, q, stmt)
			}
			// Page 1 is the page after the first, page 2 the page before that one.
			cursor, field := pg.Next, "After"
			if page == 1 {
				cursor, field = pg.Prev, "Before"
				q.After, q.Before = "", cursor
			} else {
				q.After = cursor
			}
			if cursor == "" {
				break
			}
			pos, err := decodePos(&p, field, cursor)
			if err != nil {
				t.Fatalf("decodePos(%s) error = %v", field, err)
			}
			from = &pos
		}
		// The whole walk finds every match once.
		q.After, q.Before, q.Limit = "", "", 50
		want := map[string]bool{}
		for i, c := range ins {
			tk := c.Task
			owner := uint64(0)
			if i < 1500 { // mysqlstore keeps the last owner of a terminal task
				owner = epoch
			}
			if tk.ID == "t00000" {
				tk.State = store.Running
			}
			if q.Matches(&tk, owner) {
				want[tk.ID] = true
			}
		}
		got := map[string]bool{}
		for range 1000 {
			pg, err := s.ListTasks(ctx, q)
			if err != nil {
				t.Fatalf("ListTasks(%+v) error = %v", q, err)
			}
			for _, ti := range pg.Tasks {
				if got[ti.ID] || !want[ti.ID] {
					t.Fatalf("ListTasks(%+v): %s listed twice or not a match", q, ti.ID)
				}
				got[ti.ID] = true
			}
			if q.After = pg.Next; q.After == "" {
				break
			}
		}
		if len(got) != len(want) {
			t.Errorf("ListTasks(%+v) walk (ListIndexes %v): %d tasks, want %d", q, s.opts.ListIndexes, len(got), len(want))
		}
	}
	if checked < 2*len(queries) {
		t.Fatalf("%d statements EXPLAINed, want at least %d", checked, 2*len(queries))
	}
}

// explainList EXPLAINs stmt and fails the test unless it reads one table by a range
// (or the rows of given keys) of one index, with no filesort.
func explainList(t *testing.T, db *sql.DB, q store.TaskQuery, stmt string) {
	t.Helper()
	rows, err := db.Query("EXPLAIN " + stmt)
	if err != nil {
		t.Fatalf("EXPLAIN %.200s: %v", stmt, err)
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
		if typ.String != "range" && typ.String != "ref" && typ.String != "const" && typ.String != "eq_ref" ||
			key.String == "" || strings.Contains(extra.String, "filesort") {
			t.Errorf("ListTasks(%+v): reads %s on %q (%s), want a range of an index without filesort: %.300s",
				q, typ.String, key.String, extra.String, stmt)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("ListTasks(%+v): %d tables read, want 1: %.200s", q, n, stmt)
	}
}
