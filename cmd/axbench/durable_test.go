package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/bench"
	"github.com/axsched/ax/mysqlstore"
)

// TestDurableUnreachableDatabase checks that a durable configuration without a
// server fails at once, naming its variable and never the password.
func TestDurableUnreachableDatabase(t *testing.T) {
	t.Setenv(dsnEnv, "axuser:s3cretpw@tcp(127.0.0.1:1)/test?timeout=2s")
	t.Setenv(pgDSNEnv, "postgres://axuser:s3cretpw@127.0.0.1:1/test?connect_timeout=2")
	t.Setenv(redisAddrEnv, "127.0.0.1:1")
	vars := map[string]string{"ax-mariadb-ack": dsnEnv, "ax-mariadb-snapshot": dsnEnv, "river-pg": pgDSNEnv, "asynq-redis": redisAddrEnv}
	for _, f := range durableConfigs() {
		t.Run(f.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			setup, err := f.Durable(ctx, bench.Params{})
			if err == nil {
				_ = setup.Close()
				t.Fatal("Durable() error = nil, want one: nothing listens on port 1")
			}
			v := vars[f.Name]
			if msg := err.Error(); v == "" || !strings.Contains(msg, "$"+v) || strings.Contains(msg, "s3cretpw") {
				t.Errorf("Durable() error = %q, want it to name $%s and not the password", msg, v)
			}
		})
	}
}

// TestDurableOnMariaDB runs the durable scenario small on the MariaDB
// configurations, in this process, and checks that nothing is lost and that
// the run's tables are dropped.
func TestDurableOnMariaDB(t *testing.T) {
	db := mariaDB(t)
	before := durableTables(t, db)
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"ax-memstore", "ax-mariadb-ack", "ax-mariadb-snapshot"}
	reports, err := bench.Run(t.Context(), reg, bench.Options{
		Scenarios: []string{"durable"}, Executors: names,
		Params: bench.Params{N: 600, Conc: 8}, Reps: 1, InProcess: true,
	})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	for _, r := range reports[0].Results {
		if len(r.Errors) > 0 {
			t.Fatalf("%s: errors %v", r.Executor, r.Errors)
		}
		for _, name := range []string{"lost", "lost_bulk", "lost_callers"} {
			if s, ok := r.Metrics[name]; !ok || s.Max != 0 {
				t.Errorf("%s: %s = %+v (present %v), want 0 (notes %v)", r.Executor, name, s, ok, r.Notes)
			}
		}
		for _, name := range []string{"stored_bulk", "stored_callers"} {
			if s := r.Metrics[name]; s.Median != 600 {
				t.Errorf("%s: %s = %v, want 600", r.Executor, name, s.Median)
			}
		}
		if s := r.Metrics["rows_per_commit_callers"]; s.Median < 1 {
			t.Errorf("%s: rows_per_commit_callers = %v, want >= 1", r.Executor, s.Median)
		}
		checkServerCPU(t, r, r.Executor != "ax-memstore")
	}
	var out bytes.Buffer
	if err := writeTables(&out, reports); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== durable", "bulk tasks/s", "callers ack p99 µs", "ax-mariadb-snapshot", "÷ ax-memstore"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if after := durableTables(t, db); after != before {
		t.Errorf("axbench_durable_ tables: %d before the run, %d after; want them dropped", before, after)
	}
}

// checkServerCPU checks that r has the client's CPU per task and, if it has
// a server, the server's or a note saying why not (a server in another
// container has no process on this machine).
func checkServerCPU(t *testing.T, r bench.Result, server bool) {
	t.Helper()
	for _, sh := range []string{"bulk", "callers"} {
		if s, ok := r.Metrics["client_cpu_us_per_task_"+sh]; !ok || s.Median <= 0 {
			t.Errorf("%s: client_cpu_us_per_task_%s = %v (present %v), want > 0", r.Executor, sh, s.Median, ok)
		}
		s, ok := r.Metrics["server_cpu_us_per_task_"+sh]
		noted := slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "server CPU not measured: ") })
		switch {
		case !server && (ok || noted):
			t.Errorf("%s: server_cpu_us_per_task_%s = %v (present %v), notes %q: want neither, it has no server", r.Executor, sh, s.Median, ok, r.Notes)
		case server && ok == noted:
			t.Errorf("%s: server_cpu_us_per_task_%s = %v (present %v), notes %q: want the figure or a note", r.Executor, sh, s.Median, ok, r.Notes)
		case ok && s.Median < 0:
			t.Errorf("%s: server_cpu_us_per_task_%s = %v, want >= 0", r.Executor, sh, s.Median)
		}
	}
}

