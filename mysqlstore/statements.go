package mysqlstore

import (
	"slices"
	"strings"

	"github.com/axsched/ax/store"
)

// statements returns the writes of the planned rows: updates of stored rows first (they
// may free unique keys that the inserts take), then INSERTs; or the other way round when
// insertsFirst (see batch.insertsFirst). Inserted rows get owner (0: none), except those
// of a Change with Pool, which get 0.
func (s *Store) statements(rows map[string]*row, ids []string, insertsFirst bool, owner uint64) []statement {
	upd := append(s.updates(rows, ids), s.adopts(rows, ids, owner)...)
	if insertsFirst {
		return append(s.inserts(rows, ids, owner), upd...)
	}
	return append(upd, s.inserts(rows, ids, owner)...)
}

// updates returns the writes of the stored rows the batch changed, each of which checks
// the row's fence and liveness itself, so that a row whose fence moved or which ended is
// not touched. One row: an UPDATE … WHERE id = … AND fence = … AND state <= live. More:
// per chunk of rows, a grouped UPDATE when the rows share most values (see grouped), as
// they do when tasks start and end, or else a multi-row INSERT … ON DUPLICATE KEY UPDATE
// (see upsertTail), one primary-key write per row whatever the values. Each statement
// must report every row it names as changed (version is bumped so that an identical
// rewrite counts too).
func (s *Store) updates(rows map[string]*row, ids []string) []statement {
	var upd []*row
	for _, id := range ids {
		if r := rows[id]; r.exists && r.dirty && !r.adopt {
			upd = append(upd, r)
		}
	}
	switch len(upd) {
	case 0:
		return nil
	case 1:
		return []statement{s.updateOne(upd[0])}
	}
	slices.SortFunc(upd, func(a, b *row) int { return compareStrings(a.id, b.id) }) // one lock order
	var stmts []statement
	budget := s.statementBudget()
	for len(upd) > 0 {
		n, size := 0, 0
		for n < len(upd) && n < updateRowsMax {
			size += 2*len(upd[n].id) + 2*len(upd[n].lastError) + 96
			if n > 0 && size > budget {
				break
			}
			n++
		}
		if st, ok := s.grouped(upd[:n], budget); ok {
			stmts = append(stmts, st)
		} else {
			stmts = append(stmts, s.upsert(upd[:n], size))
		}
		upd = upd[n:]
	}
	return stmts
}

// upsert returns the INSERT … ON DUPLICATE KEY UPDATE of rows; size estimates its length.
func (s *Store) upsert(rows []*row, size int) statement {
	q := newQuery(len(upsertHead) + len(upsertTail) + size + 64)
	q.raw("INSERT INTO ").raw(s.table).raw(upsertHead)
	for i, r := range rows {
		if i > 0 {
			q.raw(",")
		}
		var flags uint64
		attempt, runAt, lastError := 0, int64(0), ""
		if r.setAttempt {
			flags, attempt = flags|upsertAttempt, r.attempt
		}
		if r.setRunAt {
			flags, runAt = flags|upsertRunAt, millis(r.runAt)
		}
		if r.setLastError {
			flags, lastError = flags|upsertLastError, r.lastError
		}
		// The columns of upsertHead: a row that is not stored would be inserted with
		// these values, which the count of rows affected reveals (1, not 2).
		q.raw("(").hexString(r.id).raw(",'','',0,").int(runAt).raw(",0,").uint(flags).raw(",").
			int(int64(attempt)).raw(",").uint(r.fence).raw(",'',").uint(uint64(stateCode(r.state))).raw(",").
			hexString(lastError).raw(",0,").int(millis(r.updatedAt)).raw(",").uint(r.preFence).raw(")")
	}
	q.raw(upsertTail)
	return statement{sql: q.String(), want: 2 * int64(len(rows))}
}

// groupedWhensMax bounds the WHEN branches of a grouped UPDATE: each row's value of a
// column is found by trying the branches in turn (each an id IN (…) of sorted constants,
// a binary search), so many distinct values make the upsert cheaper.
const groupedWhensMax = 16

