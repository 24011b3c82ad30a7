package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/axsched/ax/mysqlstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dsnDefault is the database the tests use unless AX_MYSQL_DSN names another.
const dsnDefault = "root@tcp(127.0.0.1:3306)/test"

func testDSN() string {
	if dsn := os.Getenv("AX_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return dsnDefault
}

// openDB opens the test database and closes it in t.Cleanup. An unreachable database
// fails the test: run scripts/ensure-mariadb.sh (or `make db`) first.
func openDB(t testing.TB) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testDSN())
	if err != nil {
		t.Fatalf("AX_MYSQL_DSN does not parse: %v", err)
	}
	cfg.Logger = discard{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("no MariaDB/MySQL at AX_MYSQL_DSN (default %s): %v\n"+
			"run `bash scripts/ensure-mariadb.sh` (or `make db`) from the repository root to start one", dsnDefault, err)
	}
	return db
}

type discard struct{}

func (discard) Print(...any) {}

var tableSeq atomic.Int64

// tableName returns a table name of the test's own, unique in this run and across runs.
func tableName(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	suffix := fmt.Sprintf("_%d_%d", os.Getpid()%100000, tableSeq.Add(1))
	name = "axt_" + name
	if len(name)+len(suffix) > mysqlstore.TableMax {
		name = name[:mysqlstore.TableMax-len(suffix)]
	}
	return name + suffix
}

// setup returns a migrated store on a table of the test's own, dropped with the store
// closed in t.Cleanup.
func setup(t testing.TB, opts mysqlstore.Options) (*mysqlstore.Store, *sql.DB) {
	t.Helper()
	db := openDB(t)
	if opts.Table == "" {
		opts.Table = tableName(t)
	}
	if opts.Retention == 0 {
		opts.Retention = -1 // the purger only where a test wants it
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropTables(ctx, db, opts.Table); err != nil {
			t.Error(err)
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate() error = %v", err)
	}
	return s, db
}

// dropTables drops a store's tables: the task table named table and those named after it.
func dropTables(ctx context.Context, db *sql.DB, table string) error {
	for _, suffix := range []string{"", "_owners", "_leases", "_epochs", "_sched", "_starts", "_stats"} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+table+suffix+"`"); err != nil {
			return fmt.Errorf("DROP TABLE %s%s: %w", table, suffix, err)
		}
	}
	return nil
}
