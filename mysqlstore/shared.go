package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/axsched/ax/store"
)

// errLost: the owner's lease ended (or the owner left or was replaced); the transaction
// is rolled back. retryAs turns it into the error the caller gets.
var errLost = errors.New("mysqlstore: owner lease ended")

// epochPruneEvery: after handing out an epoch that is a multiple of it, the store deletes
// the counter rows below it (see pruneEpochs).
const epochPruneEvery = 256

// nowSQL is the database clock every lease runs on: UTC, so that it does not depend on
// the session's time_zone.
const nowSQL = "UTC_TIMESTAMP(6)"

// liveOwnerSQL is the condition of a live owner row.
const liveOwnerSQL = "ended = 0 AND expires_at > " + nowSQL

// connIDSQL records the writer's connection in every write of an owner row (see freeStuck).
const connIDSQL = "conn_id = CONNECTION_ID()"

func checkOwnerArgs(name string, lease time.Duration, what string) error {
	switch {
	case name == "" || len(name) > store.OwnerNameMax:
		return fmt.Errorf("mysqlstore: %s: name %q: must be 1 to %d bytes: %w", what, name, store.OwnerNameMax, store.ErrInvalidChange)
	case lease < store.LeaseMin:
		return fmt.Errorf("mysqlstore: %s: lease %v: must be at least %v: %w", what, lease, store.LeaseMin, store.ErrInvalidChange)
	}
	return nil
}

// retryAs is retry for a call by owner o (nil: none). When f reports errLost, the call
// fails with an error wrapping [store.ErrLeaseLost]; when an earlier try may have
// applied (the answer of its COMMIT was lost), that error wraps
// [store.ErrOutcomeUnknown] too.
func (s *Store) retryAs(ctx context.Context, what string, o *store.Owner, f func() error) error {
	if o == nil {
		return s.retry(ctx, what, f)
	}
	unknown := false
	return s.retry(ctx, what, func() error {
		err := f()
		switch {
		case errors.Is(err, errLost) && unknown:
			return fmt.Errorf("owner %s/%d: %w (after a try whose outcome is unknown: %w)",
				o.Name, o.Epoch, store.ErrLeaseLost, store.ErrOutcomeUnknown)
		case errors.Is(err, errLost):
			return fmt.Errorf("owner %s/%d: %w", o.Name, o.Epoch, store.ErrLeaseLost)
		case outcomeUnknown(err):
			unknown = true
		}
		return err
	})
}

// renew extends o's lease by its length from the database's clock now, records the
// connection in conn_id, and returns errLost when the lease ended, o left, or another
// epoch of its name joined. In a transaction, it locks o's owner row until the end:
// callers renew before they lock any task row, and [Store.Rescue] locks an ended owner's
// row before its task rows, so that the two are serialized.
func (s *Store) renew(ctx context.Context, ex execer, o *store.Owner) error {
	res, err := ex.ExecContext(ctx, s.renewQuery(newQuery(192+2*len(o.Name)), o).String())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	// No row changed: the lease ended, or this renewal wrote the very expiry the one
	// before it wrote on the same connection (within the same microsecond). A read of the
	// row tells.
	q := newQuery(160 + 2*len(o.Name)).raw("SELECT 1 FROM ").raw(s.owners).raw(" WHERE epoch = ").uint(o.Epoch).
		raw(" AND name = ").hexString(o.Name).raw(" AND " + liveOwnerSQL + " FOR UPDATE")
	live := false
	if err := scanAll(ctx, ex, q.String(), func(scanner) error { live = true; return nil }); err != nil {
		return err
	}
	if !live {
		return errLost
	}
	return nil
}

// renewQuery writes into q the UPDATE of renew, which changes o's row (one row
// affected) exactly when the lease is live.
func (s *Store) renewQuery(q *query, o *store.Owner) *query {
	return q.raw("UPDATE ").raw(s.owners).
		raw(" SET expires_at = " + nowSQL + " + INTERVAL lease_us MICROSECOND, " + connIDSQL + " WHERE epoch = ").uint(o.Epoch).
		raw(" AND name = ").hexString(o.Name).raw(" AND " + liveOwnerSQL)
}

