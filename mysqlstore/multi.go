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

// multiTx runs the writes stmts of an optimistic plan in one transaction, in one round
// trip on a connection of the multi-statement pool: START TRANSACTION, the renewal of
// o's lease (when o is not nil), stmts and COMMIT as one query, each statement that
// must report a number of rows checked before the next one runs (see multiQuery): by a
// condition of the next statement's WHERE when that is an UPDATE that must change rows
// (it then changes none), by a guard (see rowsGuard) otherwise. A failed check stops
// the query before COMMIT: a renewal that changed no row (the lease ended, or the
// renewal wrote the expiry the one before it wrote), an update that changed fewer rows
// than it names; so does an INSERT that met a duplicate entry. It then sends ROLLBACK
// and returns errReplan, and the locking plan decides, renewing with its check. A
// connection whose transaction may be left open (its ROLLBACK failed), or whose
// query's answer was lost, is closed, which ends an open transaction on the server.
func (s *Store) multiTx(ctx context.Context, o *store.Owner, stmts []statement) error {
	return s.multiTxWith(ctx, o, "", stmts)
}

// multiQuery returns the query of multiTxWith and the rows each of its statements must
// report (-1: any). A statement's count is checked by the next statement when that has
// where and must change rows: its WHERE gets "AND ROW_COUNT() = n", a constant the
// server evaluates once (ROW_COUNT() is still the statement before's), so that a
// count that differs makes it change no row, which its own check then catches. Other
// counts get a guard, and so does the last one, before COMMIT.
func (s *Store) multiQuery(o *store.Owner, renewal string, stmts []statement) (string, []int64) {
	size := 64 + len(renewal)
	for _, st := range stmts {
		size += len(st.sql) + 1 + len(rowCountSQL) + 8
	}
	q := newQuery(size + 256 + len(rowsGuardSQL)*2).raw("START TRANSACTION")
	wants := make([]int64, 0, len(stmts)+4)
	wants = append(wants, 0)
	pend := int64(-1) // the count the next statement must check, -1 for none
	switch {
	case renewal != "":
		q.raw(";").raw(renewal)
		wants, pend = append(wants, 1), 1
	case o != nil:
		s.renewQuery(q.raw(";"), o)
		wants, pend = append(wants, 1), 1
	}
	for _, st := range stmts {
		fold := pend >= 0 && st.where && st.want > 0
		if pend >= 0 && !fold {
			rowsGuard(q, pend)
			wants = append(wants, 0)
		}
		q.raw(";").raw(st.sql)
		if fold {
			q.raw(rowCountSQL).int(pend)
		}
		wants, pend = append(wants, st.want), st.want
	}
	if pend >= 0 {
		rowsGuard(q, pend)
		wants = append(wants, 0)
	}
	return q.raw(";COMMIT").String(), append(wants, 0)
}

// rowCountSQL is the condition by which a statement of a multiTx query checks the count
// of the statement before it (see multiQuery).
const rowCountSQL = " AND ROW_COUNT() = "

// multiTxWith is multiTx whose renewal is renewal (see renewSetQuery), or o's plain
// renewal when renewal is empty.
func (s *Store) multiTxWith(ctx context.Context, o *store.Owner, renewal string, stmts []statement) error {
	text, wants := s.multiQuery(o, renewal, stmts)
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
		res, err := ex.ExecContext(ctx, text, nil)
		if err != nil {
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number == erServerShutdown || me.Number == erQueryInterrupted ||
				me.Number == erConnectionKilled || me.Number == erClientInterrupt {
				// The answer was lost, or the query was cut short: it may have committed.
				out = maybeApplied(err)
				if !errors.Is(out, errMaybeApplied) && !errors.Is(out, driver.ErrBadConn) {
					out = fmt.Errorf("%w: %w", errMaybeApplied, err)
				}
				return driver.ErrBadConn
			}
			// A statement before COMMIT failed (a guard, a duplicate entry, a deadlock,
			// a lock wait): the transaction is open, and ROLLBACK ends it; the locking
			// plan decides, with its own error handling. A server or proxy that does not
			// take multi-statement queries answers with a parse error: the store stops
			// sending them.
			if me.Number == erParse {
				s.multiOff.Store(true)
			}
			out = fmt.Errorf("%w: %w", errReplan, err)
			if _, rerr := ex.ExecContext(ctx, "ROLLBACK", nil); rerr != nil {
				return driver.ErrBadConn
			}
			return nil
		}
		out = checkMulti(res, wants)
		return nil
	})
	if out != nil {
		return out
	}
	return err
}

// rowsGuardSQL is the guard that follows a statement of a multiTx query whose count the
// next statement does not check: a SET whose regular expression is 'a' when the
// statement before it reported the number of rows that ends it, and '(' otherwise,
// which the server cannot compile: an error (ER_REGEXP_ERROR; MySQL's own) that stops
// the query. The pattern depends on ROW_COUNT(), so it is compiled when the SET runs.
// (A DO would turn the error into a warning; a subquery of two rows costs the server
// twice as much.)
const rowsGuardSQL = ";SET @ax_rows = REGEXP_INSTR('', IF(ROW_COUNT() = "

// rowsGuard appends the guard of rowsGuardSQL for want rows to q.
func rowsGuard(q *query, want int64) *query {
	return q.raw(rowsGuardSQL).int(want).raw(", 'a', '('))")
}

// checkMulti checks the rows each statement of a committed multiTx query reported
// against wants (see multiQuery; -1: any). The checks stopped a query whose rows
// differ before it committed, so a difference here means that the server ran the
// query otherwise than planned, after it committed.
func checkMulti(res driver.Result, wants []int64) error {
	mr, ok := res.(mysql.Result)
	if !ok {
		return fmt.Errorf("%w: driver result %T does not report each statement's rows", errMaybeApplied, res)
	}
	got := mr.AllRowsAffected()
	if len(got) != len(wants) {
		return fmt.Errorf("%w: %d statements reported rows, want %d", errMaybeApplied, len(got), len(wants))
	}
	for i, w := range wants {
		if w >= 0 && got[i] != w {
			return fmt.Errorf("%w: statement %d of the committed query reported %d rows, want %d", errMaybeApplied, i, got[i], w)
		}
	}
	return nil
}
