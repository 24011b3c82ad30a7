package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// Recover implements [store.Store.Recover]: one SELECT of the live rows, ordered by
// priority, run_at and id.
func (s *Store) Recover(ctx context.Context) ([]store.StoredTask, error) {
	if err := s.checkOpen("recover"); err != nil {
		return nil, err
	}
	var out []store.StoredTask
	err := s.retry(ctx, "recover", func() error {
		var err error
		out, err = s.readOverlaid(ctx, "SELECT "+columns+", owner FROM "+s.table+" WHERE state <= "+liveMaxCode+
			" ORDER BY priority, run_at, id", false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readOverlaid reads the tasks of query, which selects the columns of scanTask (or
// columnsNoPayload), then owner, and gives those whose owner's start set records
// their start the state it records (see doc.go, "Starts"). When some of the rows are
// live rows of an owner, it reads them and the sets in one read-only transaction at
// repeatable read, so from one snapshot; unless first, it reads them so only.
func (s *Store) readOverlaid(ctx context.Context, query string, first bool) ([]store.StoredTask, error) {
	return s.readOverlaidWith(ctx, query, first, scanOwned)
}

// readOverlaidWith is readOverlaid with the scan of each row: scanOwned, or
// scanOwnedFull for a query that selects result and history after owner.
func (s *Store) readOverlaidWith(ctx context.Context, query string, first bool, scan func(scanner) (ownedTask, error)) ([]store.StoredTask, error) {
	var ts []ownedTask
	read := func(q queryer) error {
		ts = ts[:0]
		return scanAll(ctx, q, query, func(sc scanner) error {
			t, err := scan(sc)
			ts = append(ts, t)
			return err
		})
	}
	owned := func() bool {
		for i := range ts {
			if ts[i].owner != 0 && ts[i].State.Live() {
				return true
			}
		}
		return false
	}
	if first {
		if err := read(s.db); err != nil {
			return nil, err
		}
	}
	if !first || owned() {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer tx.Rollback() //nolint:errcheck // read only: nothing to keep
		if err := read(tx); err != nil {
			return nil, err
		}
		if err := s.overlaySets(ctx, tx, ts); err != nil {
			return nil, err
		}
	}
	out := make([]store.StoredTask, len(ts))
	for i := range ts {
		out[i] = ts[i].StoredTask
	}
	return out, nil
}

// Get implements [store.Store.Get].
func (s *Store) Get(ctx context.Context, id string) (store.StoredTask, error) {
	if err := s.checkOpen("get"); err != nil {
		return store.StoredTask{}, err
	}
	var ts []store.StoredTask
	q := newQuery(128).raw("SELECT " + columns + ", owner, result, history" + s.implicitColumns() + " FROM ").raw(s.table).raw(" WHERE id = ").hexString(id)
	err := s.retry(ctx, "get", func() error {
		var err error
		ts, err = s.readOverlaidWith(ctx, q.String(), true, s.scanOwnedFull)
		return err
	})
	if err != nil {
		return store.StoredTask{}, err
	}
	if len(ts) == 0 {
		return store.StoredTask{}, fmt.Errorf("mysqlstore: get %q: %w", id, store.ErrUnknownTask)
	}
	return ts[0], nil
}

// DeadLetters implements [store.Store.DeadLetters].
func (s *Store) DeadLetters(ctx context.Context, limit int, afterID string) ([]store.StoredTask, error) {
	if err := s.checkOpen("dead letters"); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = store.DeadLettersLimitDefault
	}
	q := newQuery(256).raw("SELECT " + columns + " FROM ").raw(s.table).
		raw(" WHERE state IN " + deadLetterCodes + " AND id > ").hexString(afterID).
		raw(" ORDER BY id LIMIT ").int(int64(limit))
	var out []store.StoredTask
	err := s.retry(ctx, "dead letters", func() error {
		out = out[:0]
		return scanAll(ctx, s.db, q.String(), func(sc scanner) error {
			t, err := scanTask(sc)
			out = append(out, t)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountDeadLetters implements [store.Store.CountDeadLetters].
func (s *Store) CountDeadLetters(ctx context.Context) (int, error) {
	if err := s.checkOpen("count dead letters"); err != nil {
		return 0, err
	}
	var n int
	err := s.retry(ctx, "count dead letters", func() error {
		return s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table+" WHERE state IN "+deadLetterCodes).Scan(&n)
	})
	return n, err
}

// Requeue implements [store.Store.Requeue] in one transaction: the dead letters among ids
// are locked, updated (UPDATE IGNORE skips those whose unique key is held again) and read
// back. Of several requeued dead letters with the same unique key, at most one is requeued.
// The requeued tasks have no owner.
func (s *Store) Requeue(ctx context.Context, now time.Time, ids ...string) ([]store.StoredTask, error) {
	return s.requeueAll(ctx, nil, now, ids)
}

// requeueAll requeues ids for owner o (nil: none), in transactions of selectIDsMax IDs.
func (s *Store) requeueAll(ctx context.Context, o *store.Owner, now time.Time, ids []string) ([]store.StoredTask, error) {
	if err := s.checkOpen("requeue"); err != nil {
		return nil, err
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 && o != nil { // nothing to requeue: the lease alone
		return nil, s.retryAs(ctx, "requeue", o, func() error { return s.renew(ctx, s.db, o) })
	}
	var out []store.StoredTask
	for chunk := range slices.Chunk(ids, selectIDsMax) {
		err := s.retryAs(ctx, "requeue", o, func() error {
			got, err := s.requeue(ctx, o, now, chunk)
			if err == nil {
				out = append(out, got...)
			}
			return err
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *Store) requeue(ctx context.Context, o *store.Owner, now time.Time, ids []string) (out []store.StoredTask, err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit; otherwise err is what matters
	var owner uint64
	if o != nil {
		if err := s.renew(ctx, tx, o); err != nil {
			return nil, err
		}
		owner = o.Epoch
	}
	var dead []string
	q := newQuery(64).raw("SELECT id FROM ").raw(s.table).raw(" WHERE id IN ").hexList(ids).
		raw(" AND state IN " + deadLetterCodes + " FOR UPDATE")
	err = scanAll(ctx, tx, q.String(), func(sc scanner) error {
		var id string
		err := sc.Scan(&id)
		dead = append(dead, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(dead) == 0 {
		return nil, commitTx(ctx, tx)
	}
	// The keys of the dead letters that ended tasks hold for windows over at now are
	// freed first.
	q = newQuery(512).raw("UPDATE ").raw(s.table).raw(" AS h JOIN ").raw(s.table).
		raw(" AS d ON h.live_key = d.unique_key SET h.live_key = NULL, h.version = h.version + 1 WHERE d.id IN ").hexList(dead).
		raw(" AND d.unique_key <> '' AND h.id <> d.id AND h.state > " + liveMaxCode + " AND " + heldWindowEnd + " <= ").int(millis(now))
	if _, err = tx.ExecContext(ctx, q.String()); err != nil {
		return nil, err
	}
	q = newQuery(1024).raw("UPDATE IGNORE ").raw(s.table).raw(" SET " + s.requeueHistory() + "state = ").uint(uint64(stateCode(store.Queued))).
		raw(", attempt = 0, fence = fence + 1, result = NULL, run_at = ").int(millis(now)).raw(", updated_at = ").int(millis(now)).
		raw(", live_key = IF(unique_key = '', NULL, unique_key), owner = ").uint(owner).
		raw(", version = version + 1 WHERE id IN ").hexList(dead).raw(" AND state IN " + deadLetterCodes)
	if _, err = tx.ExecContext(ctx, q.String()); err != nil {
		return nil, err
	}
	q = newQuery(64).raw("SELECT " + columns + " FROM ").raw(s.table).raw(" WHERE id IN ").hexList(dead).
		raw(" AND state = ").uint(uint64(stateCode(store.Queued))).raw(" ORDER BY id")
	err = scanAll(ctx, tx, q.String(), func(sc scanner) error {
		t, err := scanTask(sc)
		out = append(out, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, commitTx(ctx, tx)
}

// Purge implements [store.Store.Purge].
func (s *Store) Purge(ctx context.Context, ids ...string) (int, error) {
	if err := s.checkOpen("purge"); err != nil {
		return 0, err
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	total := 0
	for chunk := range slices.Chunk(ids, selectIDsMax) {
		q := newQuery(64).raw("DELETE FROM ").raw(s.table).raw(" WHERE id IN ").hexList(chunk).
			raw(" AND state IN " + deadLetterCodes)
		n, err := s.exec(ctx, "purge", q.String())
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// purgeRowsMax bounds the rows one DELETE of a purge removes, so that a large purge
// never holds many locks or a long transaction; purgeReadMax bounds the IDs one read of
// PurgeCompleted returns.
const (
	purgeRowsMax = 5000
	purgeReadMax = 100_000
)

// PurgeCompleted implements [store.Store.PurgeCompleted]: reads of the IDs of the
// completed tasks last changed before olderThan, on the completed states' ranges of the
// index (state, owner, priority, run_at), each a consistent read of at most 100,000
// (no lock), and DELETEs of those by primary key, 5,000 at a time, until a read finds
// fewer. The reads look at every completed row, since none of the index's columns
// bounds UpdatedAt; the purger of [Options.Retention] reads only the rows due before
// its cutoff (see purgeDue).
func (s *Store) PurgeCompleted(ctx context.Context, olderThan time.Time) (int, error) {
	if err := s.checkOpen("purge completed"); err != nil {
		return 0, err
	}
	before := millis(olderThan)
	read := newQuery(256).raw("SELECT id FROM ").raw(s.table).raw(" FORCE INDEX (" + ownerIndexName + ") WHERE state IN " +
		completedCodes + " AND updated_at < ").int(before).raw(" AND " + windowEnd + " <= ").int(before).raw(" LIMIT ").int(purgeReadMax).String()
	total := 0
	for {
		n, read, err := s.purgeRead(ctx, read, before)
		total += n
		if err != nil || read < purgeReadMax {
			return total, err
		}
	}
}

// purgeDue deletes the completed tasks last changed and due before olderThan: the
// purger's pass. It reads the owners of completed rows on the index (state, owner, …)
// alone (a loose scan: one probe per owner), then, per 1,000 owners, the IDs of at most
// 5,000 rows at a time from ranges of the index bounded by run_at, one per completed
// state, owner and priority, each starting at the range's oldest due time: the rows
// due after the cutoff, which ended recently, are never read. Each batch is one
// consistent read and one DELETE by primary key, which locks only the rows it deletes,
// never the index ranges where the tasks that end meanwhile go.
func (s *Store) purgeDue(ctx context.Context, olderThan time.Time) (int, error) {
	before := millis(olderThan)
	var owners []uint64
	q := "SELECT state, owner FROM " + s.table + " FORCE INDEX (" + ownerIndexName + ") WHERE state IN " + completedCodes +
		" GROUP BY state, owner"
	err := s.retry(ctx, "purge completed", func() error {
		owners = owners[:0]
		return scanAll(ctx, s.db, q, func(sc scanner) error {
			var state uint8
			var owner uint64
			err := sc.Scan(&state, &owner)
			owners = append(owners, owner)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	slices.Sort(owners)
	owners = slices.Compact(owners)
	total := 0
	for chunk := range slices.Chunk(owners, selectIDsMax) {
		read := newQuery(256 + 24*len(chunk)).raw("SELECT id FROM ").raw(s.table).raw(" FORCE INDEX (" + ownerIndexName + ") WHERE state IN " +
			completedCodes + " AND owner IN ").raw(uintList(chunk)).raw(" AND priority IN " + priorityCodes + " AND run_at < ").int(before).
			raw(" AND updated_at < ").int(before).raw(" AND " + windowEnd + " <= ").int(before).raw(" LIMIT ").int(purgeRowsMax).String()
		for {
			n, read, err := s.purgeRead(ctx, read, before)
			total += n
			if err != nil {
				return total, err
			}
			if read < purgeRowsMax {
				break
			}
		}
	}
	return total, nil
}

// purgeRead runs read, a consistent read of the IDs of completed rows last changed
// before the unix ms before, and deletes those rows by primary key, purgeRowsMax at a
// time, checking state and updated_at again. It returns the rows deleted and the IDs
// read.
func (s *Store) purgeRead(ctx context.Context, read string, before int64) (deleted, got int, err error) {
	var ids []string
	err = s.retry(ctx, "purge completed", func() error {
		ids = ids[:0]
		return scanAll(ctx, s.db, read, func(sc scanner) error {
			var id string
			err := sc.Scan(&id)
			ids = append(ids, id)
			return err
		})
	})
	if err != nil {
		return 0, 0, err
	}
	slices.Sort(ids)
	for chunk := range slices.Chunk(ids, purgeRowsMax) {
		q := newQuery(128 + len(chunk)*(2*len(chunk[0])+4)).raw("DELETE FROM ").raw(s.table).raw(" WHERE id IN ").hexList(chunk).
			raw(" AND state IN " + completedCodes + " AND updated_at < ").int(before).raw(" AND " + windowEnd + " <= ").int(before)
		n, err := s.exec(ctx, "purge completed", q.String())
		deleted += n
		if err != nil {
			return deleted, len(ids), err
		}
	}
	return deleted, len(ids), nil
}

// exec runs one statement with retries and returns the rows it affected.
func (s *Store) exec(ctx context.Context, what, q string) (int, error) {
	var n int64
	err := s.retry(ctx, what, func() error {
		res, err := s.db.ExecContext(ctx, q)
		if err != nil {
			return maybeApplied(err) // a write outside a transaction
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// columnsNoPayload are the columns of scanTask with an empty payload in its place.
const columnsNoPayload = "id, kind, '' AS payload, priority, run_at, timeout_ns, max_attempts, attempt, fence, unique_key, state, last_error, created_at, updated_at, grp, gkey, unique_until, unique_for_ms, headers"

// States implements [store.SharedStore.States]: one read by primary key, payloads
// left out.
func (s *Store) States(ctx context.Context, ids []string) ([]store.StoredTask, error) {
	if err := s.checkOpen("states"); err != nil {
		return nil, err
	}
	if len(ids) > store.StatesMax {
		return nil, fmt.Errorf("mysqlstore: states: %d IDs, at most %d (StatesMax): %w", len(ids), store.StatesMax, store.ErrInvalidChange)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	q := newQuery(64 + len(ids)*(2*32+3)).raw("SELECT " + columnsNoPayload + ", owner FROM ").raw(s.table).raw(" WHERE id IN ").hexList(ids)
	var out []store.StoredTask
	err := s.retry(ctx, "states", func() error {
		var err error
		out, err = s.readOverlaid(ctx, q.String(), true)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Payload = nil
	}
	return out, nil
}
