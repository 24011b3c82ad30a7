package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
)

// insertLiveVar is the session variable in which an insert transaction (see InsertAs)
// keeps what it read of its owner's row.
const insertLiveVar = "@ax_insert_live"

// InsertAs implements [store.InsertStore]: it stores new tasks of owner o (and of the
// pool, for a [store.Change] with Pool) without the renewal of [Store.CommitAs], so it
// never waits for a transaction that holds o's owner row (a commit of o's journal), and
// runs beside it on a connection of its own. A batch of inserts without a unique key,
// on a store made by [Open], is one round trip on the multi-statement pool:
//
//	SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION;
//	INSERT INTO <table> … VALUES (…), …;
//	SELECT COUNT(*) INTO @ax_insert_live FROM <table>_owners
//	    WHERE epoch = ? AND name = ? AND ended = 0 AND expires_at > UTC_TIMESTAMP(6);
//	DELETE FROM <table> WHERE id IN (…) AND @ax_insert_live = 0;
//	COMMIT
//
// The read of the owner row is a consistent read (no lock), made after the INSERT: a
// rescue that takes o's tasks locks o's row before it reads o's task rows, and waits
// for the rows this transaction inserted, so either the read sees o live and the
// rescue then takes the inserted rows, or it sees o ended (or its lease over) and the
// DELETE undoes the inserts before COMMIT. The server runs the query to its COMMIT
// whatever becomes of the client. Anything else (a unique key, a duplicate entry, the
// DELETE finding o ended, a store made by [New], a batch over the statement budget)
// goes the way of CommitAs, renewal and all, which reports what applied.
func (s *Store) InsertAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	if err := s.checkOpen("insert"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, s.wrap("insert", err)
	}
	if s.packet.Load() == 0 {
		if err := s.checkPacket(ctx); err != nil {
			return nil, err
		}
	}
	results, done, err := s.insertFast(ctx, &o, changes)
	if done {
		return results, nil
	}
	results, cerr := s.commit(ctx, &o, changes)
	switch {
	case cerr == nil || err == nil || !outcomeUnknown(err) || errors.Is(cerr, store.ErrOutcomeUnknown):
		return results, cerr
	case errors.Is(cerr, store.ErrLeaseLost):
		return nil, fmt.Errorf("%w (after a try whose outcome is unknown: %w)", cerr, store.ErrOutcomeUnknown)
	case errors.Is(cerr, store.ErrStoreUnavailable):
		// The query may have committed before its connection was lost: the outcome is
		// unknown, not a store that stored nothing.
		return nil, redact(&unavailableError{what: "insert", err: fmt.Errorf("%w; then: %s", err, cerr.Error()), unknown: true}, s.secrets)
	}
	return nil, fmt.Errorf("%w (after a try whose outcome is unknown: %w)", cerr, store.ErrOutcomeUnknown)
}

// insertFast runs the one-query insert transaction of InsertAs when the batch allows
// it. done reports that the batch applied, with those results; otherwise err says why
// not (nil when the batch does not allow it), marked with errMaybeApplied when the
// query may have committed.
func (s *Store) insertFast(ctx context.Context, o *store.Owner, changes []store.Change) (results []error, done bool, err error) {
	if s.multi == nil || s.multiOff.Load() || len(changes) == 0 {
		return nil, false, nil
	}
	b := s.newBatch(changes)
	b.owned = true
	if len(b.ids) == 0 || b.changesStored || len(b.keys) > 0 {
		return nil, false, nil
	}
	rows := make(map[string]*row, len(b.ids))
	for _, id := range b.ids {
		rows[id] = &row{id: id, attempt: -1}
	}
	results = plan(b, rows, &keyPlan{holders: map[string]keyHolder{}})
	for i, r := range results {
		if r != nil && b.pre[i] == nil {
			return nil, false, nil
		}
	}
	if len(s.absentChecks(rows, b.ids)) > 0 {
		return nil, false, nil
	}
	stmts := s.inserts(rows, b.ids, o.Epoch)
	size := 512 + 2*len(o.Name) + len(b.ids)*(2*len(b.ids[0])+8)
	for _, st := range stmts {
		size += len(st.sql) + 1
	}
	if len(stmts) == 0 || len(b.ids) > selectIDsMax || size > s.statementBudget() {
		return nil, false, nil
	}
	q := newQuery(size).raw("SET TRANSACTION ISOLATION LEVEL READ COMMITTED;START TRANSACTION")
	for _, st := range stmts {
		q.raw(";").raw(st.sql)
	}
	q.raw(";SELECT COUNT(*) INTO " + insertLiveVar + " FROM ").raw(s.owners).raw(" WHERE epoch = ").uint(o.Epoch).
		raw(" AND name = ").hexString(o.Name).raw(" AND " + liveOwnerSQL)
	q.raw(";DELETE FROM ").raw(s.table).raw(" WHERE id IN ").hexList(b.ids).raw(" AND " + insertLiveVar + " = 0")
	q.raw(";COMMIT")

	conn, err := s.multi.Conn(ctx)
	if err != nil {
		return nil, false, err
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
		if err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number != erServerShutdown && me.Number != erQueryInterrupted &&
				me.Number != erConnectionKilled && me.Number != erClientInterrupt {
				// A statement before COMMIT failed (a duplicate entry, a deadlock): the
				// transaction is open, and ROLLBACK ends it.
				if me.Number == erParse {
					s.multiOff.Store(true)
				}
				out = err
				if _, rerr := ex.ExecContext(ctx, "ROLLBACK", nil); rerr != nil {
					return driver.ErrBadConn
				}
				return nil
			}
			out = maybeApplied(err)
			if !errors.Is(out, errMaybeApplied) && !errors.Is(out, driver.ErrBadConn) {
				out = fmt.Errorf("%w: %w", errMaybeApplied, err)
			}
			return driver.ErrBadConn
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			out = fmt.Errorf("mysqlstore: driver result %T does not report each statement's rows", res)
			return nil
		}
		got := mr.AllRowsAffected()
		// SET, START, the INSERTs, the SELECT … INTO, the DELETE, COMMIT.
		if len(got) != len(stmts)+5 {
			out = fmt.Errorf("%w: %d statements reported rows, want %d", errMaybeApplied, len(got), len(stmts)+5)
			return nil
		}
		if got[len(got)-2] != 0 {
			out = errLost // the DELETE undid the inserts: o is not live
		}
		return nil
	})
	if out == nil && err == nil {
		return results, true, nil
	}
	if out != nil {
		return nil, false, out
	}
	return nil, false, err
}
