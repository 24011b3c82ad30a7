package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/axsched/ax/kernel"
)

// Handle follows one run of a flow. Its methods are safe for concurrent use,
// and it stays valid after the run ended; holding it keeps the stages' results.
type Handle struct {
	r *run
}

// Name returns the flow's name.
func (h *Handle) Name() string { return h.r.f.name }

// Done returns a channel closed when the run reached its terminal state: every
// task of it has ended.
func (h *Handle) Done() <-chan struct{} { return h.r.done }

// State returns the run's current state.
func (h *Handle) State() State {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.r.state
}

// Err returns the run's final error: nil while it runs and when it succeeded;
// for a Failed run, the [*StageError] of the stage that failed (under
// ContinueIndependent, those of every failed stage, joined); for a Canceled
// run, an error wrapping kernel.ErrCanceled.
func (h *Handle) Err() error {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case Failed:
		if len(r.errs) == 1 {
			return r.errs[0]
		}
		return errors.Join(r.errs...)
	case Canceled:
		return fmt.Errorf("flow %q: %w", r.f.name, kernel.ErrCanceled)
	}
	return nil
}

// Wait blocks until the run ended and returns [Handle.Err], or returns
// ctx.Err() if ctx ends first (the run goes on). A nil ctx never ends.
func (h *Handle) Wait(ctx context.Context) error {
	if ctx == nil {
		<-h.r.done
		return h.Err()
	}
	select {
	case <-h.r.done:
		return h.Err()
	case <-ctx.Done():
		select {
		case <-h.r.done:
			return h.Err()
		default:
			return ctx.Err()
		}
	}
}

// Cancel ends the run and returns at once: no stage starts any more, the
// stages waiting end Canceled, and the tasks in the kernel are cancelled (see
// [kernel.Handle.Cancel]); the run ends Canceled once they ended, or Succeeded
// if every stage still succeeded. Cancel of an ended run does nothing.
func (h *Handle) Cancel() {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.Terminal() {
		return
	}
	r.canceled = true
	r.halt()
	r.settle()
}

// Stage returns a snapshot of the stage named name, and false when the flow
// has no such stage.
func (h *Handle) Stage(name string) (StageStatus, bool) {
	r := h.r
	i, ok := r.index[name]
	if !ok {
		return StageStatus{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status(i), true
}

// Stages returns a snapshot of every stage, in the order they were defined.
func (h *Handle) Stages() []StageStatus {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]StageStatus, len(r.st))
	for i := range r.st {
		out[i] = r.status(i)
	}
	return out
}

// Result returns the result the stage named name returned, nil if it has not
// succeeded, returned none, or is not a stage of the flow. The slice is
// shared: do not modify it.
func (h *Handle) Result(name string) []byte {
	i, ok := h.r.index[name]
	if !ok {
		return nil
	}
	h.r.mu.Lock()
	ok = h.r.st[i].state == StageSucceeded
	h.r.mu.Unlock()
	if !ok {
		return nil
	}
	return h.r.res.get(i)
}

// status returns stage i's snapshot. Under mu.
func (r *run) status(i int) StageStatus {
	st := &r.st[i]
	return StageStatus{Name: r.f.stages[i].name, State: st.state, Err: st.err, Shards: st.total, ShardsDone: st.shardsOK}
}
