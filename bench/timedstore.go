package bench

import (
	"context"
	"sync"
	"time"

	"github.com/axsched/ax/kernel"
)

// timedStore is a [kernel.Store] that times its Commit calls. The kernel's
// journal commits one batch at a time, so their total over a run's length is
// the share of the run it kept the store busy: near 100 % the store is the
// bottleneck, well below it the kernel (or the submitters) are.
type timedStore struct {
	kernel.Store

	mu   sync.Mutex
	durs []int64 // guarded by mu: each Commit's duration, ns
}

func (s *timedStore) Commit(ctx context.Context, changes []kernel.Change) ([]error, error) {
	t0 := time.Now()
	res, err := s.Store.Commit(ctx, changes)
	d := int64(time.Since(t0))
	s.mu.Lock()
	s.durs = append(s.durs, d)
	s.mu.Unlock()
	return res, err
}

// MaxPayload passes on the wrapped store's payload cap, which the kernel
// reads to refuse an oversized payload at submit; 0 means none known.
func (s *timedStore) MaxPayload() int {
	if pc, ok := s.Store.(interface{ MaxPayload() int }); ok {
		return pc.MaxPayload()
	}
	return 0
}

// commits returns the durations of the Commit calls so far, ns.
func (s *timedStore) commits() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.durs...)
}
