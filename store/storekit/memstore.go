package storekit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// MemoryStore is a [store.Store] that keeps tasks in memory: the reference
// implementation of the Store contract and a stand-in for a database in tests. Nothing
// survives the process. It is safe for concurrent use; every method runs under one mutex
// and none blocks on anything else. The zero value is not usable: call [NewMemoryStore].
type MemoryStore struct {
	mu     sync.Mutex
	tasks  map[string]*store.StoredTask // guarded by mu; each task owned by the store
	live   map[string]string            // guarded by mu; unique key → ID of the task holding it (live, or ended with a window)
	closed bool                         // guarded by mu
	shared                              // guarded by mu: owners and named leases
	id     string                       // immutable: see Identity
	keep   int                          // guarded by mu: attempt records kept per task (0: the default)
}

// SetAttemptsKept sets how many attempt records per task the store keeps (see
// [store.Attempt]): the most recent n. n <= 0 means [store.AttemptsKeptDefault].
// Histories already longer are cut at their next record.
func (s *MemoryStore) SetAttemptsKept(n int) {
	s.mu.Lock()
	s.keep = n
	s.mu.Unlock()
}

var (
	_ store.Store        = (*MemoryStore)(nil)
	_ store.SharedStore  = (*MemoryStore)(nil)
	_ store.Identifier   = (*MemoryStore)(nil)
	_ store.Clock        = (*MemoryStore)(nil)
	_ store.ReplicaStore = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty [MemoryStore]. Its leases run on the real clock
// (time.Now, which a testing/synctest bubble makes virtual); see [MemoryStore.SetClock].
func NewMemoryStore() *MemoryStore {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &MemoryStore{
		tasks:  make(map[string]*store.StoredTask),
		live:   make(map[string]string),
		shared: newShared(),
		id:     "memory:" + hex.EncodeToString(b[:]),
	}
}

// Identity implements [store.Identifier]: "memory:" and 16 random hex digits, drawn by
// [NewMemoryStore], so that every MemoryStore (whose tasks die with it) is a store of its
// own.
func (s *MemoryStore) Identity(context.Context) (string, error) { return s.id, nil }

// Commit implements [store.Store.Commit]. It never blocks on anything but the store's
// mutex. Tasks it inserts have no owner.
func (s *MemoryStore) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storekit: memory store: commit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("storekit: memory store: commit: %w", store.ErrStoreClosed)
	}
	return s.commitLocked(changes, 0), nil
}

// commitLocked applies changes for owner (0: none). Called with mu held.
func (s *MemoryStore) commitLocked(changes []store.Change, owner uint64) []error {
	results := make([]error, len(changes))
	for i := range changes {
		results[i] = changes[i].Validate()
	}
	RefuseBeforeInsert(changes, results)
	var next []int // built when a change needs to look ahead
	for i := range changes {
		c := &changes[i]
		if results[i] != nil {
			continue
		}
		if c.Op == store.OpInsert {
			results[i] = s.insertLocked(c, owner)
			continue
		}
		t := s.tasks[c.Task.ID]
		switch {
		case t == nil:
			results[i] = fmt.Errorf("storekit: memory store: %s %q: %w", c.Op, c.Task.ID, store.ErrUnknownTask)
		case c.Adopt && t.Fence == c.Fence && !s.inPoolLocked(t):
			results[i] = fmt.Errorf("storekit: memory store: adopt %q: not in the pool (%s, owner %d): %w",
				c.Task.ID, t.State, s.owner[t.ID], store.ErrStaleFence)
		case t.State.Live() && t.Fence == c.Fence:
			if c.Adopt && owner != 0 {
				s.owner[t.ID] = owner
			}
			s.applyLocked(t, c)
			if c.Attempt.Number != 0 {
				t.History = store.AppendAttempt(t.History, c.Attempt, s.keep)
			}
		case s.lookAhead(changes, results, &next, i, t) && (!c.Adopt || s.owner[t.ID] == owner):
			// The batch is a retry of one that landed: report what it reported then.
		default:
			results[i] = fmt.Errorf("storekit: memory store: %s %q: fence %d, stored %d (%s): %w",
				c.Op, c.Task.ID, c.Fence, t.Fence, t.State, store.ErrStaleFence)
		}
	}
	return results
}

func (s *MemoryStore) lookAhead(changes []store.Change, results []error, next *[]int, i int, t *store.StoredTask) bool {
	if *next == nil {
		*next = NextOfTask(changes)
	}
	return AlreadyApplied(changes, results, *next, i, t.Fence, t.State, t.Attempt)
}