// mariaDB opens the database at $AX_MYSQL_DSN and fails the test when none
// answers (`make test` and `make db` start one).
func mariaDB(t *testing.T) *sql.DB {
	t.Helper()
	s, err := openMariaDB(t.Context(), 0)
	if err != nil {
		t.Fatalf("no MariaDB (run `make db`): %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s.Store.(*mysqlstore.Store).DB()
}

func durableTables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(t.Context(),
		`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'axbench\_durable\_%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDurablePeers runs the durable scenario small on river and asynq. Their
// servers (PostgreSQL at $AX_PG_DSN, Redis at $AX_REDIS_ADDR) run on the project's
// machines; a missing one fails the test rather than hiding the peers' results.
func TestDurablePeers(t *testing.T) {
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"river-pg", "asynq-redis"} {
		t.Run(name, func(t *testing.T) {
			reports, err := bench.Run(t.Context(), reg, bench.Options{
				Scenarios: []string{"durable"}, Executors: []string{name},
				Params: bench.Params{N: 300, Conc: 8}, Reps: 1, InProcess: true,
			})
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			r := reports[0].Results[0]
			if len(r.Errors) > 0 {
				t.Fatalf("errors %v", r.Errors)
			}
			for _, m := range []string{"lost", "lost_bulk", "lost_callers"} {
				if s, ok := r.Metrics[m]; !ok || s.Max != 0 {
					t.Errorf("%s = %+v (present %v), want 0 (notes %v)", m, s, ok, r.Notes)
				}
			}
			if s := r.Metrics["executed_callers"]; s.Median != 300 {
				t.Errorf("executed_callers = %v, want 300", s.Median)
			}
			checkServerCPU(t, r, true)
			if n := leftovers(t, name); n != 0 {
				t.Errorf("%d schemas or keys of this process left behind, want none", n)
			}
		})
	}
}

// leftovers counts what the runs of this process left in the peer's server.
func leftovers(t *testing.T, name string) int {
	t.Helper()
	ctx := t.Context()
	switch name {
	case "river-pg":
		pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv(pgDSNEnv), pgDSNDefault))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var n int
		q := fmt.Sprintf("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'axbench_river_%d_%%'", os.Getpid())
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	case "asynq-redis":
		rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv(redisAddrEnv), redisAddrDefault)})
		defer func() { _ = rdb.Close() }()
		n := 0
		it := rdb.Scan(ctx, 0, fmt.Sprintf("asynq:{axbench_%d_*", os.Getpid()), 1000).Iterator()
		for it.Next(ctx) {
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}

// TestDurableMultiOnMariaDB runs durable-multi small: member processes (this
// test binary, see TestMain) share each table, and nothing is lost.
func TestDurableMultiOnMariaDB(t *testing.T) {
	db := mariaDB(t)
	before := durableTables(t, db)
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	reports, err := bench.Run(t.Context(), reg, bench.Options{
		Scenarios: []string{"durable-multi"}, Executors: []string{"ax-mariadb-ack"},
		Params: bench.Params{N: 300, Conc: 8}, Reps: 1, InProcess: true,
	})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	r := reports[0].Results[0]
	if len(r.Errors) > 0 {
		t.Fatalf("errors %v", r.Errors)
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		if s := r.Metrics["stored_"+p]; s.Median != 300 {
			t.Errorf("stored_%s = %v, want 300 (notes %v)", p, s.Median, r.Notes)
		}
		if s := r.Metrics["lost_"+p]; s.Max != 0 {
			t.Errorf("lost_%s = %v, want 0", p, s.Max)
		}
	}
	if s := r.Metrics["ratio_p3_p1"]; s.Median <= 0 {
		t.Errorf("ratio_p3_p1 = %v, want > 0", s.Median)
	}
	if after := durableTables(t, db); after != before {
		t.Errorf("durable tables: %d before, %d after, want the run's dropped", before, after)
	}
}

// TestDurableTx runs durable-tx small on ax (MariaDB) and river (PostgreSQL): every
// task submitted in a caller's transaction runs, none is lost, and the run's tables
// and schemas are dropped.
func TestDurableTx(t *testing.T) {
	db := mariaDB(t)
	before := durableTables(t, db)
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	reports, err := bench.Run(t.Context(), reg, bench.Options{
		Scenarios: []string{"durable-tx"}, Executors: []string{"ax-mariadb-ack", "river-pg"},
		Params: bench.Params{N: 300, Conc: 8}, Reps: 1, InProcess: true,
	})
	if err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if len(reports) != 1 || len(reports[0].Results) != 2 {
		t.Fatalf("Run() = %d reports, want 1 with 2 results", len(reports))
	}
	for _, r := range reports[0].Results {
		if len(r.Errors) > 0 {
			t.Fatalf("%s: errors %v", r.Executor, r.Errors)
		}
		if s := r.Metrics["stored_tx"]; s.Median != 300 {
			t.Errorf("%s: stored_tx = %v, want 300 (notes %v)", r.Executor, s.Median, r.Notes)
		}
		if s := r.Metrics["lost"]; s.Max != 0 {
			t.Errorf("%s: lost = %v, want 0", r.Executor, s.Max)
		}
		if s := r.Metrics["ack_p99_us_tx"]; s.Median <= 0 {
			t.Errorf("%s: ack_p99_us_tx = %v, want > 0", r.Executor, s.Median)
		}
	}
	if after := durableTables(t, db); after != before {
		t.Errorf("durable tables: %d before, %d after, want the run's dropped", before, after)
	}
	if n := leftovers(t, "river-pg"); n != 0 {
		t.Errorf("%d river schemas of this process left behind, want none", n)
	}
}
