package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/axsched/ax/bench"
)

// The PostgreSQL of the river configuration.
const (
	// pgDSNEnv names the variable holding the PostgreSQL connection string.
	pgDSNEnv = "AX_PG_DSN"
	// pgDSNDefault is the connection string when pgDSNEnv is unset.
	pgDSNDefault = "postgres://postgres@127.0.0.1:5432/test"
	// riverFetchCooldown is river's FetchCooldown here: its minimum, not its
	// default of 100 ms, which would cap it near MaxWorkers jobs per 100 ms.
	riverFetchCooldown = river.FetchCooldownMin
	// drainPoll is how often a peer's drain counts the completed jobs.
	drainPoll = 5 * time.Millisecond
)

// riverConfig is riverqueue/river on PostgreSQL, each run in a schema of its
// own, dropped after it.
func riverConfig() bench.Factory {
	return bench.Factory{
		Name: "river-pg", Mode: bench.Blocking, DurableTx: true, Flows: true,
		Doc: "durable scenarios only: riverqueue/river on PostgreSQL at $" + pgDSNEnv + " (Insert / InsertMany, MaxWorkers conc, FetchCooldown 1 ms); " +
			"done when every job is 'completed' in river_job; flows-durable: a chain of jobs, each inserting the next in its JobCompleteTx transaction",
		Durable: openRiver,
	}
}

// schemaSeq makes the schemas of one process distinct.
var schemaSeq atomic.Int64

type riverArgs struct {
	P []byte `json:"p"`
}

func (riverArgs) Kind() string { return "axbench_noop" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	runs *atomic.Int64
}

func (w *riverWorker) Work(context.Context, *river.Job[riverArgs]) error {
	w.runs.Add(1)
	return nil
}

// riverPeer is a started river client and what its drain needs.
type riverPeer struct {
	c      *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
	schema string
	runs   atomic.Int64
	acked  atomic.Int64
	// orderSeq numbers the rows of the callers' table (submitTx).
	orderSeq atomic.Int64
	// stopped is set once Drain stopped the client; read by close, after it.
	stopped bool
	// flows runs the flows-durable scenario's chains.
	flows *riverFlows
}

func openRiver(ctx context.Context, p bench.Params) (*bench.DurableSetup, error) {
	dsn, where := os.Getenv(pgDSNEnv), "$"+pgDSNEnv
	if dsn == "" {
		dsn, where = pgDSNDefault, "$"+pgDSNEnv+" (unset: "+pgDSNDefault+")"
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%s does not parse", where) // the error may quote the password
	}
	cfg.MaxConns = 60 // 50 callers, the client's own connections
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	schema := fmt.Sprintf("axbench_river_%d_%d_%d", os.Getpid(), time.Now().Unix(), schemaSeq.Add(1))
	rp := &riverPeer{pool: pool, schema: schema}
	rp.flows = &riverFlows{rp: rp, work: p.Work}
	fail := func(err error) (*bench.DurableSetup, error) {
		_ = rp.dropAndClose()
		return nil, fmt.Errorf("no usable PostgreSQL at %s (set %s): %w", where, pgDSNEnv, err)
	}
	mctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	if _, err := pool.Exec(mctx, "CREATE SCHEMA "+schema); err != nil {
		return fail(err)
	}
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		return fail(err)
	}
	if _, err := m.Migrate(mctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(err)
	}
	if _, err := pool.Exec(mctx, "CREATE TABLE "+schema+".orders (id BIGINT NOT NULL PRIMARY KEY, note BYTEA NOT NULL)"); err != nil {
		return fail(err)
	}
	if err := rp.flows.createTable(mctx); err != nil {
		return fail(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{runs: &rp.runs})
	rp.flows.addFlowWorkers(workers)
	rp.c, err = river.NewClient(driver, &river.Config{
		Schema:        schema,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: p.Conc}},
		Workers:       workers,
		FetchCooldown: riverFetchCooldown,
	})
	if err != nil {
		return fail(err)
	}
	if err := rp.c.Start(ctx); err != nil {
		return fail(err)
	}
	return &bench.DurableSetup{
		Peer: rp, Succeeded: rp.completed, Close: rp.close, TxSubmit: rp.submitTx, FlowPeer: rp.flows,
		ServerCPU: serverCPU(pgDSNEnv, cfg.ConnConfig.Host, int(cfg.ConnConfig.Port), postgresProcs),
	}, nil
}

func (r *riverPeer) SubmitMany(ctx context.Context, payloads [][]byte) error {
	ps := make([]river.InsertManyParams, len(payloads))
	for i, p := range payloads {
		ps[i] = river.InsertManyParams{Args: riverArgs{P: p}}
	}
	if _, err := r.c.InsertMany(ctx, ps); err != nil {
		return err
	}
	r.acked.Add(int64(len(payloads)))
	return nil
}

func (r *riverPeer) Submit(ctx context.Context, payload []byte) error {
	if _, err := r.c.Insert(ctx, riverArgs{P: payload}, nil); err != nil {
		return err
	}
	r.acked.Add(1)
	return nil
}

// submitTx inserts a row into the callers' table and one job (InsertTx) in
// one transaction, and commits it.
func (r *riverPeer) submitTx(ctx context.Context, payload []byte) (string, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "INSERT INTO "+r.schema+".orders (id, note) VALUES ($1, $2)", r.orderSeq.Add(1), payload); err != nil {
		return "", err
	}
	if _, err := r.c.InsertTx(ctx, tx, riverArgs{P: payload}, nil); err != nil {
		return "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	r.acked.Add(1)
	return "", nil
}

// Drain waits until river_job holds every acknowledged job as completed, then
// stops the client.
func (r *riverPeer) Drain(ctx context.Context) error {
	if err := waitCompleted(ctx, r.acked.Load(), r.completed); err != nil {
		return err
	}
	err := r.c.Stop(ctx)
	r.stopped = err == nil
	return err
}

func (r *riverPeer) Executed() int64 { return r.runs.Load() }

func (r *riverPeer) completed(ctx context.Context) (int, error) {
	var n int
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM "+r.schema+".river_job WHERE state = 'completed'").Scan(&n)
	return n, err
}

func (r *riverPeer) close() error {
	var err error
	if r.c != nil && !r.stopped {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		err = r.c.Stop(ctx)
		cancel()
	}
	return errors.Join(err, r.dropAndClose())
}

func (r *riverPeer) dropAndClose() error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	_, err := r.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+r.schema+" CASCADE")
	r.pool.Close()
	return err
}

// waitCompleted polls completed until it reports want, ctx ends or it fails.
func waitCompleted(ctx context.Context, want int64, completed func(context.Context) (int, error)) error {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		n, err := completed(ctx)
		if err != nil {
			return err
		}
		if int64(n) >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs completed: %w", n, want, ctx.Err())
		case <-t.C:
		}
	}
}
