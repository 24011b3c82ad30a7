package mysqlstore

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/axsched/ax/store"
)

// statements returns the writes of the planned rows: updates of stored rows first (they
// may free unique keys that the inserts take), then INSERTs; or the other way round when
// insertsFirst (see batch.insertsFirst). Inserted rows get owner (0: none), except those
// of a Change with Pool, which get 0. guard (see ownerGuard) is a further condition of
// every update of a stored row.
func (s *Store) statements(rows map[string]*row, ids []string, insertsFirst bool, owner uint64, guard string) []statement {
	upd := append(s.updates(rows, ids, guard), s.adopts(rows, ids, owner)...)
	if insertsFirst {
		return append(s.inserts(rows, ids, owner), upd...)
	}
	return append(upd, s.inserts(rows, ids, owner)...)
}

// updates returns the writes of the stored rows the batch changed, each of which checks
// the row's fence and liveness itself, so that a row whose fence moved or which ended is
// not touched. One row: an UPDATE … WHERE id = … AND fence = … AND state <= live. More:
// the rows are grouped into sets that write the same values (see setOf: the starts of a
// batch, its ends, its retries of one due time and error), and each set of at least
// setRowsMin rows is one UPDATE … WHERE id IN (…) AND fence = … AND state <= live that
// sets each column to a literal (see setUpdates), at most setsMax of them; the rows of the
// other sets, with values of their own, are one multi-row INSERT … ON DUPLICATE KEY
// UPDATE (see upsertTail), one primary-key write per row whatever the values. Each ID is
// written once. A store without the multi-statement pool (made by [New]), which pays a
// round trip per statement, writes a batch of several sets as one upsert instead. Each
// statement must report every row it names as changed (version is bumped so that an
// identical rewrite counts too), and holds at most updateRowsMax rows and
// statementBudget bytes.
func (s *Store) updates(rows map[string]*row, ids []string, guard string) []statement {
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
		return []statement{s.updateOne(upd[0], guard)}
	}
	slices.SortFunc(upd, func(a, b *row) int { return compareStrings(a.id, b.id) }) // each statement in one lock order
	sets := setsOf(upd)
	single := s.multi == nil || s.multiOff.Load()
	var stmts []statement
	var rest []*row // the rows of no set's UPDATE
	if single && len(sets) > 1 {
		rest = upd
	} else {
		// The largest sets first; a stable sort keeps the others in order of their IDs.
		slices.SortStableFunc(sets, func(a, b []*row) int { return len(b) - len(a) })
		for i, set := range sets {
			if i >= setsMax || len(set) < setRowsMin && len(sets) > 1 {
				rest = append(rest, set...)
				continue
			}
			stmts = append(stmts, s.setUpdates(set, guard)...)
		}
		slices.SortFunc(rest, func(a, b *row) int { return compareStrings(a.id, b.id) })
	}
	if len(rest) == 1 {
		return append(stmts, s.updateOne(rest[0], guard))
	}
	budget := s.statementBudget()
	for len(rest) > 0 {
		n, size := 0, 0
		for n < len(rest) && n < updateRowsMax {
			size += 2*len(rest[n].id) + 2*len(rest[n].lastError) + 2*len(rest[n].hist) + 2*len(rest[n].result) + 112
			if n > 0 && size > budget {
				break
			}
			n++
		}
		stmts = append(stmts, s.upsert(rest[:n], size, guard))
		rest = rest[n:]
	}
	return stmts
}

// Bounds of the UPDATEs of a batch's sets of rows (see updates): a set of fewer rows
// than setRowsMin, or beyond the setsMax largest, goes to the upsert, where a row costs
// more than in an UPDATE of many but less than a statement of its own.
const (
	setRowsMin = 8
	setsMax    = 8
)

// setKey is what a row's write sets, as setUpdate writes it: rows of one key are one
// UPDATE.
type setKey struct {
	preFence, fence uint64
	state           uint8
	attempt         int // when setAttempt
	runAt           int64
	lastError       string
	updatedAt       int64
	setAttempt      bool
	setRunAt        bool
	setLastError    bool
	setResult       bool
	result          string // when setResult
	setStartedAt    bool
	startedAt       int64  // when setStartedAt
	lastOwner       string // when setStartedAt
}

func setOf(r *row) setKey {
	k := setKey{
		preFence: r.preFence, fence: r.fence, state: stateCode(r.state), updatedAt: millis(r.updatedAt),
		setAttempt: r.setAttempt, setRunAt: r.setRunAt, setLastError: r.setLastError,
	}
	if r.setAttempt {
		k.attempt = r.attempt
	}
	if r.setRunAt {
		k.runAt = millis(r.runAt)
	}
	if r.setLastError {
		k.lastError = r.lastError
	}
	if r.setResult {
		k.setResult, k.result = true, string(r.result)
	}
	if r.setStartedAt {
		k.setStartedAt, k.startedAt, k.lastOwner = true, r.startedAt, r.lastOwner
	}
	return k
}

