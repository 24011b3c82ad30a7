package storekit

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/store"
)

// shared is the owner and lease state of a MemoryStore; guarded by its mutex.
type shared struct {
	clk    clock.Clock          // nil: time.Now
	epoch  uint64               // the last epoch handed out
	owners map[uint64]*memOwner // by epoch: owners not yet forgotten
	owner  map[string]uint64    // task ID → owner epoch, for live tasks that have one
	pool   map[string]struct{}  // IDs of the waiting tasks with no owner
	leases map[string]*memLease // named leases
	// schedules are the durable schedules (store.ScheduleStore), by name.
	schedules map[string]*store.StoredSchedule
	// replicas are the figures owners published (store.ReplicaStore), by epoch.
	replicas map[uint64]memReplica
}

type memOwner struct {
	name    string
	lease   time.Duration
	expires time.Time
}

type memLease struct {
	holder  string
	fence   uint64
	expires time.Time
}

func newShared() shared {
	return shared{
		owners: make(map[uint64]*memOwner),
		owner:  make(map[string]uint64),
		pool:   make(map[string]struct{}),
		leases: make(map[string]*memLease),

		schedules: make(map[string]*store.StoredSchedule),
		replicas:  make(map[uint64]memReplica),
	}
}

// SetClock makes the store read its time (leases, [MemoryStore.Now]) from c instead of
// time.Now (a clock.Mock in tests). Call it before the store is used.
func (s *MemoryStore) SetClock(c clock.Clock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clk = c
}

func (s *MemoryStore) nowLocked() time.Time {
	if s.clk != nil {
		return s.clk.Now()
	}
	return time.Now()
}

// nextEpochLocked hands out a new epoch, above the epoch part of every stored fence.
func (s *MemoryStore) nextEpochLocked() uint64 {
	for _, t := range s.tasks {
		s.epoch = max(s.epoch, t.Fence>>32)
	}
	s.epoch++
	return s.epoch
}

// liveOwnerLocked reports whether o is a member whose lease has not ended.
func (s *MemoryStore) liveOwnerLocked(o store.Owner) bool {
	m := s.owners[o.Epoch]
	return m != nil && m.name == o.Name && s.nowLocked().Before(m.expires)
}

func checkOwnerArgs(name string, lease time.Duration, what string) error {
	switch {
	case name == "" || len(name) > store.OwnerNameMax:
		return fmt.Errorf("storekit: memory store: %s: name %q: must be 1 to %d bytes: %w", what, name, store.OwnerNameMax, store.ErrInvalidChange)
	case lease < store.LeaseMin:
		return fmt.Errorf("storekit: memory store: %s: lease %v: must be at least %v: %w", what, lease, store.LeaseMin, store.ErrInvalidChange)
	}
	return nil
}

// Join implements [store.SharedStore.Join].
func (s *MemoryStore) Join(ctx context.Context, name string, lease time.Duration) (store.Owner, error) {
	if err := checkOwnerArgs(name, lease, "join"); err != nil {
		return store.Owner{}, err
	}
	var o store.Owner
	err := s.read(ctx, "join", func() {
		now := s.nowLocked()
		for _, m := range s.owners {
			if m.name == name && m.expires.After(now) {
				m.expires = now // an earlier epoch of this name ends now
			}
		}
		o = store.Owner{Name: name, Epoch: s.nextEpochLocked(), Lease: lease}
		s.owners[o.Epoch] = &memOwner{name: name, lease: lease, expires: now.Add(lease)}
	})
	return o, err
}

// CommitAs implements [store.SharedStore.CommitAs].
func (s *MemoryStore) CommitAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	var (
		results []error
		lost    bool
	)
	err := s.read(ctx, "commit", func() {
		if !s.liveOwnerLocked(o) {
			lost = true
			return
		}
		m := s.owners[o.Epoch]
		m.expires = s.nowLocked().Add(m.lease)
		if len(changes) > 0 {
			results = s.commitLocked(changes, o.Epoch)
		}
	})
	if err == nil && lost {
		err = fmt.Errorf("storekit: memory store: commit by owner %s/%d: %w", o.Name, o.Epoch, store.ErrLeaseLost)
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}

