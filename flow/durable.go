package flow

import (
	"context"
	"errors"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// ErrUnknownRun is returned (wrapped) by [Durable.Inspect], [Durable.Wait],
// [Durable.Cancel] and [Durable.RetryStage] for a run ID the store does not hold
// (never started, another flow's, or purged after its retention).
var ErrUnknownRun = errors.New("flow: unknown run")

// DurableOptions configure a durable flow ([Register]). A nil *DurableOptions means
// the zero value.
type DurableOptions struct {
	// Pool sends the stages' tasks to the pool of the kernel's store.SharedStore
	// (kernel.DurableTask.Pool), so that any process on the store with a free slot
	// and the flow registered runs them. If false, each task runs in the process
	// that submitted it (or, after that process died, the one that takes its tasks
	// over).
	Pool bool
	// Poll is how often the reconciler looks for runs that moved on in other
	// processes or were left by a crash. If zero, 1 s.
	Poll time.Duration
	// Retention is how long a run's tasks keep their keys after they ended, so that
	// a stage whose success was stored is never run again, and how long an ended
	// run stays visible to Inspect and List (at least; the store's purge of
	// completed tasks removes it afterwards). It must exceed the longest run. If
	// zero, 7 days.
	Retention time.Duration
}

// Durable runs a flow durably on a kernel with a store ([Register]). Its methods
// are safe for concurrent use.
type Durable struct {
	d *durable
}

// Register makes f durable on k, whose Config.Store is st: it registers the
// kinds of f's tasks with k ([kernel.Kernel.Register]) and starts the
// reconciler, a goroutine that carries the runs stored on st forward and stops
// when k stops (or at [Durable.Close]). Every process that runs the flow calls
// Register once at its start, with the same definition. It returns the
// errors of [Flow.Validate], a *kernel.ConfigError for a bad field of opts, and
// an error for a nil argument, a store that is no store.KeyReader and
// store.TaskLister, a Pool without a store.SharedStore, a stage name with a '#'
// or longer than 220 bytes (the tasks' keys), a name that makes a kind longer
// than store.KindMax, and a kind k refuses (a flow registered twice on k).
func Register(k *kernel.Kernel, st store.Store, f *Flow, opts *DurableOptions) (*Durable, error) {
	return register(k, st, f, opts)
}

// Start stores a new run of the flow with input (at most the store's payload
// cap less 20 bytes: store.ErrPayloadTooLarge otherwise) and returns its ID
// once it is stored: from then on no crash loses it, and the run goes on in
// whichever process on the store runs the flow. opts.OnFailure is the failure
// policy. It blocks while the kernel has no room, until ctx ends. It returns
// a *kernel.ConfigError for a bad opts, kernel.ErrClosed after the kernel
// began to stop, ctx.Err() and the store's errors; then no run was stored,
// unless the error wraps store.ErrOutcomeUnknown. Safe for concurrent use.
func (d *Durable) Start(ctx context.Context, input []byte, opts *Options) (runID string, err error) {
	return d.d.start(ctx, input, opts)
}

// Inspect returns the run's state, as its stored tasks say it now, or an error
// wrapping [ErrUnknownRun].
func (d *Durable) Inspect(ctx context.Context, runID string) (RunInfo, error) {
	return d.d.inspect(ctx, runID)
}

// List returns up to limit runs of the flow that the store holds, live and ended,
// in the store's order of their head tasks' IDs (per process, the order the runs
// started in, with mysqlstore and storekit), and the cursor of the next page
// (empty after the last): pass it as after, "" for the first page. A page may
// hold fewer than limit runs while next is not empty. limit <= 0 means 50, at
// most 1000.
func (d *Durable) List(ctx context.Context, after string, limit int) (runs []RunInfo, next string, err error) {
	return d.d.list(ctx, after, limit)
}

// Wait blocks until the run ended and returns nil when it succeeded, its
// [*StageError] (joined under ContinueIndependent) when it failed, and an error
// wrapping kernel.ErrCanceled when it was cancelled, as [Handle.Wait] does; or
// ctx.Err() when ctx ends first, and an error wrapping [ErrUnknownRun].
func (d *Durable) Wait(ctx context.Context, runID string) error {
	return d.d.wait(ctx, runID)
}

// Cancel stores the run's cancellation and returns: no stage starts any more,
// the stages waiting end Canceled, and the run's tasks are cancelled in every
// process on the store (within a Poll); the run ends Canceled once they ended,
// or Succeeded if every stage still succeeded. Cancel of an ended run does
// nothing.
func (d *Durable) Cancel(ctx context.Context, runID string) error {
	return d.d.cancel(ctx, runID)
}

// RetryStage gives a failed stage of the run another life: its dead-lettered
// tasks (the stage's task or count, or its failed shards) are requeued with
// their attempts counted from zero, and the run is Running again; the stages
// that were skipped or did not start because of the failure start once the
// stage succeeds. It returns an error for a stage that did not fail and for a
// cancelled run.
func (d *Durable) RetryStage(ctx context.Context, runID, stage string) error {
	return d.d.retryStage(ctx, runID, stage)
}

// Close stops the reconciler of this process and waits for it. The runs go
// on in the other processes, and here after a new Register (on a new kernel).
// Close is idempotent.
func (d *Durable) Close() error {
	return d.d.close()
}
