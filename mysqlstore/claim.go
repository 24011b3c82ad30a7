package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// The pool's claimable states and the priorities in the order Claim serves them.
var (
	waitingStates = [...]store.State{store.Delayed, store.Queued, store.Retrying}
	claimOrder    = [...]store.Priority{store.High, store.Normal, store.Low}
)

// Claim implements [store.SharedStore.Claim] in one transaction at read committed, so
// that no gap is locked: on a store made by [Open], seven round trips when it claims
// tasks (the isolation level, START TRANSACTION and the renewal in one, see claimTx,
// then the candidates, the locking read, the epoch, the UPDATE, next and COMMIT), four
// when no row is due, three when no priority is wanted; two more on a store made by
// [New], whose BEGIN takes two and the renewal one. It renews o's lease
// (locking o's row); reads the IDs of the due pool rows of req.Kinds without locks, a
// UNION ALL of one ordered range of the index (state, owner, priority, run_at) per
// waiting state and wanted priority, each LIMIT 2*Want; locks those rows by primary key
// with SELECT … FOR UPDATE SKIP LOCKED, so that it locks no row but those it may take
// and never waits for the rows another claim holds (with Max, each range is read up to
// 2*Max, since a priority may take up to Max); takes a new epoch above the epoch part
// of their fences; starts the first Want of each priority (with Max, then the
// shares left to those with more, High first: storekit.ClaimShares) with one UPDATE (owner
// o, Running, attempt + 1, the epoch's first fence); and reads next with one
// consistent read, a UNION ALL of the first row of each (waiting state, priority) range
// of the pool whose kind is wanted. With no Kinds, it is the renewal alone. A retry
// after a lost answer returns the tasks an earlier try of the call took, as well, and
// claims fewer new ones for them.
func (s *Store) Claim(ctx context.Context, o store.Owner, req store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	if err := checkClaim(req); err != nil {
		return nil, time.Time{}, err
	}
	if err := s.checkOpen("claim"); err != nil {
		return nil, time.Time{}, err
	}
	if len(req.Kinds) == 0 { // nothing can be claimed: the lease alone
		return nil, time.Time{}, s.retryAs(ctx, "claim", &o, func() error { return s.renew(ctx, s.db, &o) })
	}
	var (
		out   []store.StoredTask
		next  time.Time
		taken []rescued // by this call's tries
	)
	err := s.retryAs(ctx, "claim", &o, func() error {
		var err error
		out, next, err = s.claimOnce(ctx, &o, req, &taken)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(taken) > 0 {
		s.pruneEpochs(taken[len(taken)-1].epoch)
	}
	return out, next, nil
}

// checkClaim names the fields of req that Claim refuses.
func checkClaim(req store.ClaimRequest) error {
	var errs []error
	if req.Now.IsZero() {
		errs = append(errs, fmt.Errorf("mysqlstore: claim: ClaimRequest.Now is zero: must be set: %w", store.ErrInvalidChange))
	}
	for _, f := range []struct {
		name string
		want int
	}{{"Want.High", req.Want.High}, {"Want.Normal", req.Want.Normal}, {"Want.Low", req.Want.Low}, {"Max", req.Max}} {
		if f.want < 0 {
			errs = append(errs, fmt.Errorf("mysqlstore: claim: ClaimRequest.%s = %d: must be >= 0: %w", f.name, f.want, store.ErrInvalidChange))
		}
	}
	return errors.Join(errs...)
}

func (s *Store) claimOnce(ctx context.Context, o *store.Owner, req store.ClaimRequest, taken *[]rescued) ([]store.StoredTask, time.Time, error) {
	var (
		out  []store.StoredTask
		next time.Time
	)
	now := millis(req.Now)
	err := s.claimTx(ctx, o, func(tx claimConn) error {
		out, next = nil, time.Time{}
		var want [len(claimOrder)]int
		for i, p := range claimOrder {
			want[i] = req.Want.Get(p)
		}
		// The tasks an earlier try took, if its answer was lost: still o's and running
		// at the fence it gave them, since o never learned of them. They count against
		// Want.
		for _, r := range *taken {
			err := scanAll(ctx, tx, s.takenQuery(o.Epoch, r), func(sc scanner) error {
				t, err := scanTask(sc)
				out = append(out, t)
				want[claimIndex(t.Priority)]--
				return err
			})
			if err != nil {
				return err
			}
		}
		prior := len(out)
		// Candidates per priority: up to claimSpare times what it may take from each
		// waiting state's range (its want; with Max, what is left of Max), read
		// without locks, then locked by primary key: only rows it may take.
		limit := want
		maxLeft := req.Max - prior
		if req.Max > 0 {
			limit = [len(claimOrder)]int{maxLeft, maxLeft, maxLeft}
		}
		var cand [len(claimOrder)][]store.StoredTask
		if q, ok := s.claimQuery(req.Kinds, now, limit); ok {
			var ids []string
			err := scanAll(ctx, tx, q, func(sc scanner) error {
				var id string
				err := sc.Scan(&id)
				ids = append(ids, id)
				return err
			})
			if err != nil {
				return err
			}
			for chunk := range slices.Chunk(ids, selectIDsMax) {
				err := scanAll(ctx, tx, s.claimLockQuery(chunk, now), func(sc scanner) error {
					t, err := scanTask(sc)
					i := claimIndex(t.Priority)
					cand[i] = append(cand[i], t)
					return err
				})
				if err != nil {
					return err
				}
			}
		}
		floor := uint64(0)
		for i := range cand {
			slices.SortFunc(cand[i], compareRecovered)
		}
		shares := store.ClaimRequest{Want: store.ByPriority[int]{High: want[0], Normal: want[1], Low: want[2]}}
		if req.Max > 0 {
			shares.Max = maxLeft // none left: no candidates were read
		}
		take := storekit.ClaimShares(shares, func(i int) int { return len(cand[i]) })
		for i := range cand {
			for _, t := range cand[i][:take[i]] {
				floor = max(floor, t.Fence>>32)
				out = append(out, t)
			}
		}
		if fresh := out[prior:]; len(fresh) > 0 {
			e, err := s.nextEpoch(ctx, tx, max(floor, o.Epoch))
			if err != nil {
				return err
			}
			fence := store.FenceOfEpoch(e)
			ids := make([]string, len(fresh))
			for i := range fresh {
				t := &fresh[i]
				ids[i] = t.ID
				t.State, t.Attempt, t.Fence, t.UpdatedAt = store.Running, t.Attempt+1, fence, fromMillis(now)
			}
			*taken = append(*taken, rescued{epoch: e, ids: ids}) // before COMMIT: its answer may be lost
			for chunk := range slices.Chunk(ids, selectIDsMax) {
				if err := s.claimUpdate(ctx, tx, o.Epoch, fence, now, chunk); err != nil {
					return err
				}
			}
		}
		slices.SortFunc(out, compareRecovered)
		var first sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.nextQuery(req.Kinds)).Scan(&first); err != nil {
			return err
		}
		if first.Valid {
			next = fromMillis(first.Int64)
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return out, next, nil
}

// claimUpdate starts the locked pool rows ids for owner at fence.
func (s *Store) claimUpdate(ctx context.Context, tx execer, owner, fence uint64, now int64, ids []string) error {
	q := newQuery(256 + len(ids)*(2*store.StoredIDMax+4)).raw("UPDATE ").raw(s.table).
		raw(" SET owner = ").uint(owner).raw(", state = ").uint(uint64(stateCode(store.Running))).
		raw(", attempt = attempt + 1, fence = ").uint(fence).raw(", updated_at = ").int(now).
		raw(", version = version + 1 WHERE id IN ").hexList(ids).raw(" AND owner = 0 AND state IN ").raw(waitingCodes)
	res, err := tx.ExecContext(ctx, q.String())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
		return errors.Join(err, fmt.Errorf("claim updated %d rows, want %d for locked rows", n, len(ids)))
	}
	return nil
}

// claimSpare: a claim reads up to claimSpare times Want candidates from each range,
// since the rows another claim holds are read but not taken.
const claimSpare = 2

// claimQuery returns the consistent read (no lock) of the IDs of the due pool rows of
// kinds: for each waiting state and each priority i with limit[i] > 0, the first
// claimSpare*limit[i] rows of the range (state, 0, priority, ≤ now) of the index (state,
// owner, priority, run_at), in index order (run_at, id), skipping rows of other kinds.
// It reports false when no priority is wanted.
func (s *Store) claimQuery(kinds []string, now int64, limit [len(claimOrder)]int) (string, bool) {
	kindList := newQuery(8 + len(kinds)*(2*store.KindMax+4)).hexList(kinds).String()
	q := newQuery(1024 + 9*len(kindList))
	parts := 0
	for i, p := range claimOrder {
		if limit[i] <= 0 {
			continue
		}
		for _, st := range waitingStates {
			if parts > 0 {
				q.raw(" UNION ALL ")
			}
			parts++
			q.raw("(SELECT id FROM ").raw(s.table).raw(" WHERE state = ").uint(uint64(stateCode(st))).
				raw(" AND owner = 0 AND priority = ").uint(uint64(priorityCode(p))).raw(" AND run_at <= ").int(now).
				raw(" AND kind IN ").raw(kindList).raw(" ORDER BY run_at, id LIMIT ").int(int64(claimSpare * limit[i])).raw(")")
		}
	}
	return q.String(), parts > 0
}

// claimLockQuery returns the SELECT … FOR UPDATE SKIP LOCKED of the rows ids that are
// still due in the pool. It reads the primary key alone (forced), so it locks exactly
// the rows it returns: never an index record past a range, which may be another
// owner's task, and never a row another transaction holds.
func (s *Store) claimLockQuery(ids []string, now int64) string {
	return newQuery(256 + len(ids)*(2*store.StoredIDMax+4)).raw("SELECT " + columns + " FROM ").raw(s.table).
		raw(" FORCE INDEX (PRIMARY) WHERE id IN ").hexList(ids).raw(" AND owner = 0 AND state IN ").raw(waitingCodes).
		raw(" AND run_at <= ").int(now).raw(" FOR UPDATE SKIP LOCKED").String()
}

// nextQuery returns the consistent read of the earliest run_at of the waiting pool rows
// of kinds (NULL for none): the first row of kinds in each (waiting state, priority)
// range of the index (state, owner, priority, run_at), read in index order.
func (s *Store) nextQuery(kinds []string) string {
	kindList := newQuery(8 + len(kinds)*(2*store.KindMax+4)).hexList(kinds).String()
	q := newQuery(1024 + 9*len(kindList)).raw("SELECT MIN(r) FROM (")
	parts := 0
	for _, p := range claimOrder {
		for _, st := range waitingStates {
			if parts > 0 {
				q.raw(" UNION ALL ")
			}
			parts++
			q.raw("(SELECT run_at AS r FROM ").raw(s.table).raw(" WHERE state = ").uint(uint64(stateCode(st))).
				raw(" AND owner = 0 AND priority = ").uint(uint64(priorityCode(p))).
				raw(" AND kind IN ").raw(kindList).raw(" ORDER BY run_at LIMIT 1)")
		}
	}
	return q.raw(") AS pool").String()
}

// claimIndex is p's index in claimOrder.
func claimIndex(p store.Priority) int {
	switch p {
	case store.High:
		return 0
	case store.Low:
		return 2
	}
	return 1
}