// nextEpoch hands out a new epoch (or lease fence) above floor: the AUTO_INCREMENT value
// of a row inserted into the counter table. When the counter is not above floor, it is
// raised first (an explicit insert of floor+1 moves AUTO_INCREMENT past it).
func (s *Store) nextEpoch(ctx context.Context, ex execer, floor uint64) (uint64, error) {
	for range 2 {
		res, err := ex.ExecContext(ctx, "INSERT INTO "+s.epochs+" () VALUES ()")
		if err != nil {
			return 0, err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return 0, err
		}
		if e := uint64(id); e > floor {
			if e >= 1<<32 {
				return 0, fmt.Errorf("epoch %d: the epochs of 32 bits are spent", e)
			}
			return e, nil
		}
		if _, err := ex.ExecContext(ctx, "INSERT IGNORE INTO "+s.epochs+" (epoch) VALUES ("+strconv.FormatUint(floor+1, 10)+")"); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("epoch counter %s does not rise above %d", s.epochs, floor)
}

// pruneEpochs deletes the counter rows below e once every epochPruneEvery epochs, after
// the transaction that took e committed. The row of the largest epoch stays, so that
// even a server that recomputes AUTO_INCREMENT from the rows at restart never hands an
// epoch out twice. Best effort: a failure is logged.
func (s *Store) pruneEpochs(e uint64) {
	if e%epochPruneEvery != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
	defer cancel()
	if _, err := s.db.ExecContext(ctx, "DELETE FROM "+s.epochs+" WHERE epoch < "+strconv.FormatUint(e, 10)); err != nil && !s.closed.Load() {
		s.warn("prune of the epoch counter", "err", redact(err, s.secrets))
	}
}

// epochFloor returns the epoch a new epoch must exceed beyond what the counter holds:
// zero when the counter holds a row, since it keeps the row of the largest epoch it
// handed out (see pruneEpochs) and every fence's epoch part is one it handed out; the
// epoch part of the largest live fence when the counter is empty (a counter table
// created anew beside a task table that other counters' fences are in, as after a
// restore of the task table alone). The first read is of the counter's primary key;
// only an empty counter costs a read of the live rows' index range.
func (s *Store) epochFloor(ctx context.Context) (uint64, error) {
	var held bool
	if err := s.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.epochs+")").Scan(&held); err != nil || held {
		return 0, err
	}
	var maxFence uint64
	err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(fence), 0) FROM "+s.table+" WHERE state <= "+liveMaxCode).Scan(&maxFence)
	return maxFence >> 32, err
}

// Join implements [store.SharedStore.Join]. It takes an epoch from the counter (above
// the epoch part of every live task's fence: see epochFloor), then, in one transaction,
// ends the earlier epochs of name and inserts the owner row, whose lease runs from the
// database's clock. Its cost does not grow with the tasks stored.
func (s *Store) Join(ctx context.Context, name string, lease time.Duration) (store.Owner, error) {
	if err := checkOwnerArgs(name, lease, "join"); err != nil {
		return store.Owner{}, err
	}
	if err := s.checkOpen("join"); err != nil {
		return store.Owner{}, err
	}
	var o store.Owner
	err := s.retry(ctx, "join", func() error {
		floor, err := s.epochFloor(ctx)
		if err != nil {
			return err
		}
		e, err := s.nextEpoch(ctx, s.db, floor)
		if err != nil {
			return err
		}
		o = store.Owner{Name: name, Epoch: e, Lease: lease}
		return s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
			q := newQuery(192).raw("UPDATE ").raw(s.owners).raw(" SET expires_at = LEAST(expires_at, " + nowSQL + "), ended = 1, " + connIDSQL + " WHERE name = ").
				hexString(name).raw(" AND ended = 0")
			if _, err := tx.ExecContext(ctx, q.String()); err != nil {
				return err
			}
			us := strconv.FormatInt(lease.Microseconds(), 10)
			q = newQuery(192).raw("INSERT INTO ").raw(s.owners).raw(" (epoch, name, lease_us, expires_at, conn_id) VALUES (").uint(e).raw(",").
				hexString(name).raw("," + us + "," + nowSQL + " + INTERVAL " + us + " MICROSECOND, CONNECTION_ID())")
			_, err := tx.ExecContext(ctx, q.String())
			return err
		})
	})
	if err != nil {
		return store.Owner{}, err
	}
	s.joined(o.Epoch)
	s.pruneEpochs(o.Epoch)
	return o, nil
}