// Rescue implements [store.SharedStore.Rescue].
func (s *MemoryStore) Rescue(ctx context.Context, o store.Owner, limit int) ([]store.StoredTask, error) {
	var (
		out  []store.StoredTask
		lost bool
	)
	err := s.read(ctx, "rescue", func() {
		if !s.liveOwnerLocked(o) {
			lost = true
			return
		}
		now := s.nowLocked()
		var cand []store.StoredTask
		for id, t := range s.tasks {
			if !t.State.Live() {
				continue
			}
			if e, ok := s.owner[id]; ok {
				if m := s.owners[e]; m != nil && m.expires.After(now) {
					continue // a live owner's
				}
			} else if t.State != store.Running {
				continue // the pool's
			}
			cand = append(cand, *t)
		}
		if len(cand) == 0 {
			s.forgetEndedLocked(now)
			return
		}
		sortRecovered(cand)
		if limit > 0 && len(cand) > limit {
			cand = cand[:limit]
		}
		fence := store.FenceOfEpoch(s.nextEpochLocked())
		for _, c := range cand {
			t := s.tasks[c.ID]
			t.Fence = fence
			s.owner[c.ID] = o.Epoch
			delete(s.pool, c.ID)
			out = append(out, copyTask(t))
		}
		s.forgetEndedLocked(now)
	})
	if err == nil && lost {
		err = fmt.Errorf("storekit: memory store: rescue by owner %s/%d: %w", o.Name, o.Epoch, store.ErrLeaseLost)
	}
	return out, err
}

// Claim implements [store.SharedStore.Claim].
func (s *MemoryStore) Claim(ctx context.Context, o store.Owner, req store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	if req.Now.IsZero() || req.Want.High < 0 || req.Want.Normal < 0 || req.Want.Low < 0 || req.Max < 0 {
		return nil, time.Time{}, fmt.Errorf("storekit: memory store: claim: Now %v, Want %+v, Max %d: Now must be set, Want and Max >= 0: %w", req.Now, req.Want, req.Max, store.ErrInvalidChange)
	}
	kinds := make(map[string]bool, len(req.Kinds))
	for _, k := range req.Kinds {
		kinds[k] = true
	}
	var (
		out  []store.StoredTask
		next time.Time
		lost bool
	)
	err := s.read(ctx, "claim", func() {
		if !s.liveOwnerLocked(o) {
			lost = true
			return
		}
		var due []store.StoredTask
		now := msTime(req.Now)
		for id := range s.pool {
			t := s.tasks[id]
			if !kinds[t.Kind] {
				continue
			}
			if t.RunAt.After(now) {
				if next.IsZero() || t.RunAt.Before(next) {
					next = t.RunAt
				}
				continue
			}
			due = append(due, *t)
		}
		sortRecovered(due)
		take := ClaimShares(req, func(i int) int {
			n := 0
			for _, c := range due {
				if prioIndex(c.Priority) == i {
					n++
				}
			}
			return n
		})
		var taken [3]int
		var fence uint64
		for _, c := range due {
			i := prioIndex(c.Priority)
			if taken[i] >= take[i] {
				if next.IsZero() || c.RunAt.Before(next) {
					next = c.RunAt // due and left: claim again at once
				}
				continue
			}
			if fence == 0 {
				fence = store.FenceOfEpoch(s.nextEpochLocked())
			}
			taken[i]++
			t := s.tasks[c.ID]
			t.State, t.Attempt, t.Fence, t.UpdatedAt = store.Running, t.Attempt+1, fence, now
			s.owner[c.ID] = o.Epoch
			delete(s.pool, c.ID)
			out = append(out, copyTask(t))
		}
	})
	if err == nil && lost {
		err = fmt.Errorf("storekit: memory store: claim by owner %s/%d: %w", o.Name, o.Epoch, store.ErrLeaseLost)
	}
	return out, next, err
}

