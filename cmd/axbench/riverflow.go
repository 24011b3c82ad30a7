package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/axsched/ax/bench"
)

// The flows-durable scenario's pipeline on river: a chain of jobs, each
// inserting the next in the transaction that completes it
// (river.JobCompleteTx), so that a job's completion and its successors commit
// or roll back together. fetch inserts the shards and the flow's counter row;
// each clean job increments the counter in its completion's transaction, and
// the one that brings it to the total inserts store; store's completion
// stores the flow's value in the counter row and ends the flow.

// flowsTable is the flows' counter table in the run's schema.
const flowsTable = "axbench_flows"

type riverFetchArgs struct {
	Flow int64  `json:"flow"`
	Seed uint64 `json:"seed"`
}

func (riverFetchArgs) Kind() string { return "axbench_flow_fetch" }

type riverCleanArgs struct {
	Flow  int64  `json:"flow"`
	Value uint64 `json:"value"`
	Index int    `json:"index"`
}

func (riverCleanArgs) Kind() string { return "axbench_flow_clean" }

type riverStoreArgs struct {
	Flow  int64  `json:"flow"`
	Value uint64 `json:"value"`
}

func (riverStoreArgs) Kind() string { return "axbench_flow_store" }

// riverFlows runs the chains on a riverPeer's client: its workers, and the
// flows the scenario waits for.
type riverFlows struct {
	rp   *riverPeer
	work time.Duration // bench.Params.Work
	runs atomic.Int64
	mu   sync.Mutex
	done map[int64]chan uint64 // by flow, until its store job completed
}

// addFlowWorkers registers the chain's workers on workers.
func (f *riverFlows) addFlowWorkers(workers *river.Workers) {
	river.AddWorker(workers, &riverFetchWorker{f: f})
	river.AddWorker(workers, &riverCleanWorker{f: f})
	river.AddWorker(workers, &riverStoreWorker{f: f})
}

// createTable creates the flows' counter table.
func (f *riverFlows) createTable(ctx context.Context) error {
	_, err := f.rp.pool.Exec(ctx, "CREATE TABLE "+f.rp.schema+"."+flowsTable+
		" (id BIGINT NOT NULL PRIMARY KEY, total INT NOT NULL, done INT NOT NULL, value BIGINT)")
	return err
}

// StartFlow inserts flow id's fetch job (Insert) and returns once it committed.
func (f *riverFlows) StartFlow(ctx context.Context, id int64, seed uint64) (<-chan uint64, error) {
	done := make(chan uint64, 1)
	f.mu.Lock()
	if f.done == nil {
		f.done = map[int64]chan uint64{}
	}
	f.done[id] = done
	f.mu.Unlock()
	if _, err := f.rp.c.Insert(ctx, riverFetchArgs{Flow: id, Seed: seed}, nil); err != nil {
		f.mu.Lock()
		delete(f.done, id)
		f.mu.Unlock()
		return nil, err
	}
	return done, nil
}

func (f *riverFlows) FlowRuns() int64 { return f.runs.Load() }

// ended tells the waiter of flow id that its store job completed with v.
func (f *riverFlows) ended(id int64, v uint64) {
	f.mu.Lock()
	done := f.done[id]
	delete(f.done, id)
	f.mu.Unlock()
	if done != nil {
		done <- v
	}
}

// completeTx completes job (river.JobCompleteTx) and runs body in one
// transaction, and commits it. body comes last, so that the row locks it takes
// (a flow's counter row) are held only until the commit.
func completeTx[T river.JobArgs](ctx context.Context, f *riverFlows, job *river.Job[T], body func(tx pgx.Tx) error) error {
	tx, err := f.rp.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("JobCompleteTx: %w", err)
	}
	if err := body(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

type riverFetchWorker struct {
	river.WorkerDefaults[riverFetchArgs]
	f *riverFlows
}

// Work computes the flow's value, then inserts its counter row and its shards
// (InsertManyTx) in the transaction that completes it.
func (w *riverFetchWorker) Work(ctx context.Context, job *river.Job[riverFetchArgs]) error {
	w.f.runs.Add(1)
	v := bench.FlowWork(w.f.work, job.Args.Seed)
	shards := make([]river.InsertManyParams, bench.FlowShards)
	for i := range shards {
		shards[i] = river.InsertManyParams{Args: riverCleanArgs{Flow: job.Args.Flow, Value: v, Index: i}}
	}
	return completeTx(ctx, w.f, job, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+w.f.rp.schema+"."+flowsTable+" (id, total, done) VALUES ($1, $2, 0)",
			job.Args.Flow, bench.FlowShards); err != nil {
			return err
		}
		_, err := river.ClientFromContext[pgx.Tx](ctx).InsertManyTx(ctx, tx, shards)
		return err
	})
}

type riverCleanWorker struct {
	river.WorkerDefaults[riverCleanArgs]
	f *riverFlows
}

// Work does the shard's work, then increments the flow's counter in the
// transaction that completes it; the shard that brings the counter to the
// total inserts the store job in it too.
func (w *riverCleanWorker) Work(ctx context.Context, job *river.Job[riverCleanArgs]) error {
	w.f.runs.Add(1)
	a := job.Args
	bench.FlowWork(w.f.work, a.Value+uint64(a.Index))
	return completeTx(ctx, w.f, job, func(tx pgx.Tx) error {
		var done, total int
		if err := tx.QueryRow(ctx, "UPDATE "+w.f.rp.schema+"."+flowsTable+" SET done = done + 1 WHERE id = $1 RETURNING done, total",
			a.Flow).Scan(&done, &total); err != nil {
			return err
		}
		if done != total {
			return nil
		}
		_, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, riverStoreArgs{Flow: a.Flow, Value: a.Value}, nil)
		return err
	})
}

type riverStoreWorker struct {
	river.WorkerDefaults[riverStoreArgs]
	f *riverFlows
}

// Work computes the flow's result and stores it in the flow's row in the
// transaction that completes it; once that committed, the flow ended.
func (w *riverStoreWorker) Work(ctx context.Context, job *river.Job[riverStoreArgs]) error {
	w.f.runs.Add(1)
	v := bench.FlowWork(w.f.work, job.Args.Value)
	err := completeTx(ctx, w.f, job, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE "+w.f.rp.schema+"."+flowsTable+" SET value = $2 WHERE id = $1 AND done = total",
			job.Args.Flow, int64(v))
		if err == nil && tag.RowsAffected() != 1 {
			err = errors.New("the flow's counter row is missing or short of its total")
		}
		return err
	})
	if err == nil {
		w.f.ended(job.Args.Flow, v)
	}
	return err
}