func (s *MemoryStore) insertLocked(c *store.Change, owner uint64) error {
	if _, ok := s.tasks[c.Task.ID]; ok {
		return nil // our own row: the retry of a commit whose answer was lost
	}
	if k := c.Task.UniqueKey; k != "" && c.Task.State.Live() {
		if holder, ok := s.live[k]; ok {
			if h := s.tasks[holder]; h != nil && h.HoldsKeyAt(msTime(c.Task.UpdatedAt)) {
				return fmt.Errorf("storekit: memory store: %w", &store.DuplicateKeyError{ID: c.Task.ID, Key: k, Holder: holder})
			}
			delete(s.live, k) // the ended holder's window is over
		}
	}
	t := c.Task
	t.Payload = slices.Clone(t.Payload)
	t.Headers = maps.Clone(t.Headers)
	t.Result, t.History = nil, nil // set by the changes that end attempts only
	if t.Priority == store.PriorityDefault {
		t.Priority = store.Normal
	}
	t.LastError = TruncateLastError(t.LastError)
	t.RunAt, t.CreatedAt, t.UpdatedAt = msTime(t.RunAt), msTime(t.CreatedAt), msTime(t.UpdatedAt)
	t.UniqueUntil, t.UniqueFor = msTime(t.UniqueUntil), t.UniqueFor.Truncate(time.Millisecond)
	s.tasks[t.ID] = &t
	if owner != 0 && !c.Pool {
		s.owner[t.ID] = owner
	}
	s.poolLocked(&t)
	if t.UniqueKey != "" && t.State.Live() {
		s.live[t.UniqueKey] = t.ID
	}
	return nil
}

// inPoolLocked reports whether t is in the pool: waiting, with no owner. Called
// with mu held.
func (s *MemoryStore) inPoolLocked(t *store.StoredTask) bool {
	_, owned := s.owner[t.ID]
	return !owned && waiting(t.State)
}

// poolLocked keeps t's place in the pool index: a waiting task with no owner is in
// the pool. Called with mu held.
func (s *MemoryStore) poolLocked(t *store.StoredTask) {
	_, owned := s.owner[t.ID]
	if !owned && waiting(t.State) {
		s.pool[t.ID] = struct{}{}
	} else {
		delete(s.pool, t.ID)
	}
}

func (s *MemoryStore) applyLocked(t *store.StoredTask, c *store.Change) {
	switch c.Op {
	case store.OpStart:
		t.Attempt, t.Fence = c.Task.Attempt, c.Task.Fence
	case store.OpRetry:
		t.RunAt = msTime(c.Task.RunAt)
		t.LastError = TruncateLastError(c.Task.LastError)
	case store.OpFail:
		t.LastError = TruncateLastError(c.Task.LastError)
		t.Result = slices.Clone(c.Task.Result)
	case store.OpSucceed:
		t.Result = slices.Clone(c.Task.Result)
	case store.OpCancel:
		if c.Task.LastError != "" {
			t.LastError = TruncateLastError(c.Task.LastError)
		}
	}
	t.State = c.ResultState()
	t.UpdatedAt = msTime(c.Task.UpdatedAt)
	s.poolLocked(t)
	if !t.State.Live() {
		delete(s.owner, t.ID)
		if t.UniqueKey != "" && s.live[t.UniqueKey] == t.ID && t.KeyHeldUntil().IsZero() {
			delete(s.live, t.UniqueKey) // without a window; with one, the next insert frees it
		}
	}
}

