package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/go-sql-driver/mysql"
)

// errStuck: a rescue found the row of an owner whose lease ended over a lease ago
// locked, and stopped before locking any task (see rescueState).
var errStuck = errors.New("mysqlstore: an ended owner's row is locked")

// stuckOwner is an owner row as a rescue read it (committed) when it found it locked
// although its lease ended over a lease ago.
type stuckOwner struct {
	epoch   uint64
	conn    uint64 // conn_id
	expires int64  // expires_at, microseconds since the Unix epoch
}

// expiresUS reads a DATETIME(6) column as microseconds since the Unix epoch.
func expiresUS(col string) string {
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + col + ")"
}

// staleOwners returns the owners other than epoch that are not marked ended and whose
// lease ended at least one lease ago, with a consistent (non-locking) read: in a rescue
// that then fails to lock some of them, those are held by a transaction that has been
// open for longer than any commit of theirs should take.
func (s *Store) staleOwners(ctx context.Context, ex execer, epoch uint64) ([]stuckOwner, error) {
	q := newQuery(224).raw("SELECT epoch, conn_id, " + expiresUS("expires_at") + " FROM ").raw(s.owners).
		raw(" WHERE epoch <> ").uint(epoch).raw(" AND ended = 0 AND expires_at <= " + nowSQL + " - INTERVAL lease_us MICROSECOND")
	var out []stuckOwner
	err := scanAll(ctx, ex, q.String(), func(sc scanner) error {
		var so stuckOwner
		err := sc.Scan(&so.epoch, &so.conn, &so.expires)
		out = append(out, so)
		return err
	})
	return out, err
}

// stuckHolder is a connection that holds a stuck owner's row in a transaction left open.
type stuckHolder struct {
	epoch uint64
	name  string
	conn  uint64
	idle  int64 // seconds
}

// freeStuck kills the connections that hold the rows of the owners in stuck in
// transactions left open (see stuckHolders), so that the server rolls them back and
// frees their locks, and returns the epochs whose holder it killed. Each kill is counted
// ([Store.Kills]) and logged. Best effort: a failure is logged, and the rescue goes on
// without the kill.
func (s *Store) freeStuck(ctx context.Context, stuck []stuckOwner) []uint64 {
	holders, err := s.stuckHolders(ctx, stuck)
	if err != nil {
		if ctx.Err() == nil && !s.closed.Load() {
			s.warn("look for stuck transactions", "err", redact(err, s.secrets))
		}
		return nil
	}
	var killed []uint64
	for _, h := range holders {
		conn := strconv.FormatUint(h.conn, 10)
		if _, err := s.db.ExecContext(ctx, "KILL CONNECTION "+conn); err != nil {
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != erNoSuchThread { // gone already: nothing to free
				s.warn("kill of a stuck transaction's connection", "owner", h.name, "epoch", h.epoch, "connection", h.conn,
					"err", redact(err, s.secrets))
			}
			continue
		}
		s.kills.Add(1)
		s.warn("killed the connection of a transaction left open by an owner whose lease ended, to free its locks",
			"owner", h.name, "epoch", h.epoch, "connection", h.conn, "idle_seconds", h.idle)
		killed = append(killed, h.epoch)
	}
	return killed
}

// stuckHolders returns, for the owners in stuck (as a rescue read them, committed, before
// it found them locked), the connection that holds each row in a transaction left open:
//
//   - The newest version of the row, read at READ UNCOMMITTED, differs from the
//     committed one the rescue read: it is a write not yet committed, and its conn_id
//     (every write of an owner row sets it to CONNECTION_ID()) names the connection
//     whose transaction made it and holds the row's lock.
//   - Even that newest version's lease ended at least a lease ago: a renewal in a
//     transaction open for over two leases.
//   - The server lists that connection (information_schema.PROCESSLIST, in the store's
//     database, not this one) as idle (Sleep) for at least a lease and at least a
//     second: its client has sent nothing since.
//
// It reads within one read-only transaction at READ UNCOMMITTED.
func (s *Store) stuckHolders(ctx context.Context, stuck []stuckOwner) ([]stuckHolder, error) {
	epochs := make([]uint64, len(stuck))
	for i, so := range stuck {
		epochs[i] = so.epoch
	}
	q := newQuery(640).raw("SELECT o.epoch, o.name, o.conn_id, " + expiresUS("o.expires_at") + ", o.ended, p.TIME FROM ").raw(s.owners).
		raw(" o JOIN information_schema.PROCESSLIST p ON p.ID = o.conn_id WHERE o.epoch IN ").raw(uintList(epochs)).
		raw(" AND o.conn_id <> 0 AND o.expires_at <= " + nowSQL + " - INTERVAL o.lease_us MICROSECOND" +
			" AND p.ID <> CONNECTION_ID() AND p.COMMAND = 'Sleep' AND p.TIME >= GREATEST(1, CEIL(o.lease_us / 1000000))" +
			" AND p.DB <=> DATABASE()")
	var out []stuckHolder
	err := s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true}, func(tx *sql.Tx) error {
		out = nil
		return scanAll(ctx, tx, q.String(), func(sc scanner) error {
			var (
				h       stuckHolder
				expires int64
				ended   bool
			)
			if err := sc.Scan(&h.epoch, &h.name, &h.conn, &expires, &ended, &h.idle); err != nil {
				return err
			}
			for _, so := range stuck {
				if so.epoch == h.epoch && (ended || so.conn != h.conn || so.expires != expires) {
					out = append(out, h)
				}
			}
			return nil
		})
	})
	return out, err
}

// Kills returns how many connections the store's rescues killed because they held an
// ended owner's row in a transaction left open (see "Stuck transactions" in the package
// docs). It is safe for concurrent use.
func (s *Store) Kills() int64 { return s.kills.Load() }
