package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/go-sql-driver/mysql"
)

// consoleBenchTable holds the rows of BenchmarkConsoleTasks: made once, kept between
// runs (drop it to make it again).
const (
	consoleBenchTable = "hbench_console_tasks_1m_v2"
	consoleBenchRows  = 1_000_000
)

// BenchmarkConsoleTasks serves the console's overview and tasks pages from a kernel
// on a table of 1,000,000 durable rows (93 % succeeded and 5 % failed, spread
// over the IDs, and the newest 2 % delayed; ten kinds, five groups of a hundred
// keys) and reports each request's p50 and p99. The filters of a kind and of a
// group run with the listing's indexes (Options.ListIndexes) and without. The table
// is filled once with multi-row INSERTs and kept; it is skipped when no
// MariaDB answers.
//
//	cd mysqlstore && go test -run '^$' -bench ConsoleTasks -benchtime 2000x
func BenchmarkConsoleTasks(b *testing.B) {
	for _, idx := range []bool{false, true} {
		b.Run(fmt.Sprintf("ListIndexes=%v", idx), func(b *testing.B) { benchConsoleTasks(b, idx) })
	}
}

func benchConsoleTasks(b *testing.B, listIndexes bool) {
	s := consoleBenchStore(b, listIndexes)
	ctx := context.Background()
	k, err := kernel.New(kernel.Config{Store: s, Owner: fmt.Sprintf("console-bench-%v", listIndexes)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k.Close() })
	h, err := console.New(console.Options{Kernel: k, Store: s, Interval: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	// Deep pages start near the end of their ranges: cursors of rows found by
	// one read of the index each, made as the store makes them.
	deep := func(q store.TaskQuery, sql string) string {
		p := planList(&q, s.opts.ListIndexes)
		seg := len(p.segs) - 1
		var vals []any
		row := s.db.QueryRowContext(ctx, sql)
		switch len(p.segs[seg].cols) {
		case 4:
			var owner, prio, runAt int64
			var id string
			if err := row.Scan(&owner, &prio, &runAt, &id); err != nil {
				b.Fatal(err)
			}
			vals = []any{owner, prio, runAt, id}
		default:
			var id string
			if err := row.Scan(&id); err != nil {
				b.Fatal(err)
			}
			vals = []any{id}
		}
		return listPos{seg: seg, vals: vals}.encode(p.kind)
	}
	succeeded := stateCode(store.Succeeded)
	deepState := deep(store.TaskQuery{State: store.Succeeded}, fmt.Sprintf("SELECT owner, priority, run_at, id FROM %s FORCE INDEX (%s) "+
		"WHERE state = %d ORDER BY owner DESC, priority DESC, run_at DESC, id DESC LIMIT 1 OFFSET 5000", s.table, ownerIndexName, succeeded))
	deepKind := deep(store.TaskQuery{Kind: "kind3"}, "SELECT id FROM "+s.table+" FORCE INDEX ("+kindIndexName+
		") WHERE kind = 'kind3' ORDER BY id DESC LIMIT 1 OFFSET 5000")
	deepAll := deep(store.TaskQuery{}, "SELECT id FROM "+s.table+" ORDER BY id DESC LIMIT 1 OFFSET 5000")
	for _, bc := range []struct {
		name, path string
		listing    bool // served by the listing's indexes when they are on: run with and without
	}{
		{"overview", "/", false},
		{"overview-api", "/api/v1/overview", false},
		{"tasks/first", "/tasks", false},
		{"tasks/deep", "/tasks?after=" + url.QueryEscape(deepAll), false},
		{"tasks/state=failed/first", "/tasks?state=failed", false},
		{"tasks/state=succeeded/deep", "/tasks?state=succeeded&after=" + url.QueryEscape(deepState), false},
		{"tasks/state=failed,kind=kind2/first", "/tasks?state=failed&kind=kind2", false},
		{"tasks/state=succeeded,kind=kind3/deep", "/tasks?state=succeeded&kind=kind3&after=" + url.QueryEscape(deepState), false},
		{"tasks/state=failed,kind=kind3/none", "/tasks?state=failed&kind=kind3", false},
		{"tasks/kind=kind3/first", "/tasks?kind=kind3", true},
		{"tasks/kind=kind3/deep", "/tasks?kind=kind3&after=" + url.QueryEscape(deepKind), true},
		{"tasks/group=g2,key=k42/first", "/tasks?group=g2&key=k42", true},
		{"api/tasks/state=failed,kind=kind2/first", "/api/v1/tasks?state=failed&kind=kind2", false},
		{"api/task", "/api/v1/tasks/b0500000", false},
	} {
		if listIndexes && !bc.listing {
			continue
		}
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, bc.path, nil)
			var ds []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				ds = append(ds, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s = %d %s", bc.path, rec.Code, rec.Body)
				}
			}
			slices.Sort(ds)
			pct := func(p float64) float64 {
				return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}

// consoleBenchStore returns a store on consoleBenchTable, filled with its rows, or
// skips b when no database answers.
func consoleBenchStore(b *testing.B, listIndexes bool) *Store {
	b.Helper()
	dsn := os.Getenv("AX_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	db := sql.OpenDB(conn)
	b.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		b.Skipf("no MariaDB at %s: %v", dsn, err)
	}
	s, err := New(db, Options{Table: consoleBenchTable, Retention: -1, ListIndexes: listIndexes})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + s.table).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n != consoleBenchRows {
		fillConsoleBench(b, s)
	}
	return s
}

// fillConsoleBench empties the table and inserts its rows, 1,000 per INSERT, from
// two connections.
func fillConsoleBench(b *testing.B, s *Store) {
	b.Helper()
	t0 := time.Now()
	if _, err := s.db.Exec("TRUNCATE TABLE " + s.table); err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	const perInsert = 1000
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			for first := w * perInsert; first < consoleBenchRows; first += 2 * perInsert {
				var sb strings.Builder
				sb.WriteString("INSERT INTO " + s.table + " (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, fence, " +
					"unique_key, live_key, state, last_error, created_at, updated_at, owner, grp, gkey) VALUES ")
				for i := first; i < first+perInsert; i++ {
					st, attempt, lastErr, runAt := store.Succeeded, 1, "", base+int64(i)
					switch {
					case i >= consoleBenchRows-consoleBenchRows/50: // the newest 2 %
						st, attempt, runAt = store.Delayed, 0, base+int64(365*24*time.Hour/time.Millisecond)+int64(i)
					case i%20 == 2:
						st, lastErr = store.Failed, fmt.Sprintf("upstream said 503 to task %d", i)
					}
					if i > first {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, "('b%07d','kind%d',X'7B2261223A317D',%d,%d,30000000000,3,%d,1,'',NULL,%d,'%s',%d,%d,0,'g%d','k%d')",
						i, i%10, priorityCode(store.Priority(1+i%3)), runAt, attempt, stateCode(st), lastErr, base+int64(i), runAt, i%5, i%100)
				}
				if _, err := s.db.Exec(sb.String()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if _, err := s.db.Exec("ANALYZE TABLE " + s.table); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %s with %d rows in %v", consoleBenchTable, consoleBenchRows, time.Since(t0).Round(time.Second))
}
