package mysqlstore

import (
	"context"
	"time"

	"github.com/axsched/ax/store"
)

var _ store.Clock = (*Store)(nil)

// Now implements [store.Clock]: one SELECT of the database's UTC_TIMESTAMP(6), the
// clock its leases and owners run on, to the microsecond.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.checkOpen("now"); err != nil {
		return time.Time{}, err
	}
	var us int64
	err := s.retry(ctx, "now", func() error {
		return scanAll(ctx, s.db, "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "+nowSQL+")",
			func(sc scanner) error { return sc.Scan(&us) })
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(us).UTC(), nil
}
