package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/axsched/ax/store"
	"github.com/go-sql-driver/mysql"
)

// erParse is the server's error for a statement it cannot parse (ER_PARSE_ERROR).
const erParse = 1064

// multiFits reports whether stmts can go in one multi-statement query (see multiTx):
// the store has the pool for it, the server took such queries so far, and the query
// stays within the statement budget.
func (s *Store) multiFits(o *store.Owner, stmts []statement) bool {
	if s.multi == nil || s.multiOff.Load() {
		return false
	}
	size := len("START TRANSACTION") + 256
	if o != nil {
		size += 2 * len(o.Name)
	}
	for _, st := range stmts {
		if st.absent {
			return false
		}
		size += len(st.sql) + 1
	}
	return size <= s.statementBudget()
}

// multiTx runs the writes stmts of an optimistic plan in one transaction, in two round
// trips on a connection of the multi-statement pool: START TRANSACTION, the renewal of
// o's lease (when o is not nil) and stmts as one query, then COMMIT once every
// statement reported the rows it must. Otherwise it sends ROLLBACK and returns
// errReplan: a renewal that changed no row (the lease ended, or the renewal wrote the
// expiry the one before it wrote), an update that changed fewer rows than it names, an
// INSERT that met a duplicate entry; the locking plan then decides, renewing with its
// check. A connection whose transaction may be left open (its ROLLBACK or COMMIT
// failed) is closed, which ends the transaction on the server.
func (s *Store) multiTx(ctx context.Context, o *store.Owner, stmts []statement) error {
	return s.multiTxWith(ctx, o, "", stmts)
}

// multiTxWith is multiTx whose renewal is renewal (see renewSetQuery), or o's plain
// renewal when renewal is empty.
func (s *Store) multiTxWith(ctx context.Context, o *store.Owner, renewal string, stmts []statement) error {
	size := 64 + len(renewal)
	for _, st := range stmts {
		size += len(st.sql) + 1
	}
	q := newQuery(size + 256).raw("START TRANSACTION")
	switch {
	case renewal != "":
		q.raw(";").raw(renewal)
	case o != nil:
		s.renewQuery(q.raw(";"), o)
	}
	for _, st := range stmts {
		q.raw(";").raw(st.sql)
	}

	conn, err := s.multi.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a connection Raw found bad is closed already
	var out error
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			out = fmt.Errorf("mysqlstore: driver connection %T has no ExecContext", dc)
			return nil
		}
		res, err := ex.ExecContext(ctx, q.String(), nil)
		if err == nil {
			err = checkMulti(res, o != nil, stmts)
		}
		if err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) {
				// The server refused a statement (a duplicate entry, a deadlock, a
				// lock wait): the locking plan decides, with its own error handling. A
				// server or proxy that does not take multi-statement queries answers
				// with a parse error: the store stops sending them.
				if me.Number == erParse {
					s.multiOff.Store(true)
				}
				err = fmt.Errorf("%w: %w", errReplan, err)
			}
			out = err
			if _, rerr := ex.ExecContext(ctx, "ROLLBACK", nil); rerr != nil {
				return driver.ErrBadConn
			}
			return nil
		}
		if _, err := ex.ExecContext(ctx, "COMMIT", nil); err != nil {
			out = maybeApplied(err)
			return driver.ErrBadConn
		}
		return nil
	})
	if out != nil {
		return out
	}
	return err
}

// checkMulti checks the rows each statement of a multiTx query reported: none for
// START TRANSACTION, one for the renewal when renew, and want for each of stmts that
// has one.
func checkMulti(res driver.Result, renew bool, stmts []statement) error {
	mr, ok := res.(mysql.Result)
	if !ok {
		return fmt.Errorf("mysqlstore: driver result %T does not report each statement's rows", res)
	}
	got := mr.AllRowsAffected()
	first := 1
	if renew {
		first = 2
	}
	if len(got) != first+len(stmts) {
		return fmt.Errorf("mysqlstore: %d statements reported rows, want %d", len(got), first+len(stmts))
	}
	if renew && got[1] != 1 {
		return errReplan // the locking plan renews with the check of renew
	}
	for i, st := range stmts {
		if st.want >= 0 && got[first+i] != st.want {
			return errReplan // a fence moved, a task ended or is unknown
		}
	}
	return nil
}
