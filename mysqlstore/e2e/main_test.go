// Package e2e holds end-to-end tests of durable tasks: a kernel on a mysqlstore.Store on
// a real MariaDB, crashed with SIGKILL, cut off by KILL, stopped and started, and fed
// bad input. It has no non-test code.
//
// The tests use the server named by AX_MYSQL_DSN (default root@tcp(127.0.0.1:3306)/test;
// `make db` starts one), each on a table or database of its own, and a private mariadbd
// of their own where they stop the server. AX_E2E_CRASH_TASKS and AX_E2E_CRASH_KILLS
// scale the crash test down for a quick local run, and AX_E2E_SCHED_SECONDS,
// AX_E2E_SCHED_KILLS and AX_E2E_SCHED_DOWNS the durable-schedule kill test.
package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
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

// openDB opens the test database (an admin session of the test, not a store's) and
// closes it in t.Cleanup. An unreachable database fails the test: run
// scripts/ensure-mariadb.sh (or `make db`) first.
func openDB(t testing.TB) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testDSN())
	if err != nil {
		t.Fatalf("AX_MYSQL_DSN does not parse: %v", err)
	}
	cfg.Logger = discard{}
	return openConfig(t, cfg)
}

func openConfig(t testing.TB, cfg *mysql.Config) *sql.DB {
	t.Helper()
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("no MariaDB/MySQL at %s: %v\n"+
			"run `bash scripts/ensure-mariadb.sh` (or `make db`) from the repository root to start one", cfg.Addr, err)
	}
	return db
}

type discard struct{}

func (discard) Print(...any) {}

var nameSeq atomic.Int64

// uniqueName returns a table or database name unique in this run and across runs.
func uniqueName(tag string) string {
	return fmt.Sprintf("axe2e_%s_%d_%d_%d", tag, os.Getpid()%100000, time.Now().UnixNano()%1000000, nameSeq.Add(1))
}

// ownTable returns a table name of the test's own, dropped in t.Cleanup.
func ownTable(t testing.TB, db *sql.DB, tag string) string {
	t.Helper()
	name := uniqueName(tag)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, suffix := range []string{"", "_owners", "_leases", "_epochs", "_sched", "_starts", "_stats"} { // the store's tables
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+name+suffix+"`"); err != nil {
				t.Errorf("DROP TABLE %s%s: %v", name, suffix, err)
			}
		}
	})
	return name
}

// State codes of mysqlstore's stable encoding (sqlbuild.go, "do not renumber"), for
// the tests' bulk reads of a table; each test checks one row against Store.Get.
const (
	codeSucceeded = 5
	codeCanceled  = 8
)

// pollUntil polls cond every interval until it reports true, and fails the test when
// timeout passes first or cond returns an error. It is for state outside the test
// process (a server, a table), which no channel announces.
func pollUntil(t testing.TB, what string, interval, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use: a slog handler's sink.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// envInt returns the integer in the environment variable name, or def when it is unset.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s = %q: want a non-negative integer", name, v)
	}
	return n
}

// tail returns the last n bytes of s, for failure messages.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// noSecret fails the test when text contains secret.
func noSecret(t testing.TB, where, text, secret string) {
	t.Helper()
	if strings.Contains(text, secret) {
		t.Errorf("%s holds the password %q: %s", where, secret, text)
	}
}
