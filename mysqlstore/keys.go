package mysqlstore

import (
	"context"
	"fmt"

	"github.com/axsched/ax/store"
)

var _ store.KeyReader = (*Store)(nil)

// TasksByKey implements [store.KeyReader.TasksByKey]: one SELECT on the UNIQUE index
// live_key, which holds a task's key while the task keeps it (live, or ended with a
// window until another insert takes the key over), with the started overlay applied as
// [Store.Get] applies it.
func (s *Store) TasksByKey(ctx context.Context, keys []string) ([]store.StoredTask, error) {
	if err := s.checkOpen("tasks by key"); err != nil {
		return nil, err
	}
	if len(keys) > store.StatesMax {
		return nil, fmt.Errorf("mysqlstore: tasks by key: %d keys, at most %d (StatesMax): %w", len(keys), store.StatesMax, store.ErrInvalidChange)
	}
	var ks []string
	for _, k := range keys {
		if k != "" {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, nil
	}
	q := newQuery(128 + len(ks)*(2*48+3)).raw("SELECT " + columns + ", owner, result, history" + s.implicitColumns() + " FROM ").raw(s.table).raw(" WHERE live_key IN ").hexList(ks)
	var out []store.StoredTask
	err := s.retry(ctx, "tasks by key", func() error {
		var err error
		out, err = s.readOverlaidWith(ctx, q.String(), true, s.scanOwnedFull)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
