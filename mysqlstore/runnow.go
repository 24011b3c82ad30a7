package mysqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/axsched/ax/store"
)

// RunNow implements [store.SharedStore.RunNow] in one transaction at read committed:
// it renews o's lease, reads o's start set (a task it records runs, and is left
// alone), then one UPDATE moves run_at (and updated_at) to now on the
// row id when it is waiting, in the pool or o's, and due later; when that changes no
// row, one locking read tells whether the row is waiting there and due already. Both
// statements use the primary key. A retry after a lost answer finds the row moved
// and reports it found.
func (s *Store) RunNow(ctx context.Context, o store.Owner, now time.Time, id string) (bool, error) {
	if err := s.checkOpen("run now"); err != nil {
		return false, err
	}
	at := millis(now)
	where := newQuery(192 + 2*len(id)).raw(" WHERE id = ").hexString(id).raw(" AND state IN ").raw(waitingCodes).
		raw(" AND owner IN (0, ").uint(o.Epoch).raw(")").String()
	update := newQuery(256 + len(where)).raw("UPDATE ").raw(s.table).raw(" SET run_at = ").int(at).
		raw(", updated_at = ").int(at).raw(", version = version + 1").raw(where).raw(" AND run_at > ").int(at).String()
	read := "SELECT 1 FROM " + s.table + where + " FOR UPDATE"
	found := false
	err := s.retryAs(ctx, "run now", &o, func() error {
		return s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
			found = false
			if err := s.renew(ctx, tx, &o); err != nil {
				return err
			}
			// A task of o's start set runs: o's row is locked, so the set is final.
			sets, err := s.readSets(ctx, tx, []uint64{o.Epoch})
			if err != nil {
				return err
			}
			if _, ok := sets[o.Epoch][id]; ok {
				return nil
			}
			res, err := tx.ExecContext(ctx, update)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				found = n == 1
				return err
			}
			return scanAll(ctx, tx, read, func(scanner) error { found = true; return nil })
		})
	})
	if err != nil {
		return false, err
	}
	return found, nil
}
