package bench

import (
	"context"
	"time"

	"github.com/axsched/ax/kernel"
)

// DurableSetup is a durable-task configuration opened for one measured kernel:
// a store of its own, empty, and the kernel settings that go with it. A
// [Factory.Durable] returns it; the durable scenario closes it.
type DurableSetup struct {
	// Store journals the kernel's durable tasks (Config.Store). It holds no
	// task when the run starts.
	Store kernel.Store

	// SnapshotEvery is the kernel's Config.SnapshotEvery. If zero,
	// acknowledged mode: a durable submit returns once its commit landed.
	SnapshotEvery time.Duration

	// Succeeded, if not nil, returns how many tasks Store holds as Succeeded
	// (it holds only this run's), the fast way to check a large run: a
	// COUNT on the table. If nil, the scenario asks Store.Get for every
	// acknowledged task.
	Succeeded func(ctx context.Context) (int, error)

	// Close releases the store and drops what the run made (its table). It is
	// called once, after the kernel stopped. If nil, Store.Close.
	Close func() error
}

func (s *DurableSetup) close() error {
	if s.Close != nil {
		return s.Close()
	}
	return s.Store.Close()
}

// DurableFactories returns ax's durable configuration that needs no database:
// ax-memstore, the kernel on [kernel.NewMemoryStore] in acknowledged mode. It
// is the baseline of the durable scenario: the kernel and its journal with a
// store that costs nothing. cmd/axbench adds the MariaDB-backed ones.
func DurableFactories() []Factory {
	return []Factory{{
		Name: "ax-memstore", Mode: Blocking, Priorities: true,
		Doc: "durable scenario only: ax on kernel.NewMemoryStore, acknowledged mode (the kernel and journal without a database: the baseline)",
		Durable: func(context.Context, Params) (*DurableSetup, error) {
			return &DurableSetup{Store: kernel.NewMemoryStore()}, nil
		},
	}}
}
