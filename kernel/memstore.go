package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MemoryStore is a [Store] that keeps tasks in memory: the reference implementation of
// the Store contract and a stand-in for a database in unit tests. Nothing survives the
// process. It is safe for concurrent use; every method runs under one mutex.
type MemoryStore struct {
	mu     sync.Mutex
	tasks  map[string]*StoredTask // guarded by mu; each task owned by the store
	live   map[string]string      // guarded by mu; unique key → ID of the live task holding it
	faults int                    // guarded by mu; Commit calls left to fail
	apply  bool                   // guarded by mu; whether a failing Commit applies its batch first
	closed bool                   // guarded by mu
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty [MemoryStore].
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{tasks: make(map[string]*StoredTask), live: make(map[string]string)}
}

// InjectFault makes the next n calls of Commit return an error wrapping
// [ErrStoreUnavailable]. When applied is true each of them applies its batch first, as a
// commit whose answer was lost does; otherwise it applies nothing. n <= 0 clears the
// faults. It lets kernel tests exercise lost connections and ambiguous commits.
func (s *MemoryStore) InjectFault(n int, applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.apply = max(n, 0), applied
}

// Commit implements [Store.Commit]. It never blocks on anything but the store's mutex.
func (s *MemoryStore) Commit(ctx context.Context, changes []Change) ([]error, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kernel: memory store: commit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("kernel: memory store: commit: %w", ErrStoreClosed)
	}
	if s.faults > 0 {
		s.faults--
		if s.apply {
			s.commitLocked(changes)
			return nil, fmt.Errorf("kernel: memory store: commit: answer lost (injected): %w", ErrStoreUnavailable)
		}
		return nil, fmt.Errorf("kernel: memory store: commit: unreachable (injected): %w", ErrStoreUnavailable)
	}
	return s.commitLocked(changes), nil
}

func (s *MemoryStore) commitLocked(changes []Change) []error {
	results := make([]error, len(changes))
	for i := range changes {
		results[i] = changes[i].Validate()
	}
	refuseBeforeInsert(changes, results)
	var next []int // built when a change needs to look ahead
	for i := range changes {
		c := &changes[i]
		if results[i] != nil {
			continue
		}
		if c.Op == OpInsert {
			results[i] = s.insertLocked(c)
			continue
		}
		t := s.tasks[c.Task.ID]
		switch {
		case t == nil:
			results[i] = fmt.Errorf("kernel: memory store: %s %q: %w", c.Op, c.Task.ID, ErrUnknownTask)
		case t.State.Live() && t.Fence == c.Fence:
			s.applyLocked(t, c)
		case s.lookAhead(changes, results, &next, i, t):
			// The batch is a retry of one that landed: report what it reported then.
		default:
			results[i] = fmt.Errorf("kernel: memory store: %s %q: fence %d, stored %d (%s): %w",
				c.Op, c.Task.ID, c.Fence, t.Fence, t.State, ErrStaleFence)
		}
	}
	return results
}

func (s *MemoryStore) lookAhead(changes []Change, results []error, next *[]int, i int, t *StoredTask) bool {
	if *next == nil {
		*next = nextOfTask(changes)
	}
	return alreadyApplied(changes, results, *next, i, t.Fence, t.State, t.Attempt)
}

func (s *MemoryStore) insertLocked(c *Change) error {
	if _, ok := s.tasks[c.Task.ID]; ok {
		return nil // our own row: the retry of a commit whose answer was lost
	}
	if k := c.Task.UniqueKey; k != "" && c.Task.State.Live() {
		if holder, ok := s.live[k]; ok {
			return fmt.Errorf("kernel: memory store: insert %q: key %q held by %q: %w",
				c.Task.ID, k, holder, ErrDuplicateKey)
		}
	}
	t := c.Task
	t.Payload = slices.Clone(t.Payload)
	if t.Priority == PriorityDefault {
		t.Priority = Normal
	}
	t.LastError = truncateLastError(t.LastError)
	t.RunAt, t.CreatedAt, t.UpdatedAt = msTime(t.RunAt), msTime(t.CreatedAt), msTime(t.UpdatedAt)
	s.tasks[t.ID] = &t
	if t.UniqueKey != "" && t.State.Live() {
		s.live[t.UniqueKey] = t.ID
	}
	return nil
}

