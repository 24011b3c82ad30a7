package mysqlstore

import (
	"context"

	"github.com/axsched/ax/store"
)

// schedulesLimitDefault is the page size of [Store.Schedules] for a limit <= 0.
const schedulesLimitDefault = 100

// Schedules returns up to limit stored schedules with a name greater than afterName,
// ordered by name: pass the last name of a page to get the next one, "" for the
// first. A limit <= 0 means 100. It is one SELECT on the schedule table's primary
// key, for operators' tools (cmd/axctl); the kernel never calls it.
func (s *Store) Schedules(ctx context.Context, limit int, afterName string) ([]store.StoredSchedule, error) {
	if err := s.checkOpen("schedules"); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = schedulesLimitDefault
	}
	q := newQuery(192).raw("SELECT " + schedColumns + " FROM ").raw(s.sched).
		raw(" WHERE name > ").hexString(afterName).raw(" ORDER BY name LIMIT ").int(int64(limit))
	var out []store.StoredSchedule
	err := s.retry(ctx, "schedules", func() error {
		out = out[:0]
		return scanAll(ctx, s.db, q.String(), func(sc scanner) error {
			sch, err := scanSchedule(sc)
			out = append(out, sch)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