// CommitAs implements [store.SharedStore.CommitAs]: [Store.Commit] in transactions that
// first renew o's lease with an UPDATE of its owner row (which locks it), so that a
// batch costs one statement more, and a batch Commit would send as one statement
// without a transaction costs BEGIN and COMMIT too. A CommitAs of no changes is that
// UPDATE alone. A batch retried after a lost answer renews again, which is harmless.
func (s *Store) CommitAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	return s.commit(ctx, &o, changes)
}

// Rescue implements [store.SharedStore.Rescue] in one transaction (read committed, so
// that no gap is locked): it renews o's lease (locking o's row), locks the rows of ended
// owners with SELECT … FOR UPDATE SKIP LOCKED (an owner whose row is locked is in a
// commit, and is left for a later rescue), locks their live tasks and the Running tasks
// of no owner (not the pool's waiting ones) with SELECT … FOR UPDATE in recovery order (all the candidates are locked,
// even beyond limit), takes a new epoch, and gives the first limit of them owner o and
// the epoch's first fence. Ended owners left without a live task are deleted; the others
// are marked ended for good. A retry after a lost answer returns the tasks an earlier
// try of the call took, as well.
//
// When the row of an owner whose lease ended over a lease ago is locked, the first try
// stops before it locks any task and rolls back, and Rescue kills the connection that
// holds the row if it sits idle in a transaction left open (see freeStuck); the next
// try then waits for that owner's row, before it renews o's lease (so that o's
// renewals never wait behind that wait), and takes its tasks.
func (s *Store) Rescue(ctx context.Context, o store.Owner, limit int) ([]store.StoredTask, error) {
	if err := s.checkOpen("rescue"); err != nil {
		return nil, err
	}
	var (
		out   []store.StoredTask
		taken []rescued // by this call's tries
		st    = rescueState{probe: true}
	)
	err := s.retryAs(ctx, "rescue", &o, func() error {
		var err error
		out, err = s.rescueOnce(ctx, &o, limit, &taken, &st)
		if errors.Is(err, errStuck) {
			st.probe = false
			st.killed = s.freeStuck(ctx, st.stuck)
			out, err = s.rescueOnce(ctx, &o, limit, &taken, &st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(taken) > 0 {
		s.pruneEpochs(taken[len(taken)-1].epoch)
	}
	return out, nil
}

// rescued is what one try of a rescue took: the IDs given the first fence of epoch.
type rescued struct {
	epoch uint64
	ids   []string
}

// rescueState is what the tries of one Rescue call learn about stuck owners.
type rescueState struct {
	// probe: the try looks for stuck owners, and when it finds some, it records them in
	// stuck and returns errStuck before it locks any task.
	probe bool
	stuck []stuckOwner
	// killed are the epochs whose row's holder freeStuck killed: the tries wait for
	// their rows instead of skipping them.
	killed []uint64
}

func (s *Store) rescueOnce(ctx context.Context, o *store.Owner, limit int, taken *[]rescued, st *rescueState) ([]store.StoredTask, error) {
	var out []store.StoredTask
	err := s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		out = nil
		var ended []uint64
		scanEpoch := func(sc scanner) error {
			var e uint64
			err := sc.Scan(&e)
			ended = append(ended, e)
			return err
		}
		if len(st.killed) > 0 {
			// Their holders were killed: wait for the rollback to free their rows, before
			// locking o's own row, so that o's renewals never wait behind this wait.
			q := newQuery(160).raw("SELECT epoch FROM ").raw(s.owners).raw(" WHERE epoch IN ").raw(uintList(st.killed)).
				raw(" AND epoch <> ").uint(o.Epoch).raw(" AND (ended <> 0 OR expires_at <= " + nowSQL + ") ORDER BY epoch FOR UPDATE")
			if err := scanAll(ctx, tx, q.String(), scanEpoch); err != nil {
				return err
			}
		}
		if err := s.renew(ctx, tx, o); err != nil {
			return err
		}
		var stale []stuckOwner
		if st.probe {
			var err error
			if stale, err = s.staleOwners(ctx, tx, o.Epoch); err != nil {
				return err
			}
		}
		// Rows this transaction locked already come back too (SKIP LOCKED skips only
		// the rows of others).
		q := newQuery(160).raw("SELECT epoch FROM ").raw(s.owners).raw(" WHERE epoch <> ").uint(o.Epoch).
			raw(" AND (ended <> 0 OR expires_at <= " + nowSQL + ") ORDER BY epoch FOR UPDATE SKIP LOCKED")
		if err := scanAll(ctx, tx, q.String(), scanEpoch); err != nil {
			return err
		}
		slices.Sort(ended)
		ended = slices.Compact(ended)
		if stuck := slices.DeleteFunc(stale, func(so stuckOwner) bool { return slices.Contains(ended, so.epoch) }); len(stuck) > 0 {
			st.stuck = stuck
			return errStuck
		}
		// The tasks an earlier try took, if its answer was lost: still o's, with the
		// fence it gave them, since o never learned of them.
		for _, r := range *taken {
			err := scanAll(ctx, tx, s.takenQuery(o.Epoch, r), func(sc scanner) error {
				t, err := scanTask(sc)
				out = append(out, t)
				return err
			})
			if err != nil {
				return err
			}
		}
		prior := len(out)
		if limit > 0 && prior >= limit {
			return nil
		}
		// The ended owners' start sets: their rows are locked, so the sets are final.
		sets, err := s.readSets(ctx, tx, ended)
		if err != nil {
			return err
		}
		floor := uint64(0)
		var started []bool // of out[prior:]: its owner's set records its start
		err = scanAll(ctx, tx, s.rescueQuery(ended, max(0, limit-prior), limit > 0), func(sc scanner) error {
			t, err := scanOwned(sc)
			e, ok := sets[t.owner][t.ID]
			if ok = ok && t.owner != 0 && e.applies(t.Fence, t.State); ok {
				e.overlay(&t.StoredTask)
			}
			floor = max(floor, t.Fence>>32)
			out = append(out, t.StoredTask)
			started = append(started, ok)
			return err
		})
		if err != nil {
			return err
		}
		if fresh := out[prior:]; len(fresh) > 0 {
			e, err := s.nextEpoch(ctx, tx, floor)
			if err != nil {
				return err
			}
			fence := store.FenceOfEpoch(e)
			ids := make([]string, len(fresh))
			for i := range fresh {
				ids[i] = fresh[i].ID
				fresh[i].Fence = fence
			}
			*taken = append(*taken, rescued{epoch: e, ids: ids}) // before COMMIT: its answer may be lost
			for _, st := range s.rescueUpdates(o.Epoch, fence, fresh, started) {
				res, err := tx.ExecContext(ctx, st.sql)
				if err != nil {
					return err
				}
				if n, err := res.RowsAffected(); err != nil || n != st.want {
					return errors.Join(err, fmt.Errorf("rescue updated %d rows, want %d for locked rows", n, st.want))
				}
			}
		}
		if prior > 0 {
			slices.SortFunc(out, compareRecovered)
		}
		if len(ended) == 0 {
			return nil
		}
		list := uintList(ended)
		res, err := tx.ExecContext(ctx, "DELETE FROM "+s.owners+" WHERE epoch IN "+list+" AND NOT EXISTS (SELECT 1 FROM "+
			s.table+" t WHERE t.state IN "+liveCodes+" AND t.owner = "+s.owners+".epoch)")
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n > 0 && len(sets) > 0 {
			// The further pages of the sets of the owners just forgotten.
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.startsTable+" WHERE epoch IN "+list+" AND epoch NOT IN (SELECT epoch FROM "+
				s.owners+" WHERE epoch IN "+list+")"); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, "UPDATE "+s.owners+" SET ended = 1, "+connIDSQL+" WHERE epoch IN "+list+" AND ended = 0")
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rescueUpdates returns the UPDATEs that give the rescued tasks ts owner and fence: one
// for the tasks whose start no set records, and one per attempt and UpdatedAt for
// those whose start their owner's set records (started[i]), whose rows then take the
// state the set records (Running, its attempt and UpdatedAt).
func (s *Store) rescueUpdates(owner, fence uint64, ts []store.StoredTask, started []bool) []statement {
	type shape struct {
		attempt int
		updated int64
	}
	var (
		plain  []string
		shapes []shape
		by     = make(map[shape][]string)
	)
	for i := range ts {
		if !started[i] {
			plain = append(plain, ts[i].ID)
			continue
		}
		k := shape{ts[i].Attempt, millis(ts[i].UpdatedAt)}
		if _, ok := by[k]; !ok {
			shapes = append(shapes, k)
		}
		by[k] = append(by[k], ts[i].ID)
	}
	var stmts []statement
	head := func(n int) *query {
		return newQuery(160 + n*(2*store.StoredIDMax+4)).raw("UPDATE ").raw(s.table).raw(" SET owner = ").uint(owner).
			raw(", fence = ").uint(fence)
	}
	if len(plain) > 0 {
		q := head(len(plain)).raw(", version = version + 1 WHERE id IN ").hexList(plain).raw(" AND state <= " + liveMaxCode)
		stmts = append(stmts, statement{sql: q.String(), want: int64(len(plain))})
	}
	for _, k := range shapes {
		ids := by[k]
		q := head(len(ids)).raw(", state = ").uint(uint64(stateCode(store.Running))).raw(", attempt = ").int(int64(k.attempt)).
			raw(", updated_at = ").int(k.updated).raw(", version = version + 1 WHERE id IN ").hexList(ids).raw(" AND state <= " + liveMaxCode)
		stmts = append(stmts, statement{sql: q.String(), want: int64(len(ids))})
	}
	return stmts
}

// rescueQuery returns the SELECT … FOR UPDATE of the live rows of the ended owners and of
// the Running rows of no owner (0), in recovery order, at most limit of them when
// limited. It reads ranges of the index (state, owner, …), one per live state and ended
// owner and one for (Running, 0), forced so that a small table is not scanned instead,
// and so locks only the rows it finds: never the pool's waiting rows, which a concurrent
// Claim may hold, nor the task rows that a live owner's commit (or a transaction left
// open) holds.
func (s *Store) rescueQuery(ended []uint64, limit int, limited bool) string {
	q := newQuery(256 + 24*len(ended)).raw("SELECT " + columns + ", owner FROM ").raw(s.table).
		raw(" FORCE INDEX (" + ownerIndexName + ") WHERE (state = ").uint(uint64(stateCode(store.Running))).raw(" AND owner = 0)")
	if len(ended) > 0 {
		q.raw(" OR (state IN " + liveCodes + " AND owner IN ").raw(uintList(ended)).raw(")")
	}
	q.raw(" ORDER BY priority, run_at, id")
	if limited {
		q.raw(" LIMIT ").int(int64(limit))
	}
	return q.raw(" FOR UPDATE").String()
}

// takenQuery returns the SELECT … FOR UPDATE of the rows r took for owner that are
// still live, theirs and at the fence r gave them. It reads the primary key.
func (s *Store) takenQuery(owner uint64, r rescued) string {
	q := newQuery(256 + len(r.ids)*(2*store.StoredIDMax+4)).raw("SELECT " + columns + " FROM ").raw(s.table).raw(" WHERE id IN ").
		hexList(r.ids).raw(" AND owner = ").uint(owner).raw(" AND fence = ").uint(store.FenceOfEpoch(r.epoch)).
		raw(" AND state <= " + liveMaxCode + " FOR UPDATE")
	return q.String()
}

// compareRecovered orders tasks as [store.Store.Recover] does: by priority (High
// first), run time, then ID.
func compareRecovered(a, b store.StoredTask) int {
	if c := cmp.Compare(priorityCode(a.Priority), priorityCode(b.Priority)); c != 0 {
		return c
	}
	if c := a.RunAt.Compare(b.RunAt); c != 0 {
		return c
	}
	return compareStrings(a.ID, b.ID)
}

// uintList writes "(1,2,3)".
func uintList(ns []uint64) string {
	q := newQuery(2 + 21*len(ns)).raw("(")
	for i, n := range ns {
		if i > 0 {
			q.raw(",")
		}
		q.uint(n)
	}
	return q.raw(")").String()
}

// RequeueAs implements [store.SharedStore.RequeueAs]: [Store.Requeue] whose
// transactions first renew o's lease, and whose requeued tasks get owner o.
func (s *Store) RequeueAs(ctx context.Context, o store.Owner, now time.Time, ids ...string) ([]store.StoredTask, error) {
	return s.requeueAll(ctx, &o, now, ids)
}

// Leave implements [store.SharedStore.Leave]: one UPDATE that ends o's lease now (when
// it ends later) and marks it ended for good.
func (s *Store) Leave(ctx context.Context, o store.Owner) error {
	if err := s.checkOpen("leave"); err != nil {
		return err
	}
	q := newQuery(192 + 2*len(o.Name)).raw("UPDATE ").raw(s.owners).raw(" SET expires_at = LEAST(expires_at, " + nowSQL + "), ended = 1, " + connIDSQL + " WHERE epoch = ").
		uint(o.Epoch).raw(" AND name = ").hexString(o.Name)
	_, err := s.exec(ctx, "leave", q.String())
	s.forgetStarts(o.Epoch)
	return err
}

// Owners implements [store.SharedStore.Owners]: one SELECT of the owner table, ordered
// by epoch, with liveness read on the database's clock and each owner's live tasks
// counted on the index (state, owner, …) alone.
func (s *Store) Owners(ctx context.Context) ([]store.OwnerInfo, error) {
	if err := s.checkOpen("owners"); err != nil {
		return nil, err
	}
	q := "SELECT o.epoch, o.name, o.lease_us, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', o.expires_at), " +
		"o.ended = 0 AND o.expires_at > " + nowSQL + ", (SELECT COUNT(*) FROM " + s.table + " t WHERE t.state IN " + liveCodes +
		" AND t.owner = o.epoch) FROM " + s.owners + " o ORDER BY o.epoch"
	var out []store.OwnerInfo
	err := s.retry(ctx, "owners", func() error {
		out = out[:0]
		return scanAll(ctx, s.db, q, func(sc scanner) error {
			var (
				info             store.OwnerInfo
				leaseUS, expires int64
			)
			if err := sc.Scan(&info.Epoch, &info.Name, &leaseUS, &expires, &info.Live, &info.Tasks); err != nil {
				return err
			}
			info.Lease, info.Expires = time.Duration(leaseUS)*time.Microsecond, time.UnixMicro(expires).UTC()
			out = append(out, info)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