func (s *MemoryStore) applyLocked(t *StoredTask, c *Change) {
	switch c.Op {
	case OpStart:
		t.Attempt, t.Fence = c.Task.Attempt, c.Task.Fence
	case OpRetry:
		t.RunAt = msTime(c.Task.RunAt)
		t.LastError = truncateLastError(c.Task.LastError)
	case OpFail:
		t.LastError = truncateLastError(c.Task.LastError)
	case OpCancel:
		if c.Task.LastError != "" {
			t.LastError = truncateLastError(c.Task.LastError)
		}
	}
	t.State = c.ResultState()
	t.UpdatedAt = msTime(c.Task.UpdatedAt)
	if !t.State.Live() && t.UniqueKey != "" && s.live[t.UniqueKey] == t.ID {
		delete(s.live, t.UniqueKey)
	}
}

// Recover implements [Store.Recover].
func (s *MemoryStore) Recover(ctx context.Context) ([]StoredTask, error) {
	var out []StoredTask
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
	slices.SortFunc(out, func(a, b StoredTask) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Get implements [Store.Get].
func (s *MemoryStore) Get(ctx context.Context, id string) (StoredTask, error) {
	var (
		out StoredTask
		ok  bool
	)
	err := s.read(ctx, "get", func() {
		if t := s.tasks[id]; t != nil {
			out, ok = copyTask(t), true
		}
	})
	if err == nil && !ok {
		err = fmt.Errorf("kernel: memory store: get %q: %w", id, ErrUnknownTask)
	}
	return out, err
}

// DeadLetters implements [Store.DeadLetters].
func (s *MemoryStore) DeadLetters(ctx context.Context, limit int, afterID string) ([]StoredTask, error) {
	if limit <= 0 {
		limit = DeadLettersLimitDefault
	}
	var out []StoredTask
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
	slices.SortFunc(out, func(a, b StoredTask) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CountDeadLetters implements [Store.CountDeadLetters].
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

// Requeue implements [Store.Requeue].
func (s *MemoryStore) Requeue(ctx context.Context, now time.Time, ids ...string) ([]StoredTask, error) {
	var out []StoredTask
	err := s.read(ctx, "requeue", func() {
		for _, id := range ids {
			t := s.tasks[id]
			if t == nil || !t.State.DeadLetter() {
				continue
			}
			if t.UniqueKey != "" {
				if _, held := s.live[t.UniqueKey]; held {
					continue
				}
				s.live[t.UniqueKey] = t.ID
			}
			t.State, t.Attempt, t.Fence = Queued, 0, t.Fence+1
			t.RunAt, t.UpdatedAt = msTime(now), msTime(now)
			out = append(out, copyTask(t))
		}
	})
	return out, err
}

// Purge implements [Store.Purge].
func (s *MemoryStore) Purge(ctx context.Context, ids ...string) (int, error) {
	n := 0
	err := s.read(ctx, "purge", func() {
		for _, id := range ids {
			if t := s.tasks[id]; t != nil && t.State.DeadLetter() {
				delete(s.tasks, id)
				n++
			}
		}
	})
	return n, err
}

// PurgeCompleted implements [Store.PurgeCompleted].
func (s *MemoryStore) PurgeCompleted(ctx context.Context, olderThan time.Time) (int, error) {
	n := 0
	err := s.read(ctx, "purge completed", func() {
		for id, t := range s.tasks {
			if t.State.Completed() && t.UpdatedAt.Before(olderThan) {
				delete(s.tasks, id)
				n++
			}
		}
	})
	return n, err
}

// Close implements [Store.Close]: later calls fail with [ErrStoreClosed] and the tasks are
// dropped. It is idempotent.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.tasks, s.live = nil, nil
	return nil
}

// read runs f under the mutex unless ctx is done or the store closed.
func (s *MemoryStore) read(ctx context.Context, what string, f func()) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kernel: memory store: %s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("kernel: memory store: %s: %w", what, ErrStoreClosed)
	}
	f()
	return nil
}

func copyTask(t *StoredTask) StoredTask {
	c := *t
	c.Payload = slices.Clone(t.Payload)
	return c
}

// msTime truncates t to the millisecond and drops its monotonic reading, as stores keep it.
func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// alreadyApplied reports whether changes[i], which cannot apply to a task now at fence,
// state and attempt, is done nonetheless: the task is where changes[i] leaves it, or where
// the changes after it in the batch leave it when changes[i] applied. Those are simulated
// from the state changes[i] leaves: a later change of the task applies when that state is
// live and the change expects its fence; changes already refused (results[j] != nil) and
// inserts (no-ops on an existing task) are skipped. next[k] is the index of the next change
// of the same task after k, or -1. This is how a store recognizes the retry of a batch
// that landed; see "Idempotence and lost answers" in [Store].
func alreadyApplied(changes []Change, results []error, next []int, i int, fence uint64, state State, attempt int) bool {
	c := &changes[i]
	simFence, simState, simAttempt := c.ResultFence(), c.ResultState(), -1
	if c.Op == OpStart {
		simAttempt = c.Task.Attempt
	}
	for {
		if fence == simFence && state == simState && (simAttempt < 0 || attempt == simAttempt) {
			return true
		}
		if !simState.Live() {
			return false
		}
		j := next[i]
		for ; j >= 0; j = next[j] {
			if results[j] == nil && changes[j].Op != OpInsert && changes[j].Fence == simFence {
				break
			}
		}
		if j < 0 {
			return false
		}
		c, i = &changes[j], j
		simFence, simState = c.ResultFence(), c.ResultState()
		if c.Op == OpStart {
			simAttempt = c.Task.Attempt
		}
	}
}

// refuseBeforeInsert refuses, with [ErrInvalidChange], every valid change that comes
// before the first insert of its task in the batch: its outcome would depend on whether
// an earlier batch had inserted the task, so a retried batch could not report the same.
func refuseBeforeInsert(changes []Change, results []error) {
	var pending map[string][]int // task ID → valid non-insert changes seen before any insert
	seen := make(map[string]bool, len(changes))
	for i := range changes {
		c := &changes[i]
		if results[i] != nil || seen[c.Task.ID] {
			continue
		}
		if c.Op == OpInsert {
			seen[c.Task.ID] = true
			for _, j := range pending[c.Task.ID] {
				results[j] = invalidChange(&changes[j], "Op", "comes before the task's insert in the batch")
			}
			delete(pending, c.Task.ID)
			continue
		}
		if pending == nil {
			pending = make(map[string][]int)
		}
		pending[c.Task.ID] = append(pending[c.Task.ID], i)
	}
}

// nextOfTask returns, for each change, the index of the next change with the same task ID,
// or -1.
func nextOfTask(changes []Change) []int {
	next := make([]int, len(changes))
	last := make(map[string]int, len(changes))
	for i := len(changes) - 1; i >= 0; i-- {
		id := changes[i].Task.ID
		if j, ok := last[id]; ok {
			next[i] = j
		} else {
			next[i] = -1
		}
		last[id] = i
	}
	return next
}

// truncateLastError cuts s to at most [LastErrorMax] bytes at a UTF-8 boundary, as every
// [Store] keeps LastError.
func truncateLastError(s string) string {
	if len(s) <= LastErrorMax {
		return s
	}
	n := LastErrorMax
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