// ClaimShares returns how many tasks of each priority (High, Normal, Low) a claim
// of req takes when due(i) of priority i are there to take: each its Want, then,
// with req.Max > 0, what is left of Max to those with more, High first, the whole
// within Max (see [store.ClaimRequest]).
func ClaimShares(req store.ClaimRequest, due func(i int) int) [3]int {
	var take, have [3]int
	want := [3]int{req.Want.High, req.Want.Normal, req.Want.Low}
	left := req.Max
	for i := range take {
		have[i] = due(i)
		take[i] = min(max(want[i], 0), have[i])
		if req.Max > 0 {
			take[i] = min(take[i], left)
			left -= take[i]
		}
	}
	for i := range take {
		more := min(left, have[i]-take[i])
		if more > 0 {
			take[i] += more
			left -= more
		}
	}
	return take
}

func waiting(st store.State) bool {
	return st == store.Queued || st == store.Delayed || st == store.Retrying
}

func prioIndex(p store.Priority) int {
	switch p {
	case store.High:
		return 0
	case store.Low:
		return 2
	}
	return 1
}

// forgetEndedLocked drops ended owners that hold no live task.
func (s *MemoryStore) forgetEndedLocked(now time.Time) {
	held := make(map[uint64]bool)
	for _, e := range s.owner {
		held[e] = true
	}
	for e, m := range s.owners {
		if !m.expires.After(now) && !held[e] {
			delete(s.owners, e)
		}
	}
}

// States implements [store.SharedStore.States].
func (s *MemoryStore) States(ctx context.Context, ids []string) ([]store.StoredTask, error) {
	if len(ids) > store.StatesMax {
		return nil, fmt.Errorf("storekit: memory store: states: %d IDs, at most %d (StatesMax): %w", len(ids), store.StatesMax, store.ErrInvalidChange)
	}
	var out []store.StoredTask
	err := s.read(ctx, "states", func() {
		for _, id := range ids {
			if t := s.tasks[id]; t != nil {
				c := *t
				c.Payload, c.Headers = nil, maps.Clone(t.Headers)
				out = append(out, c)
			}
		}
	})
	return out, err
}

// RequeueAs implements [store.SharedStore.RequeueAs].
func (s *MemoryStore) RequeueAs(ctx context.Context, o store.Owner, now time.Time, ids ...string) ([]store.StoredTask, error) {
	var (
		out  []store.StoredTask
		lost bool
	)
	err := s.read(ctx, "requeue", func() {
		if !s.liveOwnerLocked(o) {
			lost = true
			return
		}
		out = s.requeueLocked(now, ids, o.Epoch)
	})
	if err == nil && lost {
		err = fmt.Errorf("storekit: memory store: requeue by owner %s/%d: %w", o.Name, o.Epoch, store.ErrLeaseLost)
	}
	return out, err
}

// RunNow implements [store.SharedStore.RunNow].
func (s *MemoryStore) RunNow(ctx context.Context, o store.Owner, now time.Time, id string) (bool, error) {
	var found, lost bool
	err := s.read(ctx, "run now", func() {
		if !s.liveOwnerLocked(o) {
			lost = true
			return
		}
		t := s.tasks[id]
		if t == nil || !waiting(t.State) {
			return
		}
		if e, owned := s.owner[id]; owned && e != o.Epoch {
			return
		}
		found = true
		if now = msTime(now); t.RunAt.After(now) {
			t.RunAt, t.UpdatedAt = now, now
		}
	})
	if err == nil && lost {
		err = fmt.Errorf("storekit: memory store: run now by owner %s/%d: %w", o.Name, o.Epoch, store.ErrLeaseLost)
	}
	return found, err
}

// Leave implements [store.SharedStore.Leave].
func (s *MemoryStore) Leave(ctx context.Context, o store.Owner) error {
	return s.read(ctx, "leave", func() {
		if m := s.owners[o.Epoch]; m != nil && m.name == o.Name {
			now := s.nowLocked()
			if m.expires.After(now) {
				m.expires = now
			}
		}
	})
}

