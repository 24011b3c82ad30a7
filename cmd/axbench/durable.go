package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/bench"
	"github.com/axsched/ax/mysqlstore"
)

// The database of the MariaDB-backed durable configurations.
const (
	// dsnEnv names the variable holding the DSN (go-sql-driver/mysql format).
	dsnEnv = "AX_MYSQL_DSN"
	// dsnDefault is the DSN when dsnEnv is unset: the one `make db` starts.
	dsnDefault = "root@tcp(127.0.0.1:3306)/test"
	// snapshotEvery is the period of the snapshot configuration.
	snapshotEvery = 10 * time.Millisecond
	// migrateTimeout bounds reaching the server and creating the table.
	migrateTimeout = 15 * time.Second
	// dropTimeout bounds dropping the table after a run.
	dropTimeout = 30 * time.Second
	// succeededCode is how mysqlstore stores kernel.Succeeded in its state
	// column: a stable code of its schema (see stateCode in mysqlstore), never
	// renumbered. The scenario cross-checks it by reading tasks back with Get.
	succeededCode = "5"
)

// durableConfigs returns ax's durable configurations on MariaDB (or MySQL),
// then the peers': each run gets a fresh table, dropped after it.
func durableConfigs() []bench.Factory {
	return []bench.Factory{
		{
			Name: "ax-mariadb-ack", Mode: bench.Blocking, Priorities: true, DurableTx: true, Flows: true,
			Doc: "durable scenarios only: ax on mysqlstore (MariaDB at $" + dsnEnv + "), acknowledged mode: a submit returns once its group commit landed",
			Durable: func(ctx context.Context, _ bench.Params) (*bench.DurableSetup, error) {
				return openMariaDB(ctx, 0)
			},
			DurableJoin: func(_ context.Context, _ bench.Params, table string) (*bench.DurableSetup, error) {
				return joinMariaDB(table, 0)
			},
		},
		{
			Name: "ax-mariadb-snapshot", Mode: bench.Blocking, Priorities: true,
			Doc: "durable scenario only: ax on mysqlstore (MariaDB at $" + dsnEnv + "), periodic snapshot mode: submits return at once, the journal commits every " +
				snapshotEvery.String() + " (a crash may lose the last " + snapshotEvery.String() + " of submits)",
			Durable: func(ctx context.Context, _ bench.Params) (*bench.DurableSetup, error) {
				return openMariaDB(ctx, snapshotEvery)
			},
		},
		riverConfig(),
		asynqConfig(),
	}
}

// tableSeq makes the tables of one process distinct.
var tableSeq atomic.Int64

// openMariaDB opens a store on a new table of the database at $AX_MYSQL_DSN.
// Its errors name the variable, never the DSN, which may hold a password.
func openMariaDB(ctx context.Context, every time.Duration) (*bench.DurableSetup, error) {
	dsn, where := os.Getenv(dsnEnv), "$"+dsnEnv
	if dsn == "" {
		dsn, where = dsnDefault, "$"+dsnEnv+" (unset: "+dsnDefault+")"
	}
	table := fmt.Sprintf("axbench_durable_%d_%d_%d", os.Getpid(), time.Now().Unix(), tableSeq.Add(1))
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err) // mysqlstore leaves the password out
	}
	mctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	if err := s.Migrate(mctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("no usable MariaDB/MySQL at %s (set %s, or run `make db`): %w", where, dsnEnv, err)
	}
	quoted := "`" + table + "`"
	orders := "`" + table + "_orders`"
	if _, err := s.DB().ExecContext(mctx, "CREATE TABLE "+orders+" (id BIGINT NOT NULL PRIMARY KEY, note VARBINARY(64) NOT NULL) ENGINE=InnoDB"); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("%s: create the callers' table: %w", where, err)
	}
	var orderSeq atomic.Int64
	host, port := mysqlAddr(dsn)
	return &bench.DurableSetup{
		TxSubmit: func(ctx context.Context, payload []byte) (string, error) {
			return submitTx(ctx, s, orders, orderSeq.Add(1), payload)
		},
		Store:         s,
		Shared:        table,
		SnapshotEvery: every,
		ServerCPU:     serverCPU(dsnEnv, host, port, mariadbProcs),
		Succeeded: func(ctx context.Context) (int, error) {
			var n int
			err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quoted+" WHERE state = "+succeededCode).Scan(&n)
			return n, err
		},
		Close: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
			defer cancel()
			_, err := s.DB().ExecContext(ctx, "DROP TABLE IF EXISTS "+orders)
			return errors.Join(err, s.Drop(ctx), s.Close())
		},
	}, nil
}

// submitTx inserts row id into the callers' table orders and submits one task
// with payload to s's pool, in one transaction, commits it and wakes the
// kernels of s.
func submitTx(ctx context.Context, s *mysqlstore.Store, orders string, id int64, payload []byte) (string, error) {
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+orders+" (id, note) VALUES (?, ?)", id, payload); err != nil {
		return "", err
	}
	ids, err := s.SubmitTx(ctx, tx, mysqlstore.TxTask{Kind: bench.DurableKind, Payload: payload})
	if err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", err
	}
	s.Notify()
	return ids[0], nil
}

// joinMariaDB opens the store of table, made by openMariaDB in another process;
// closing it leaves the table.
func joinMariaDB(table string, every time.Duration) (*bench.DurableSetup, error) {
	dsn := cmp.Or(os.Getenv(dsnEnv), dsnDefault)
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", dsnEnv, err)
	}
	return &bench.DurableSetup{Store: s, SnapshotEvery: every}, nil
}

// mysqlAddr returns the server's host and TCP port in dsn, or the socket's
// path and 0; "" and 0 if dsn does not parse.
func mysqlAddr(dsn string) (string, int) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", 0
	}
	if cfg.Net == "unix" {
		return cfg.Addr, 0
	}
	return hostPort(cfg.Addr)
}
