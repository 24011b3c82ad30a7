package bench

import (
	"context"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// commitTimes records the durations of a store's commits. The kernel's journal
// keeps at most a few commits in flight, so their total over a run's length says
// how busy it kept the store: near (or above) 100 % the store is the bottleneck,
// well below it the kernel (or the submitters) are.
type commitTimes struct {
	mu   sync.Mutex
	durs []int64 // guarded by mu: each commit's duration, ns
}

func (t *commitTimes) add(t0 time.Time) {
	d := int64(time.Since(t0))
	t.mu.Lock()
	t.durs = append(t.durs, d)
	t.mu.Unlock()
}

// commits returns the durations of the commits so far, ns.
func (t *commitTimes) commits() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]int64(nil), t.durs...)
}

// timedStore is a [store.Store] that times its Commit calls.
type timedStore struct {
	store.Store
	*commitTimes
}

func (s *timedStore) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	defer s.add(time.Now())
	return s.Store.Commit(ctx, changes)
}

// MaxPayload passes on the wrapped store's payload cap, which the kernel
// reads to refuse an oversized payload at submit; 0 means none known.
func (s *timedStore) MaxPayload() int { return maxPayloadOf(s.Store) }

// timedSharedStore is a [store.SharedStore] that times its Commit and CommitAs
// calls, so that a kernel on it runs as an owner, as it does on the store itself.
type timedSharedStore struct {
	store.SharedStore
	*commitTimes
}

func (s *timedSharedStore) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	defer s.add(time.Now())
	return s.SharedStore.Commit(ctx, changes)
}

func (s *timedSharedStore) CommitAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	defer s.add(time.Now())
	return s.SharedStore.CommitAs(ctx, o, changes)
}

// MaxPayload passes on the wrapped store's payload cap (see timedStore).
func (s *timedSharedStore) MaxPayload() int { return maxPayloadOf(s.SharedStore) }

// PoolWake passes on the wrapped store's wake-ups of its pool
// ([store.PoolWaker]); nil, which never wakes, for a store without them.
func (s *timedSharedStore) PoolWake() <-chan struct{} {
	if w, ok := s.SharedStore.(store.PoolWaker); ok {
		return w.PoolWake()
	}
	return nil
}

func maxPayloadOf(s store.Store) int {
	if pc, ok := s.(interface{ MaxPayload() int }); ok {
		return pc.MaxPayload()
	}
	return 0
}

// newTimedStore wraps s: in a [store.SharedStore] when s is one, so that the
// kernel sees what s is.
func newTimedStore(s store.Store) (store.Store, *commitTimes) {
	t := new(commitTimes)
	if ss, ok := s.(store.SharedStore); ok {
		return &timedSharedStore{SharedStore: ss, commitTimes: t}, t
	}
	return &timedStore{Store: s, commitTimes: t}, t
}