// Owners implements [store.SharedStore.Owners].
func (s *MemoryStore) Owners(ctx context.Context) ([]store.OwnerInfo, error) {
	var out []store.OwnerInfo
	err := s.read(ctx, "owners", func() {
		now := s.nowLocked()
		count := make(map[uint64]int)
		for _, e := range s.owner {
			count[e]++
		}
		for e, m := range s.owners {
			out = append(out, store.OwnerInfo{
				Owner:   store.Owner{Name: m.name, Epoch: e, Lease: m.lease},
				Expires: m.expires, Live: m.expires.After(now), Tasks: count[e],
			})
		}
	})
	sortOwners(out)
	return out, err
}

func sortOwners(out []store.OwnerInfo) {
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Epoch < out[j-1].Epoch; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
}

func checkLeaseArgs(name string, ttl time.Duration, what string) error {
	switch {
	case name == "" || len(name) > store.LeaseNameMax:
		return fmt.Errorf("storekit: memory store: %s: lease name %q: must be 1 to %d bytes: %w", what, name, store.LeaseNameMax, store.ErrInvalidChange)
	case ttl < store.LeaseMin:
		return fmt.Errorf("storekit: memory store: %s: ttl %v: must be at least %v: %w", what, ttl, store.LeaseMin, store.ErrInvalidChange)
	}
	return nil
}

// AcquireLease implements [store.SharedStore.AcquireLease].
func (s *MemoryStore) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (uint64, error) {
	if err := checkLeaseArgs(name, ttl, "acquire lease"); err != nil {
		return 0, err
	}
	if holder == "" || len(holder) > store.OwnerNameMax {
		return 0, fmt.Errorf("storekit: memory store: acquire lease: holder %q: must be 1 to %d bytes: %w", holder, store.OwnerNameMax, store.ErrInvalidChange)
	}
	var (
		fence uint64
		held  *memLease
	)
	err := s.read(ctx, "acquire lease", func() {
		now := s.nowLocked()
		l := s.leases[name]
		if l != nil && l.holder != holder && l.expires.After(now) {
			c := *l
			held = &c
			return
		}
		if l == nil {
			l = &memLease{}
			s.leases[name] = l
		}
		s.epoch++
		l.holder, l.fence, l.expires = holder, s.epoch, now.Add(ttl)
		fence = l.fence
	})
	if err == nil && held != nil {
		err = fmt.Errorf("storekit: memory store: acquire lease %q: held by %q until %v: %w", name, held.holder, held.expires, store.ErrLeaseHeld)
	}
	return fence, err
}

// RenewLease implements [store.SharedStore.RenewLease].
func (s *MemoryStore) RenewLease(ctx context.Context, name string, fence uint64, ttl time.Duration) error {
	if err := checkLeaseArgs(name, ttl, "renew lease"); err != nil {
		return err
	}
	lost := false
	err := s.read(ctx, "renew lease", func() {
		now := s.nowLocked()
		l := s.leases[name]
		if l == nil || l.fence != fence || !l.expires.After(now) {
			lost = true
			return
		}
		l.expires = now.Add(ttl)
	})
	if err == nil && lost {
		err = fmt.Errorf("storekit: memory store: renew lease %q (fence %d): %w", name, fence, store.ErrLeaseLost)
	}
	return err
}

// ReleaseLease implements [store.SharedStore.ReleaseLease].
func (s *MemoryStore) ReleaseLease(ctx context.Context, name string, fence uint64) error {
	return s.read(ctx, "release lease", func() {
		if l := s.leases[name]; l != nil && l.fence == fence {
			delete(s.leases, name)
		}
	})
}

// Now implements [store.Clock]: the time of the store's clock (see
// [MemoryStore.SetClock]), the one its leases run on.
func (s *MemoryStore) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("storekit: memory store: now: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, fmt.Errorf("storekit: memory store: now: %w", store.ErrStoreClosed)
	}
	return s.nowLocked(), nil
}
