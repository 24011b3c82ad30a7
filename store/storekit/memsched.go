package storekit

import (
	"context"
	"fmt"

	"github.com/axsched/ax/store"
)

var _ store.ScheduleStore = (*MemoryStore)(nil)

func checkSchedule(what, name, spec string) error {
	if err := store.CheckScheduleName(name); err != nil {
		return fmt.Errorf("storekit: memory store: %s: %w: %w", what, err, store.ErrInvalidChange)
	}
	if len(spec) > store.ScheduleSpecMax {
		return fmt.Errorf("storekit: memory store: %s %q: spec of %d bytes: must be at most %d (ScheduleSpecMax): %w",
			what, name, len(spec), store.ScheduleSpecMax, store.ErrInvalidChange)
	}
	return nil
}

func unknownSchedule(what, name string) error {
	return fmt.Errorf("storekit: memory store: %s %q: %w", what, name, store.ErrUnknownSchedule)
}

// UpsertSchedule implements [store.ScheduleStore.UpsertSchedule].
func (s *MemoryStore) UpsertSchedule(ctx context.Context, sc store.StoredSchedule) (store.StoredSchedule, bool, error) {
	if err := checkSchedule("upsert schedule", sc.Name, sc.Spec); err != nil {
		return store.StoredSchedule{}, false, err
	}
	var (
		out     store.StoredSchedule
		created bool
	)
	err := s.read(ctx, "upsert schedule", func() {
		if cur := s.schedules[sc.Name]; cur != nil {
			out = *cur
			return
		}
		n := store.StoredSchedule{Name: sc.Name, Spec: sc.Spec, Next: msTime(sc.Next), Paused: sc.Paused, UpdatedAt: s.nowLocked()}
		s.schedules[sc.Name] = &n
		out, created = n, true
	})
	return out, created, err
}

// FireSchedule implements [store.ScheduleStore.FireSchedule] under the store's mutex.
func (s *MemoryStore) FireSchedule(ctx context.Context, f store.ScheduleFire) (store.StoredSchedule, bool, error) {
	if err := f.Validate(); err != nil {
		return store.StoredSchedule{}, false, fmt.Errorf("storekit: memory store: fire schedule: %w", err)
	}
	var (
		out           store.StoredSchedule
		fired         bool
		unknown, lost bool
	)
	err := s.read(ctx, "fire schedule", func() {
		cur := s.schedules[f.Name]
		if cur == nil {
			unknown = true
			return
		}
		var owner uint64
		if f.Owner != nil {
			if !s.liveOwnerLocked(*f.Owner) {
				lost = true
				return
			}
			m := s.owners[f.Owner.Epoch]
			m.expires = s.nowLocked().Add(m.lease)
			owner = f.Owner.Epoch
		}
		if cur.Paused || !cur.Next.Equal(msTime(f.Expect)) {
			out = *cur
			return
		}
		cur.Next = msTime(f.Next)
		if f.Spec != "" {
			cur.Spec = f.Spec
		}
		cur.Version++
		cur.UpdatedAt = s.nowLocked()
		if len(f.Occurrences) > 0 {
			cur.Last = msTime(f.Last())
			// Validated: an insert of a new ID applies, of a stored one is a no-op.
			s.commitLocked(f.Occurrences, owner)
		}
		out, fired = *cur, true
	})
	switch {
	case err != nil:
		return store.StoredSchedule{}, false, err
	case unknown:
		return store.StoredSchedule{}, false, unknownSchedule("fire schedule", f.Name)
	case lost:
		return store.StoredSchedule{}, false, fmt.Errorf("storekit: memory store: fire schedule %q by owner %s/%d: %w",
			f.Name, f.Owner.Name, f.Owner.Epoch, store.ErrLeaseLost)
	}
	return out, fired, nil
}

// GetSchedule implements [store.ScheduleStore.GetSchedule].
func (s *MemoryStore) GetSchedule(ctx context.Context, name string) (store.StoredSchedule, error) {
	if err := checkSchedule("get schedule", name, ""); err != nil {
		return store.StoredSchedule{}, err
	}
	var (
		out store.StoredSchedule
		ok  bool
	)
	err := s.read(ctx, "get schedule", func() {
		if cur := s.schedules[name]; cur != nil {
			out, ok = *cur, true
		}
	})
	if err == nil && !ok {
		err = unknownSchedule("get schedule", name)
	}
	return out, err
}

// PauseSchedule implements [store.ScheduleStore.PauseSchedule].
func (s *MemoryStore) PauseSchedule(ctx context.Context, name string, paused bool) (store.StoredSchedule, error) {
	if err := checkSchedule("pause schedule", name, ""); err != nil {
		return store.StoredSchedule{}, err
	}
	var (
		out store.StoredSchedule
		ok  bool
	)
	err := s.read(ctx, "pause schedule", func() {
		cur := s.schedules[name]
		if cur == nil {
			return
		}
		if cur.Paused != paused {
			cur.Paused = paused
			cur.Version++
			cur.UpdatedAt = s.nowLocked()
		}
		out, ok = *cur, true
	})
	if err == nil && !ok {
		err = unknownSchedule("pause schedule", name)
	}
	return out, err
}

// DeleteSchedule implements [store.ScheduleStore.DeleteSchedule].
func (s *MemoryStore) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := checkSchedule("delete schedule", name, ""); err != nil {
		return false, err
	}
	var found bool
	err := s.read(ctx, "delete schedule", func() {
		_, found = s.schedules[name]
		delete(s.schedules, name)
	})
	return found, err
}