// grouped returns one UPDATE of rows (sorted by id) that sets each column to a literal
// when the rows share its value, or to CASE WHEN id IN (…) THEN v … END with one branch per
// distinct value, and finds the rows by id IN (…) AND state <= live AND their fence. It
// reports false when the rows have more than groupedWhensMax distinct values in all (as
// retries with their own due times and errors do) or the statement would outgrow budget.
func (s *Store) grouped(rows []*row, budget int) (statement, bool) {
	all := func(*row) bool { return true }
	fence := groupBy(rows, all, func(r *row) uint64 { return r.fence })
	state := groupBy(rows, all, func(r *row) uint8 { return stateCode(r.state) })
	attempt := groupBy(rows, func(r *row) bool { return r.setAttempt }, func(r *row) int { return r.attempt })
	runAt := groupBy(rows, func(r *row) bool { return r.setRunAt }, func(r *row) int64 { return millis(r.runAt) })
	lastError := groupBy(rows, func(r *row) bool { return r.setLastError }, func(r *row) string { return r.lastError })
	updatedAt := groupBy(rows, all, func(r *row) int64 { return millis(r.updatedAt) })
	ended := groupBy(rows, func(r *row) bool { return !r.state.Live() }, func(*row) bool { return true })
	preFence := groupBy(rows, all, func(r *row) uint64 { return r.preFence })
	whens := 0
	for _, n := range []int{
		whensOf(fence, rows), whensOf(state, rows), whensOf(attempt, rows), whensOf(runAt, rows),
		whensOf(lastError, rows), whensOf(updatedAt, rows), whensOf(ended, rows), whensOf(preFence, rows),
	} {
		whens += n
	}
	if whens > groupedWhensMax {
		return statement{}, false
	}
	size := 256
	for _, r := range rows {
		size += (2*len(r.id) + 4) * (2 + whens)
	}
	for _, g := range lastError {
		size += 2*len(g.v) + 8
	}
	q := newQuery(size)
	q.raw("UPDATE ").raw(s.table).raw(" SET ")
	setGrouped(q, "fence", fence, rows, func(v uint64) { q.uint(v) })
	q.raw(", ")
	setGrouped(q, "state", state, rows, func(v uint8) { q.uint(uint64(v)) })
	if len(attempt) > 0 {
		q.raw(", ")
		setGrouped(q, "attempt", attempt, rows, func(v int) { q.int(int64(v)) })
	}
	if len(runAt) > 0 {
		q.raw(", ")
		setGrouped(q, "run_at", runAt, rows, func(v int64) { q.int(v) })
	}
	if len(lastError) > 0 {
		q.raw(", ")
		setGrouped(q, "last_error", lastError, rows, func(v string) { q.hexString(v) })
	}
	q.raw(", ")
	setGrouped(q, "updated_at", updatedAt, rows, func(v int64) { q.int(v) })
	if len(ended) > 0 {
		q.raw(", ")
		setGrouped(q, "live_key", ended, rows, func(bool) { q.raw("NULL") })
	}
	// id IN (…) first: the optimizer reads the primary key's ranges for it.
	q.raw(", version = version + 1 WHERE id IN (")
	for i, r := range rows {
		if i > 0 {
			q.raw(",")
		}
		q.hexString(r.id)
	}
	q.raw(") AND state <= " + liveMaxCode + " AND fence = ")
	if len(preFence) == 1 {
		q.uint(preFence[0].v)
	} else {
		caseGrouped(q, preFence, func(v uint64) { q.uint(v) }, "NULL")
	}
	if q.Len() > budget {
		return statement{}, false
	}
	return statement{sql: q.String(), want: int64(len(rows))}, true
}

// group is the rows of a batch that set a column to v, in the order of the batch's rows.
type group[K comparable] struct {
	v    K
	rows []*row
}