// setsOf groups rows (sorted by ID) by setOf, in order of their first rows; each set
// keeps the rows' order.
func setsOf(rows []*row) [][]*row {
	index := make(map[setKey]int, 4)
	var sets [][]*row
	for _, r := range rows {
		k := setOf(r)
		i, ok := index[k]
		if !ok {
			i = len(sets)
			index[k] = i
			sets = append(sets, nil)
		}
		sets[i] = append(sets[i], r)
	}
	return sets
}

// setUpdates returns the UPDATEs of rows (sorted by ID) that write the same values:
// UPDATE … SET state = …, … WHERE id IN (…) AND fence = … AND state <= live, one per
// chunk of updateRowsMax rows or statementBudget bytes. The attempt records the rows
// append, each its own, are a CASE on id (see histCase), in chunks of at most
// histRowsMax rows, since the server tries its branches in turn.
func (s *Store) setUpdates(rows []*row, guard string) []statement {
	k := setOf(rows[0])
	hist := anyHistory(rows)
	head := newQuery(128 + 2*len(k.lastError) + 2*len(k.result))
	head.raw("UPDATE ").raw(s.table).raw(" SET state = ").uint(uint64(k.state))
	if k.fence != k.preFence {
		head.raw(", fence = ").uint(k.fence)
	}
	if k.setAttempt {
		head.raw(", attempt = ").int(int64(k.attempt))
	}
	if k.setRunAt {
		head.raw(", run_at = ").int(k.runAt)
	}
	if k.setLastError {
		head.raw(", last_error = ").hexString(k.lastError)
	}
	if k.setResult {
		head.raw(", result = ").hexString(k.result)
	}
	if k.setStartedAt {
		head.raw(", started_at = ").int(k.startedAt).raw(", last_owner = ").hexString(k.lastOwner)
	}
	head.raw(", updated_at = ").int(k.updatedAt)
	if k.state > stateCode(store.Retrying) {
		head.raw(", live_key = " + keyAtEnd)
	}
	// id IN (…) first (written by the loop below): the optimizer reads the primary
	// key's ranges for it.
	tail := newQuery(64 + len(guard)).raw(") AND fence = ").uint(k.preFence).raw(" AND state <= " + liveMaxCode).raw(guard).String()
	budget := s.statementBudget() - head.Len() - len(tail)
	most := updateRowsMax
	if hist {
		most = histRowsMax
	}
	var stmts []statement
	for len(rows) > 0 {
		n, size := 0, 0
		for n < len(rows) && n < most {
			size += 4*len(rows[n].id) + 2*len(rows[n].hist) + 24
			if n > 0 && size > budget {
				break
			}
			n++
		}
		q := newQuery(head.Len() + size + len(tail) + 64)
		q.raw(head.String())
		if hist {
			q.raw(", history = ").raw(keepHistory(histCase(rows[:n]), s.opts.AttemptsKept))
		}
		q.raw(", version = version + 1 WHERE id IN (")
		for i, r := range rows[:n] {
			if i > 0 {
				q.raw(",")
			}
			q.hexString(r.id)
		}
		q.raw(tail)
		stmts = append(stmts, statement{sql: q.String(), want: int64(n), where: true})
		rows = rows[n:]
	}
	return stmts
}

// histRowsMax bounds the rows of a set's UPDATE that appends attempt records: its
// CASE on id costs the server a comparison per branch tried, so rows × rows / 2.
const histRowsMax = 128

// anyHistory reports whether one of rows appends attempt records.
func anyHistory(rows []*row) bool {
	for _, r := range rows {
		if r.hist != "" {
			return true
		}
	}
	return false
}

// histCase returns the SQL CASE that gives each of rows the attempt records it
// appends (the empty string for none).
func histCase(rows []*row) string {
	size := 32
	for _, r := range rows {
		size += 2*len(r.id) + 2*len(r.hist) + 16
	}
	q := newQuery(size).raw("CASE id")
	for _, r := range rows {
		if r.hist != "" {
			q.raw(" WHEN ").hexString(r.id).raw(" THEN ").hexString(r.hist)
		}
	}
	return q.raw(" ELSE '' END").String()
}

