package mysqlstore

import (
	"slices"
)

// adopts returns the writes of the stored rows the batch adopts (Change.Adopt): each
// UPDATE sets owner to the committing owner (0 for none) and finds its rows by id AND
// owner = 0 AND fence = their fence AND a waiting state, so that a row another owner
// claimed first, or that left the pool otherwise, is not touched (and the plan is made
// again from the locked rows, which refuses its adopt). Rows that share their values,
// as the adopts of one commit do (attempt, fences, time), go in one UPDATE per chunk of
// updateRowsMax; others (an adopt followed by further changes of the same task in the
// batch) get one UPDATE each.
func (s *Store) adopts(rows map[string]*row, ids []string, owner uint64) []statement {
	type shape struct {
		fence, preFence uint64
		state           uint8
		attempt         int
		updatedAt       int64
	}
	var (
		groups []shape
		by     = make(map[shape][]*row)
		stmts  []statement
	)
	for _, id := range ids {
		r := rows[id]
		if !r.exists || !r.adopt {
			continue
		}
		if r.setRunAt || r.setLastError || !r.state.Live() || !r.setAttempt {
			stmts = append(stmts, s.adoptOne(r, owner))
			continue
		}
		k := shape{fence: r.fence, preFence: r.preFence, state: stateCode(r.state), attempt: r.attempt, updatedAt: millis(r.updatedAt)}
		if _, ok := by[k]; !ok {
			groups = append(groups, k)
		}
		by[k] = append(by[k], r)
	}
	for _, k := range groups {
		rs := by[k]
		slices.SortFunc(rs, func(a, b *row) int { return compareStrings(a.id, b.id) }) // one lock order
		for chunk := range slices.Chunk(rs, updateRowsMax) {
			chunkIDs := make([]string, len(chunk))
			size := 256
			for i, r := range chunk {
				chunkIDs[i] = r.id
				size += 2*len(r.id) + 4
			}
			q := newQuery(size).raw("UPDATE ").raw(s.table).raw(" SET owner = ").uint(owner).
				raw(", fence = ").uint(k.fence).raw(", state = ").uint(uint64(k.state)).
				raw(", attempt = ").int(int64(k.attempt)).raw(", updated_at = ").int(k.updatedAt).
				raw(", version = version + 1 WHERE id IN ").hexList(chunkIDs).
				raw(" AND owner = 0 AND fence = ").uint(k.preFence).raw(" AND state IN ").raw(waitingCodes)
			stmts = append(stmts, statement{sql: q.String(), want: int64(len(chunk))})
		}
	}
	return stmts
}

// adoptOne returns the UPDATE of one adopted row with whatever the batch left in it.
func (s *Store) adoptOne(r *row, owner uint64) statement {
	q := newQuery(256 + 2*len(r.id) + 2*len(r.lastError)).raw("UPDATE ").raw(s.table).raw(" SET owner = ").uint(owner).
		raw(", fence = ").uint(r.fence).raw(", state = ").uint(uint64(stateCode(r.state)))
	if r.setAttempt {
		q.raw(", attempt = ").int(int64(r.attempt))
	}
	if r.setRunAt {
		q.raw(", run_at = ").int(millis(r.runAt))
	}
	if r.setLastError {
		q.raw(", last_error = ").hexString(r.lastError)
	}
	q.raw(", updated_at = ").int(millis(r.updatedAt))
	if !r.state.Live() {
		q.raw(", live_key = " + keyAtEnd)
	}
	q.raw(", version = version + 1 WHERE id = ").hexString(r.id).raw(" AND owner = 0 AND fence = ").uint(r.preFence).
		raw(" AND state IN ").raw(waitingCodes)
	return statement{sql: q.String(), want: 1}
}