// Recover implements [store.Store.Recover].
func (s *MemoryStore) Recover(ctx context.Context) ([]store.StoredTask, error) {
	var out []store.StoredTask
	err := s.read(ctx, "recover", func() {
		for _, t := range s.tasks {
			if t.State.Live() {
				out = append(out, copyTask(t))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	sortRecovered(out)
	return out, nil
}

// sortRecovered sorts tasks in the order of [store.Store.Recover]: priority (High
// first), then RunAt, then ID.
func sortRecovered(out []store.StoredTask) {
	slices.SortFunc(out, func(a, b store.StoredTask) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Get implements [store.Store.Get].
func (s *MemoryStore) Get(ctx context.Context, id string) (store.StoredTask, error) {
	var (
		out store.StoredTask
		ok  bool
	)
	err := s.read(ctx, "get", func() {
		if t := s.tasks[id]; t != nil {
			out, ok = copyTask(t), true
		}
	})
	if err == nil && !ok {
		err = fmt.Errorf("storekit: memory store: get %q: %w", id, store.ErrUnknownTask)
	}
	return out, err
}

// DeadLetters implements [store.Store.DeadLetters].
func (s *MemoryStore) DeadLetters(ctx context.Context, limit int, afterID string) ([]store.StoredTask, error) {
	if limit <= 0 {
		limit = store.DeadLettersLimitDefault
	}
	var out []store.StoredTask
	err := s.read(ctx, "dead letters", func() {
		for _, t := range s.tasks {
			if t.State.DeadLetter() && t.ID > afterID {
				out = append(out, copyTask(t))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.StoredTask) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CountDeadLetters implements [store.Store.CountDeadLetters].
func (s *MemoryStore) CountDeadLetters(ctx context.Context) (int, error) {
	n := 0
	err := s.read(ctx, "count dead letters", func() {
		for _, t := range s.tasks {
			if t.State.DeadLetter() {
				n++
			}
		}
	})
	return n, err
}

// Requeue implements [store.Store.Requeue]. The requeued tasks have no owner.
func (s *MemoryStore) Requeue(ctx context.Context, now time.Time, ids ...string) ([]store.StoredTask, error) {
	var out []store.StoredTask
	err := s.read(ctx, "requeue", func() { out = s.requeueLocked(now, ids, 0) })
	return out, err
}

// requeueLocked requeues ids for owner (0: none). Called with mu held.
func (s *MemoryStore) requeueLocked(now time.Time, ids []string, owner uint64) []store.StoredTask {
	var out []store.StoredTask
	{
		for _, id := range ids {
			t := s.tasks[id]
			if t == nil || !t.State.DeadLetter() {
				continue
			}
			if t.UniqueKey != "" {
				if h, held := s.live[t.UniqueKey]; held && h != t.ID && s.tasks[h] != nil && s.tasks[h].HoldsKeyAt(msTime(now)) {
					continue
				}
				s.live[t.UniqueKey] = t.ID
			}
			t.State, t.Attempt, t.Fence, t.Result = store.Queued, 0, t.Fence+1, nil
			t.RunAt, t.UpdatedAt = msTime(now), msTime(now)
			if owner != 0 {
				s.owner[t.ID] = owner
			} else {
				delete(s.owner, t.ID)
			}
			s.poolLocked(t)
			out = append(out, copyTask(t))
		}
	}
	return out
}

// Purge implements [store.Store.Purge].
func (s *MemoryStore) Purge(ctx context.Context, ids ...string) (int, error) {
	n := 0
	err := s.read(ctx, "purge", func() {
		for _, id := range ids {
			if t := s.tasks[id]; t != nil && t.State.DeadLetter() {
				s.deleteLocked(t)
				n++
			}
		}
	})
	return n, err
}

// PurgeCompleted implements [store.Store.PurgeCompleted].
func (s *MemoryStore) PurgeCompleted(ctx context.Context, olderThan time.Time) (int, error) {
	n := 0
	err := s.read(ctx, "purge completed", func() {
		for id, t := range s.tasks {
			if t.State.Completed() && t.UpdatedAt.Before(olderThan) && !t.KeyHeldUntil().After(olderThan) {
				s.deleteLocked(s.tasks[id])
				n++
			}
		}
	})
	return n, err
}

// deleteLocked deletes the terminal task t and frees the key it holds. Called with mu
// held.
func (s *MemoryStore) deleteLocked(t *store.StoredTask) {
	delete(s.tasks, t.ID)
	if t.UniqueKey != "" && s.live[t.UniqueKey] == t.ID {
		delete(s.live, t.UniqueKey)
	}
}

// Close implements [store.Store.Close]: later calls fail with [store.ErrStoreClosed]
// and the tasks are dropped. It is idempotent.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.tasks, s.live = nil, nil
	s.shared = newShared()
	return nil
}

// read runs f under the mutex unless ctx is done or the store closed.
func (s *MemoryStore) read(ctx context.Context, what string, f func()) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storekit: memory store: %s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("storekit: memory store: %s: %w", what, store.ErrStoreClosed)
	}
	f()
	return nil
}

func copyTask(t *store.StoredTask) store.StoredTask {
	c := *t
	c.Payload = slices.Clone(t.Payload)
	c.Headers = maps.Clone(t.Headers)
	c.Result = slices.Clone(t.Result)
	c.History = slices.Clone(t.History)
	return c
}

// msTime truncates t to the millisecond and drops its monotonic reading, as stores keep it.
func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
