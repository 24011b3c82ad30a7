package storekit

import (
	"context"
	"fmt"

	"github.com/axsched/ax/store"
)

var _ store.KeyReader = (*MemoryStore)(nil)

// TasksByKey implements [store.KeyReader.TasksByKey].
func (s *MemoryStore) TasksByKey(ctx context.Context, keys []string) ([]store.StoredTask, error) {
	if len(keys) > store.StatesMax {
		return nil, fmt.Errorf("storekit: memory store: tasks by key: %d keys, at most %d (StatesMax): %w", len(keys), store.StatesMax, store.ErrInvalidChange)
	}
	var out []store.StoredTask
	err := s.read(ctx, "tasks by key", func() {
		seen := make(map[string]bool, len(keys))
		for _, k := range keys {
			if seen[k] || k == "" {
				continue
			}
			seen[k] = true
			if t := s.tasks[s.live[k]]; t != nil && t.UniqueKey == k && (t.State.Live() || !t.KeyHeldUntil().IsZero()) {
				out = append(out, copyTask(t))
			}
		}
	})
	return out, err
}