// upsert returns the INSERT … ON DUPLICATE KEY UPDATE of rows; size estimates its length.
func (s *Store) upsert(rows []*row, size int, guard string) statement {
	tail := upsertTail(guard, s.opts.AttemptsKept)
	q := newQuery(len(upsertHead) + len(tail) + size + 64)
	q.raw("INSERT INTO ").raw(s.table).raw(upsertHead)
	for i, r := range rows {
		if i > 0 {
			q.raw(",")
		}
		var flags uint64
		attempt, runAt, lastError := 0, int64(0), ""
		var result []byte
		if r.setResult {
			flags, result = flags|upsertResult, r.result
		}
		if r.setAttempt {
			flags, attempt = flags|upsertAttempt, r.attempt
		}
		if r.setRunAt {
			flags, runAt = flags|upsertRunAt, millis(r.runAt)
		}
		if r.setLastError {
			flags, lastError = flags|upsertLastError, r.lastError
		}
		if r.setStartedAt {
			flags |= upsertStartedAt
		}
		// The columns of upsertHead: a row that is not stored would be inserted with
		// these values, which the count of rows affected reveals (1, not 2).
		q.raw("(").hexString(r.id).raw(",'','',0,").int(runAt).raw(",0,").uint(flags).raw(",").
			int(int64(attempt)).raw(",").uint(r.fence).raw(",'',").uint(uint64(stateCode(r.state))).raw(",").
			hexString(lastError).raw(",0,").int(millis(r.updatedAt)).raw(",").uint(r.preFence).raw(",").
			hexBytes(result).raw(",").hexString(r.hist).raw(",").int(r.startedAt).raw(",").hexString(r.lastOwner).raw(")")
	}
	q.raw(tail)
	return statement{sql: q.String(), want: 2 * int64(len(rows))}
}

// updateOne returns the UPDATE of one stored row.
func (s *Store) updateOne(r *row, guard string) statement {
	q := newQuery(256 + 2*len(r.id) + 2*len(r.lastError) + 2*len(r.hist) + 2*len(r.result))
	q.raw("UPDATE ").raw(s.table).raw(" SET fence = ").uint(r.fence).raw(", state = ").uint(uint64(stateCode(r.state)))
	if r.setResult {
		q.raw(", result = ").hexBytes(r.result)
	}
	if r.hist != "" {
		q.raw(", history = ").raw(keepHistory(newQuery(2*len(r.hist)+4).hexString(r.hist).String(), s.opts.AttemptsKept))
	}
	if r.setStartedAt {
		q.raw(", started_at = ").int(r.startedAt).raw(", last_owner = ").hexString(r.lastOwner)
	}
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
	q.raw(", version = version + 1 WHERE id = ").hexString(r.id).raw(" AND fence = ").uint(r.preFence).
		raw(" AND state <= " + liveMaxCode).raw(guard)
	return statement{sql: q.String(), want: 1, where: true}
}

// Flags of an upsert row, carried in its max_attempts value: the fields it sets besides
// fence, state, updated_at (and live_key, freed when the state is terminal).
const (
	upsertAttempt = 1 << iota
	upsertRunAt
	upsertLastError
	upsertResult
	upsertStartedAt
)

// upsertHead lists the columns of an upsert row. Besides the new values, version carries
// the fence the row must have (its pre-fence) and max_attempts the flags: neither is ever
// written by an upsert, whose assignments read them with VALUES().
const upsertHead = " (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, fence, unique_key, state, last_error, created_at, updated_at, version, result, history, started_at, last_owner) VALUES "

// upsertTail returns the tail that applies an upsert row to the stored row when the
// stored fence is the pre-fence, the task is live and guard holds (ok below), and
// leaves it untouched otherwise.
// Assignments run left to right and see the values assigned before them (unless the
// server's sql_mode has SIMULTANEOUS_ASSIGNMENT), so state and fence, which ok reads,
// come last; fence's own test holds under both rules: after the state assignment, the
// state is the new one exactly when ok held (or the row was terminal in that very state
// at the pre-fence, for an op that keeps the fence: a no-op).
func upsertTail(guard string, keep int) string {
	return strings.NewReplacer("OK", "fence = VALUES(version) AND state <= "+liveMaxCode+guard, "GUARD", guard,
		"HISTORY", keepHistory("VALUES(history)", keep)).Replace(upsertTailOK)
}

var upsertTailOK = " ON DUPLICATE KEY UPDATE" +
	" result = IF(OK AND VALUES(max_attempts) & 8, VALUES(result), result)," +
	" history = IF(OK AND VALUES(history) <> '', HISTORY, history)," +
	" started_at = IF(OK AND VALUES(max_attempts) & 16, VALUES(started_at), started_at)," +
	" last_owner = IF(OK AND VALUES(max_attempts) & 16, VALUES(last_owner), last_owner)," +
	" attempt = IF(OK AND VALUES(max_attempts) & 1, VALUES(attempt), attempt)," +
	" run_at = IF(OK AND VALUES(max_attempts) & 2, VALUES(run_at), run_at)," +
	" last_error = IF(OK AND VALUES(max_attempts) & 4, VALUES(last_error), last_error)," +
	" updated_at = IF(OK, VALUES(updated_at), updated_at)," +
	" live_key = IF(OK AND VALUES(state) > " + liveMaxCode + ", " + keyAtEnd + ", live_key)," +
	" version = IF(OK, version + 1, version)," +
	" state = IF(OK, VALUES(state), state)," +
	" fence = IF(fence = VALUES(version)GUARD AND (state <= " + liveMaxCode + " OR state = VALUES(state)), VALUES(fence), fence)"