// groupBy groups the rows for which has holds by their value key, in order of first
// appearance.
func groupBy[K comparable](rows []*row, has func(*row) bool, key func(*row) K) []group[K] {
	var gs []group[K]
	for _, r := range rows {
		if !has(r) {
			continue
		}
		k := key(r)
		i := slices.IndexFunc(gs, func(g group[K]) bool { return g.v == k })
		if i < 0 {
			if len(gs) > groupedWhensMax { // too many: grouped gives up anyway
				return append(gs, group[K]{v: k})
			}
			gs = append(gs, group[K]{v: k})
			i = len(gs) - 1
		}
		gs[i].rows = append(gs[i].rows, r)
	}
	return gs
}

// whensOf returns how many WHEN branches setGrouped writes for gs.
func whensOf[K comparable](gs []group[K], rows []*row) int {
	if len(gs) == 1 && len(gs[0].rows) == len(rows) {
		return 0
	}
	return len(gs)
}

// setGrouped writes "col = " and the value of each row: a literal when every row has
// the same, otherwise a CASE that leaves the rows of no group as they are.
func setGrouped[K comparable](q *query, col string, gs []group[K], rows []*row, lit func(K)) {
	q.raw(col).raw(" = ")
	if len(gs) == 1 && len(gs[0].rows) == len(rows) {
		lit(gs[0].v)
		return
	}
	caseGrouped(q, gs, lit, col)
}

// caseGrouped writes CASE WHEN id IN (…) THEN v … ELSE otherwise END.
func caseGrouped[K comparable](q *query, gs []group[K], lit func(K), otherwise string) {
	q.raw("CASE")
	for _, g := range gs {
		q.raw(" WHEN id IN (")
		for i, r := range g.rows {
			if i > 0 {
				q.raw(",")
			}
			q.hexString(r.id)
		}
		q.raw(") THEN ")
		lit(g.v)
	}
	q.raw(" ELSE ").raw(otherwise).raw(" END")
}

// updateOne returns the UPDATE of one stored row.
func (s *Store) updateOne(r *row) statement {
	q := newQuery(256 + 2*len(r.id) + 2*len(r.lastError))
	q.raw("UPDATE ").raw(s.table).raw(" SET fence = ").uint(r.fence).raw(", state = ").uint(uint64(stateCode(r.state)))
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
		q.raw(", live_key = NULL")
	}
	q.raw(", version = version + 1 WHERE id = ").hexString(r.id).raw(" AND fence = ").uint(r.preFence).
		raw(" AND state <= " + liveMaxCode)
	return statement{sql: q.String(), want: 1}
}

// Flags of an upsert row, carried in its max_attempts value: the fields it sets besides
// fence, state, updated_at (and live_key, freed when the state is terminal).
const (
	upsertAttempt = 1 << iota
	upsertRunAt
	upsertLastError
)

// upsertHead lists the columns of an upsert row. Besides the new values, version carries
// the fence the row must have (its pre-fence) and max_attempts the flags: neither is ever
// written by an upsert, whose assignments read them with VALUES().
const upsertHead = " (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, fence, unique_key, state, last_error, created_at, updated_at, version) VALUES "

// upsertTail applies an upsert row to the stored row when the stored fence is the
// pre-fence and the task is live (ok below), and leaves it untouched otherwise.
// Assignments run left to right and see the values assigned before them (unless the
// server's sql_mode has SIMULTANEOUS_ASSIGNMENT), so state and fence, which ok reads,
// come last; fence's own test holds under both rules: after the state assignment, the
// state is the new one exactly when ok held (or the row was terminal in that very state
// at the pre-fence, for an op that keeps the fence: a no-op).
var upsertTail = strings.NewReplacer("OK", "fence = VALUES(version) AND state <= "+liveMaxCode).Replace(
	" ON DUPLICATE KEY UPDATE" +
		" attempt = IF(OK AND VALUES(max_attempts) & 1, VALUES(attempt), attempt)," +
		" run_at = IF(OK AND VALUES(max_attempts) & 2, VALUES(run_at), run_at)," +
		" last_error = IF(OK AND VALUES(max_attempts) & 4, VALUES(last_error), last_error)," +
		" updated_at = IF(OK, VALUES(updated_at), updated_at)," +
		" live_key = IF(OK AND VALUES(state) > " + liveMaxCode + ", NULL, live_key)," +
		" version = IF(OK, version + 1, version)," +
		" state = IF(OK, VALUES(state), state)," +
		" fence = IF(fence = VALUES(version) AND (state <= " + liveMaxCode + " OR state = VALUES(state)), VALUES(fence), fence)")

