package browsertest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/schedule"
)

// dsnDefault is the database the tests use unless AX_MYSQL_DSN names another.
const dsnDefault = "root@tcp(127.0.0.1:3306)/test"

func testDSN() string {
	if dsn := os.Getenv("AX_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return dsnDefault
}

var tableSeq atomic.Int64

// env is a console served by httptest on a kernel whose store is a table of the
// test's own on the real MariaDB, with a scheduler on the same store; the
// console lists the store's tasks.
type env struct {
	k     *kernel.Kernel
	s     *schedule.Scheduler
	st    *mysqlstore.Store
	srv   *httptest.Server
	url   string // the console's root, with its final slash
	table string // the store's table
}

// setup migrates a table of the test's own (dropped at its end), starts a kernel
// with cfg on it (Store and Owner filled in when empty), a scheduler, and a console
// with o (Kernel and Scheduler filled in, and Store when empty) mounted under
// /console/, and stops them
// all at the end of the test. Before the kernel starts, register is called on it
// (to register durable kinds).
func setup(t *testing.T, cfg kernel.Config, o console.Options, register func(*kernel.Kernel)) *env {
	t.Helper()
	return setupWith(t, cfg, o, func(k *kernel.Kernel, _ *mysqlstore.Store, _ *console.Options) {
		if register != nil {
			register(k)
		}
	})
}

// setupWith is setup whose register is also given the store and the console's
// Options, before the console is made (to register durable flows and pass them
// in Options.Flows).
func setupWith(t *testing.T, cfg kernel.Config, o console.Options, register func(*kernel.Kernel, *mysqlstore.Store, *console.Options)) *env {
	t.Helper()
	table := fmt.Sprintf("browser_%d_%d_%d", os.Getpid()%100000, time.Now().UnixNano()%1000000, tableSeq.Add(1))
	st, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table})
	if err != nil {
		t.Fatalf("mysqlstore.Open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.Migrate(ctx); err != nil {
		_ = st.Close()
		t.Fatalf("Migrate: %v (run `bash scripts/ensure-mariadb.sh` or `make db` to start a MariaDB)", err)
	}
	// Cleanups run last first: the kernel and the scheduler stop, the tables are
	// dropped, then the store closes its pool.
	t.Cleanup(func() { _ = st.Close() })
	t.Cleanup(func() { dropTables(t, st.DB(), table) })

	if cfg.Store == nil {
		cfg.Store = st
	}
	if cfg.Owner == "" {
		cfg.Owner = "browser-1"
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatalf("kernel.New: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	register(k, st, &o)
	s, err := schedule.New(k, schedule.Config{Store: st})
	if err != nil {
		t.Fatalf("schedule.New: %v", err)
	}
	t.Cleanup(s.Stop)

	o.Kernel, o.Scheduler = k, s
	if o.Store == nil {
		o.Store = st
	}
	h, err := console.New(o)
	if err != nil {
		t.Fatalf("console.New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{k: k, s: s, st: st, srv: srv, url: srv.URL + "/console/", table: table}
}

// dropTables drops the store's tables named after table.
func dropTables(t *testing.T, db *sql.DB, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, suffix := range []string{"", "_owners", "_leases", "_epochs", "_sched", "_starts", "_stats"} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+table+suffix+"`"); err != nil {
			t.Errorf("DROP TABLE %s%s: %v", table, suffix, err)
		}
	}
}
