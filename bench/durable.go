package bench

import (
	"context"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// DurableSetup is a durable-task configuration opened for one measured run:
// for ax, a store of its own, empty, and the kernel settings that go with it;
// for a peer, its job system on a store of its own. A [Factory.Durable]
// returns it; the durable scenario closes it.
type DurableSetup struct {
	// Store journals the kernel's durable tasks (Config.Store). It holds no
	// task when the run starts. Nil for a peer.
	Store store.Store

	// Peer, if not nil, is the job system under test instead of ax (Store and
	// SnapshotEvery are then unused, and Succeeded is required).
	Peer DurablePeer

	// SnapshotEvery is the kernel's Config.SnapshotEvery. If zero,
	// acknowledged mode: a durable submit returns once its commit landed.
	SnapshotEvery time.Duration

	// Succeeded, if not nil, returns how many tasks Store holds as Succeeded
	// (it holds only this run's), the fast way to check a large run: a
	// COUNT on the table. If nil, the scenario asks Store.Get for every
	// acknowledged task.
	Succeeded func(ctx context.Context) (int, error)

	// Shared, if not empty, names Store for [Factory.DurableJoin], so that
	// kernels in other processes share it.
	Shared string

	// Close releases the store and drops what the run made (its table). It is
	// called once, after the kernel stopped. If nil, Store.Close.
	Close func() error

	// ServerCPU, if not nil, returns the CPU time (user and system) the
	// database server's processes have used so far. The durable scenario
	// reads it before the first submit and after the drain, for the server's
	// CPU per task. An error (no such process on this machine, not
	// readable) leaves the figure out and becomes a note. Nil where there is
	// no server (ax-memstore).
	ServerCPU func() (time.Duration, error)

	// TxSubmit, if not nil, submits one task with payload in a transaction of
	// the caller's own that also inserts one row into a table of the caller's,
	// and returns once that transaction committed (and the kernels that run the
	// task were told), with the task's ID if known. It is safe for concurrent
	// use. The durable-tx scenario submits with it; for ax the task goes to the
	// pool of Store, which the scenario's kernel claims.
	TxSubmit func(ctx context.Context, payload []byte) (string, error)

	// FlowPeer, if not nil, runs the flows-durable scenario's pipeline as a
	// chain of the peer's jobs (Peer's job system, on the same store).
	FlowPeer DurableFlowPeer

	// MemoryFlows marks the flows-durable scenario's reference: ax's flows in
	// memory (flow.Run on a kernel without a store). Store and Peer are then
	// nil.
	MemoryFlows bool
}

// DurableFlowPeer runs the flows-durable scenario's pipeline, fetch →
// [FlowShards] shards of clean → store, as a chain of a peer's durable jobs,
// each job inserting the next. Every job does the work of [FlowWork].
type DurableFlowPeer interface {
	// StartFlow stores the fetch job of flow id (unique in the run), with
	// input seed, and returns once it is durable. The fetch job computes
	// v = FlowWork(seed) and inserts the shards; shard i computes
	// FlowWork(v+i); the last shard to complete inserts the store job, which
	// computes FlowWork(v). done receives that value once the store job's
	// completion is stored.
	StartFlow(ctx context.Context, id int64, seed uint64) (done <-chan uint64, err error)
	// FlowRuns returns how many job runs of the flows there were.
	FlowRuns() int64
}

// DurablePeer is a durable job system other than ax (river on PostgreSQL,
// asynq on Redis) under the durable scenario. Each job it runs does nothing
// but count.
type DurablePeer interface {
	// SubmitMany stores one job per payload in one call (a bulk insert) and
	// returns once they are durable.
	SubmitMany(ctx context.Context, payloads [][]byte) error
	// Submit stores one job and returns once it is durable. It is safe for
	// concurrent use.
	Submit(ctx context.Context, payload []byte) error
	// Drain blocks until every job acknowledged so far ran and its completion
	// is stored, then stops the workers; it returns ctx.Err() if ctx ends first.
	Drain(ctx context.Context) error
	// Executed returns how many job runs there were.
	Executed() int64
}

func (s *DurableSetup) close() error {
	switch {
	case s.Close != nil:
		return s.Close()
	case s.Store != nil:
		return s.Store.Close()
	}
	return nil
}

// DurableFactories returns ax's durable configurations that need no database:
// ax-memstore, the kernel on [storekit.NewMemoryStore] in acknowledged mode, the
// baseline of the durable scenarios (the kernel and its journal with a store
// that costs nothing); and ax-flow-mem, ax's flows in memory, the reference of
// flows-durable. cmd/axbench adds the MariaDB-backed ones.
func DurableFactories() []Factory {
	return []Factory{{
		Name: "ax-memstore", Mode: Blocking, Priorities: true, Flows: true,
		Doc: "durable scenario only: ax on storekit.NewMemoryStore, acknowledged mode (the kernel and journal without a database: the baseline)",
		Durable: func(context.Context, Params) (*DurableSetup, error) {
			return &DurableSetup{Store: storekit.NewMemoryStore()}, nil
		},
	}, {
		Name: "ax-flow-mem", Mode: Blocking, Flows: true, Only: []string{"flows-durable"},
		Doc: "flows-durable only: ax's flows in memory (flow.Run on a kernel without a store), the reference",
		Durable: func(context.Context, Params) (*DurableSetup, error) {
			return &DurableSetup{MemoryFlows: true}, nil
		},
	}}
}
