package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
)

// claimConn is what a claim's transaction runs its statements on: a *sql.Tx, or the
// *sql.Conn of a transaction that claimTx began itself.
type claimConn interface {
	execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// claimTx runs f in a transaction at read committed that first renewed o's lease
// (locking o's row), and commits it. On a store made by [Open] the isolation level,
// START TRANSACTION and the renewal are one multi-statement round trip on the
// multi-statement pool, where a transaction of database/sql costs two before the
// renewal (SET TRANSACTION ISOLATION LEVEL, then START TRANSACTION); a renewal that
// changed no row is checked with a locking read of o's row, as renew does.
func (s *Store) claimTx(ctx context.Context, o *store.Owner, f func(claimConn) error) error {
	if s.multi == nil || s.multiOff.Load() {
		return s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
			if err := s.renew(ctx, tx, o); err != nil {
				return err
			}
			return f(tx)
		})
	}
	conn, err := s.multi.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a connection marked bad is closed already
	// discard drops the connection (the server then rolls back what it left open).
	discard := func() { _ = conn.Raw(func(any) error { return driver.ErrBadConn }) }
	renewed := int64(-1)
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("mysqlstore: driver connection %T has no ExecContext", dc)
		}
		q := s.renewQuery(newQuery(256+2*len(o.Name)).raw("SET TRANSACTION ISOLATION LEVEL READ COMMITTED;START TRANSACTION;"), o)
		res, err := ex.ExecContext(ctx, q.String(), nil)
		if err != nil {
			return err
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			return fmt.Errorf("mysqlstore: driver result %T does not report each statement's rows", res)
		}
		if got := mr.AllRowsAffected(); len(got) == 3 {
			renewed = got[2]
		}
		return nil
	})
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erParse {
		s.multiOff.Store(true)
	}
	if err == nil && renewed != 1 {
		// No row changed: the lease ended, or the renewal wrote the very expiry the one
		// before it wrote (see renew).
		q := newQuery(160 + 2*len(o.Name)).raw("SELECT 1 FROM ").raw(s.owners).raw(" WHERE epoch = ").uint(o.Epoch).
			raw(" AND name = ").hexString(o.Name).raw(" AND " + liveOwnerSQL + " FOR UPDATE")
		live := false
		if err = scanAll(ctx, conn, q.String(), func(scanner) error { live = true; return nil }); err == nil && !live {
			err = errLost
		}
	}
	if err == nil {
		err = f(conn)
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // COMMIT not sent: nothing applies
	}
	if err != nil {
		if ctx.Err() != nil {
			discard()
		} else if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
			discard()
		}
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		discard()
		return maybeApplied(err)
	}
	return nil
}