// ownerGuard is the guard of the updates of an optimistic plan by owner (0: none): the
// row must be the owner's or the pool's. A row of another owner may be in that owner's
// start set (see doc.go, "Starts"), which only the locking plan reads: the guard sends
// its changes there. The locking plan needs no guard.
func ownerGuard(owner uint64) string {
	if owner == 0 {
		return " AND owner = 0"
	}
	return newQuery(32).raw(" AND owner IN (0,").uint(owner).raw(")").String()
}

// freeKeys returns the UPDATEs that free the keys of ended rows whose windows are
// over (see keyPlan.frees), on locked rows.
func (s *Store) freeKeys(ids []string) []statement {
	var stmts []statement
	for chunk := range slices.Chunk(ids, updateRowsMax) {
		q := newQuery(128 + len(chunk)*(2*store.StoredIDMax+4)).raw("UPDATE ").raw(s.table).
			raw(" SET live_key = NULL, version = version + 1 WHERE id IN ").hexList(chunk).raw(" AND state > " + liveMaxCode)
		stmts = append(stmts, statement{sql: q.String(), want: -1})
	}
	return stmts
}

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
			size += 2*len(r.ins.Payload) + 2*len(r.result) + 2*len(r.hist) + 256 + headersEst(r.ins.Headers)
		}
		q := newQuery(min(size, budget) + 512)
		// result and history only when a row of the statement has one (a task
		// inserted and ended in one batch): the others leave them NULL.
		extra := false
		for _, r := range ins[:min(len(ins), insertRowsMax)] {
			extra = extra || r.setResult || r.hist != "" || r.startedAt != 0
		}
		q.raw("INSERT INTO ").raw(s.table).raw(" (" + columns + ", live_key")
		if extra {
			q.raw(", result, history, started_at, last_owner")
		}
		if owner != 0 {
			q.raw(", owner")
		}
		q.raw(") VALUES ")
		n := 0
		for n < len(ins) && n < insertRowsMax && (n == 0 || q.Len()+2*len(ins[n].ins.Payload)+2*len(ins[n].result)+2*len(ins[n].hist)+headersEst(ins[n].ins.Headers)+2048 < budget) {
			t := ins[n].ins
			if n > 0 {
				q.raw(",")
			}
			q.raw("(").hexString(t.ID).raw(",").hexString(t.Kind).raw(",").hexBytes(t.Payload).raw(",").
				uint(uint64(priorityCode(t.Priority))).raw(",").int(millis(t.RunAt)).raw(",").
				int(int64(t.Timeout)).raw(",").int(int64(t.MaxAttempts)).raw(",").int(int64(t.Attempt)).raw(",").
				uint(t.Fence).raw(",").hexString(t.UniqueKey).raw(",").uint(uint64(stateCode(t.State))).raw(",").
				hexString(t.LastError).raw(",").int(millis(t.CreatedAt)).raw(",").int(millis(t.UpdatedAt)).raw(",").
				hexString(t.Group).raw(",").hexString(t.Key).raw(",").int(untilMillis(t.UniqueUntil)).raw(",").
				int(t.UniqueFor.Milliseconds()).raw(",")
			if len(t.Headers) > 0 {
				q.hexBytes(encodeHeaders(t.Headers)).raw(",")
			} else {
				q.raw("NULL,")
			}
			if ins[n].holds {
				q.hexString(t.UniqueKey)
			} else {
				q.raw("NULL")
			}
			if r := ins[n]; extra {
				q.raw(",")
				if r.setResult {
					q.hexBytes(r.result)
				} else {
					q.raw("NULL")
				}
				q.raw(",")
				if r.hist != "" {
					q.hexString(lastRecords(r.hist[1:], s.opts.AttemptsKept))
				} else {
					q.raw("NULL")
				}
				q.raw(",").int(r.startedAt).raw(",").hexString(r.lastOwner)
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

// headersEst bounds the length of h in a statement: encoded (encodeHeaders), then
// hex-encoded.
func headersEst(h map[string]string) int {
	n := 0
	for k, v := range h {
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	return 2*n + 8
}
