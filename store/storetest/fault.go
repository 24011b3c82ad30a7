package storetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/axsched/ax/store"
)

// FaultStore wraps a [store.Store] and makes chosen calls of Commit fail as a store whose
// connection is lost does, so tests can exercise lost connections and ambiguous commits.
// Every other method is the wrapped store's. A FaultStore hides the optional methods of
// the store it wraps (such as a payload cap); wrap it again to add them. It is safe for
// concurrent use when the wrapped store is; the zero value is not usable: call
// [NewFaultStore].
type FaultStore struct {
	store.Store

	mu      sync.Mutex
	faults  int  // guarded by mu; Commit calls left to fail
	applied bool // guarded by mu; whether a failing Commit applies its batch first
}

var _ store.Store = (*FaultStore)(nil)

// NewFaultStore returns a FaultStore over s that injects no fault until
// [FaultStore.InjectFault] is called.
func NewFaultStore(s store.Store) *FaultStore { return &FaultStore{Store: s} }

// InjectFault makes the next n calls of Commit fail. When applied is true each of them
// commits its batch to the wrapped store first, as a commit whose answer was lost does,
// and returns an error wrapping [store.ErrOutcomeUnknown]; otherwise it commits nothing
// and returns an error wrapping [store.ErrStoreUnavailable]. n <= 0 clears the faults.
func (f *FaultStore) InjectFault(n int, applied bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults, f.applied = max(n, 0), applied
}

// Commit implements [store.Store.Commit]. A call with no changes or a done ctx goes to
// the wrapped store and uses up no fault. Otherwise, while faults are left, it uses one
// up and returns an error wrapping [store.ErrStoreUnavailable] or, for an applied
// fault, [store.ErrOutcomeUnknown] (or the wrapped store's own error, when an applied
// fault's commit fails).
func (f *FaultStore) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	if len(changes) == 0 || ctx.Err() != nil {
		return f.Store.Commit(ctx, changes)
	}
	f.mu.Lock()
	fault, applied := f.faults > 0, f.applied
	if fault {
		f.faults--
	}
	f.mu.Unlock()
	switch {
	case !fault:
		return f.Store.Commit(ctx, changes)
	case !applied:
		return nil, fmt.Errorf("storetest: commit: unreachable (injected): %w", store.ErrStoreUnavailable)
	}
	if _, err := f.Store.Commit(ctx, changes); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("storetest: commit: answer lost (injected): %w", store.ErrOutcomeUnknown)
}