// dropped reports whether a task the batch inserts is not written at all: with
// Options.DropCompleted, one that completes in the batch and holds no unique key.
func (s *Store) dropped(t *store.StoredTask) bool {
	return s.opts.DropCompleted && t.State.Completed() && t.UniqueKey == ""
}

// absentChecks returns the SELECTs that must find none of the dropped tasks of an
// optimistic plan: one that is stored (a replay of the batch that inserted it) must be
// changed by the batch, which only the locking plan does. A consistent read, without
// locks: a concurrent commit that inserts the same ID is not seen.
func (s *Store) absentChecks(rows map[string]*row, ids []string) []statement {
	var drop []string
	for _, id := range ids {
		if t := rows[id].ins; t != nil && s.dropped(t) {
			drop = append(drop, id)
		}
	}
	var stmts []statement
	for chunk := range slices.Chunk(drop, selectIDsMax) {
		q := newQuery(64 + len(chunk)*(2*len(chunk[0])+8))
		q.raw("SELECT id FROM ").raw(s.table).raw(" WHERE id IN ").hexList(chunk).raw(" LIMIT 1")
		stmts = append(stmts, statement{sql: q.String(), absent: true})
	}
	return stmts
}

// inserts returns the multi-row INSERTs of the batch's new rows, owned by owner (0, the
// column's default, for none), or by none when they go to the pool (Change.Pool).
func (s *Store) inserts(rows map[string]*row, ids []string, owner uint64) []statement {
	var stmts []statement
	var ins []*row
	for _, id := range ids {
		if r := rows[id]; r.ins != nil && !s.dropped(r.ins) {
			ins = append(ins, r)
		}
	}
	slices.SortFunc(ins, func(a, b *row) int { return compareStrings(a.id, b.id) })
	budget := s.statementBudget()
	for len(ins) > 0 {
		size := 0
		for _, r := range ins[:min(len(ins), insertRowsMax)] {
			size += 2*len(r.ins.Payload) + 256
		}
		q := newQuery(min(size, budget) + 512)
		q.raw("INSERT INTO ").raw(s.table).raw(" (" + columns + ", live_key")
		if owner != 0 {
			q.raw(", owner")
		}
		q.raw(") VALUES ")
		n := 0
		for n < len(ins) && n < insertRowsMax && (n == 0 || q.Len()+2*len(ins[n].ins.Payload)+2048 < budget) {
			t := ins[n].ins
			if n > 0 {
				q.raw(",")
			}
			q.raw("(").hexString(t.ID).raw(",").hexString(t.Kind).raw(",").hexBytes(t.Payload).raw(",").
				uint(uint64(priorityCode(t.Priority))).raw(",").int(millis(t.RunAt)).raw(",").
				int(int64(t.Timeout)).raw(",").int(int64(t.MaxAttempts)).raw(",").int(int64(t.Attempt)).raw(",").
				uint(t.Fence).raw(",").hexString(t.UniqueKey).raw(",").uint(uint64(stateCode(t.State))).raw(",").
				hexString(t.LastError).raw(",").int(millis(t.CreatedAt)).raw(",").int(millis(t.UpdatedAt)).raw(",").
				hexString(t.Group).raw(",").hexString(t.Key).raw(",")
			if t.UniqueKey != "" && t.State.Live() {
				q.hexString(t.UniqueKey)
			} else {
				q.raw("NULL")
			}
			if owner != 0 && ins[n].pool {
				q.raw(",0")
			} else if owner != 0 {
				q.raw(",").uint(owner)
			}
			q.raw(")")
			n++
		}
		stmts = append(stmts, statement{sql: q.String(), want: -1})
		ins = ins[n:]
	}
	return stmts
}
