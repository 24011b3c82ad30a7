package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/kernel"
)

// TestStatementsUseThePrimaryKey EXPLAINs the statements a batch generates, for one row
// and for several: each must read the primary key, never scan the table. Upserts
// (INSERT … ON DUPLICATE KEY UPDATE, for rows with many distinct values) are primary-key
// writes by construction, with no plan to EXPLAIN.
func TestStatementsUseThePrimaryKey(t *testing.T) {
	dsn := os.Getenv("AX_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	table := fmt.Sprintf("axt_explain_%d", os.Getpid())
	s, err := New(db, Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = s.Close()
		for _, suffix := range []string{"", ownersSuffix, leasesSuffix, epochsSuffix} {
			_, _ = db.Exec("DROP TABLE IF EXISTS `" + table + suffix + "`")
		}
	}()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() = %v (run scripts/ensure-mariadb.sh if no server answers)", err)
	}
	// Enough rows that a scan would not be the cheapest plan.
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var ins []kernel.Change
	for i := range 2000 {
		ins = append(ins, kernel.Change{Op: kernel.OpInsert, Task: kernel.StoredTask{
			ID: fmt.Sprintf("t%05d", i), Kind: "k", State: kernel.Queued, Fence: 1, UpdatedAt: now,
		}})
	}
	if _, err := s.Commit(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("ANALYZE TABLE `" + table + "`"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n      int
		retry  bool // each row gets its own due time and error: an upsert
		upsert bool
	}{{1, true, false}, {2, true, false}, {50, false, false}, {50, true, true}} {
		n := tc.n
		var changes []kernel.Change
		for i := range n {
			id := fmt.Sprintf("t%05d", i*7)
			at := now.Add(time.Duration(i%5) * time.Millisecond) // a few distinct times
			changes = append(changes,
				kernel.Change{Op: kernel.OpStart, Fence: 1, Task: kernel.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: at}})
			if tc.retry {
				changes = append(changes,
					kernel.Change{Op: kernel.OpRetry, Fence: 2, Task: kernel.StoredTask{ID: id, RunAt: now.Add(time.Duration(i) * time.Second), LastError: id, UpdatedAt: at}})
			} else {
				changes = append(changes, kernel.Change{Op: kernel.OpSucceed, Fence: 2, Task: kernel.StoredTask{ID: id, UpdatedAt: at}})
			}
		}
		b := s.newBatch(changes)
		rows := map[string]*row{}
		for k, id := range b.ids {
			c := &b.changes[b.first[k]]
			rows[id] = &row{id: id, attempt: -1, exists: true, present: true, preFence: c.Fence, fence: c.Fence, state: kernel.Queued}
		}
		plan(b, rows, map[string]string{})
		stmts := s.statements(rows, b.ids, false, 0)
		q := newQuery(64).raw("SELECT id FROM ").raw(s.table).raw(" WHERE id IN ").hexList(b.ids).raw(" FOR UPDATE")
		queries := []string{q.String()}
		for _, st := range stmts {
			if upsert := strings.HasPrefix(st.sql, "INSERT"); upsert != tc.upsert {
				t.Errorf("%d rows: %.80s…, want upsert %v", n, st.sql, tc.upsert)
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
