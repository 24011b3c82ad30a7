package mysqlstore

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/axsched/ax/store"
)

var _ store.Identifier = (*Store)(nil)

// Identity implements [store.Identifier]: "mysql://" + the server's host name and port
// as the server tells them (@@hostname, @@port), "/" + the database, "/" + the table,
// so that stores on one table agree whatever address, user or pool reached it. It
// costs one query; it returns the error of the query when the server does not answer
// (after Options.Retries retries of a transient failure), wrapping
// [store.ErrStoreUnavailable] when it did not answer at all.
func (s *Store) Identity(ctx context.Context) (string, error) {
	if err := s.checkOpen("identity"); err != nil {
		return "", err
	}
	var (
		host string
		port int
		db   sql.NullString
	)
	err := s.retry(ctx, "identity", func() error {
		return s.db.QueryRowContext(ctx, "SELECT @@hostname, @@port, DATABASE()").Scan(&host, &port, &db)
	})
	if err != nil {
		return "", err
	}
	return "mysql://" + host + ":" + strconv.Itoa(port) + "/" + db.String + "/" + s.opts.Table, nil
}
