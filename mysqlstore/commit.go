package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storekit"
)

// Statement sizes, in rows; statementBudget bounds them in bytes too.
const (
	insertRowsMax = 1000
	updateRowsMax = 1000
	selectIDsMax  = 1000
)

// Commit implements [kernel.Store.Commit]. It blocks until the transaction is durable (as
// durable as the server's innodb_flush_log_at_trx_commit makes it) and is safe for
// concurrent use. A batch runs optimistically first (no reads, fences checked by the
// UPDATE itself); when that does not hold, it is rolled back and planned again from rows
// locked with SELECT … FOR UPDATE.
func (s *Store) Commit(ctx context.Context, changes []kernel.Change) ([]error, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	if err := s.checkOpen("commit"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, s.wrap("commit", err)
	}
	if s.packet.Load() == 0 {
		if err := s.checkPacket(ctx); err != nil {
			return nil, err
		}
	}
	b := s.newBatch(changes)
	if len(b.ids) == 0 { // every change refused before reaching the server
		return b.pre, nil
	}
	optimistic := true
	var results []error
	err := s.retry(ctx, "commit", func() error {
		if optimistic {
			optimistic = false // whatever happens, a retry plans from locked rows
			res, err := s.commitOnce(ctx, b, true)
			if err == nil {
				results = res
				return nil
			}
			if !errors.Is(err, errReplan) {
				return err
			}
		}
		res, err := s.commitOnce(ctx, b, false)
		if err == nil {
			results = res
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// batch is a validated group commit.
type batch struct {
	changes []kernel.Change
	pre     []error  // refusals found without the server (invalid, payload too large)
	ids     []string // distinct IDs of the changes not refused, in order of appearance
	first   []int    // first[k]: index of the first change not refused of ids[k]
	keys    []string // distinct unique keys of the live inserts not refused
	next    []int    // next change of the same task, or -1
	// insertsFirst: the optimistic plan runs the INSERT before the updates. True when a
	// live insert with a unique key comes before a change that ends a task not inserted
	// by the batch: that change may free the key, but only after the insert, which must
	// then meet the key still held (and fail, so that the batch is planned again from the
	// locked rows). Otherwise the updates run first, so that an insert after a change that
	// freed its key finds it free.
	insertsFirst bool
}

func (s *Store) newBatch(changes []kernel.Change) *batch {
	b := &batch{changes: changes, pre: make([]error, len(changes))}
	for i := range changes {
		c := &changes[i]
		if err := c.Validate(); err != nil {
			b.pre[i] = fmt.Errorf("mysqlstore: %w", err)
		} else if c.Op == kernel.OpInsert && len(c.Task.Payload) > s.opts.MaxPayload {
			b.pre[i] = fmt.Errorf("mysqlstore: insert %q: payload of %d bytes, Options.MaxPayload is %d: %w",
				c.Task.ID, len(c.Task.Payload), s.opts.MaxPayload, kernel.ErrPayloadTooLarge)
		}
	}
	storekit.RefuseBeforeInsert(changes, b.pre)
	seenID := make(map[string]bool, len(changes))
	inserted := make(map[string]bool)
	seenKey := make(map[string]bool)
	keyedInsert := false
	for i := range changes {
		if b.pre[i] != nil {
			continue
		}
		t := &changes[i].Task
		if !seenID[t.ID] {
			seenID[t.ID] = true
			b.ids = append(b.ids, t.ID)
			b.first = append(b.first, i)
		}
		if changes[i].Op == kernel.OpInsert {
			inserted[t.ID] = true
			if t.UniqueKey != "" && t.State.Live() {
				keyedInsert = true
				if !seenKey[t.UniqueKey] {
					seenKey[t.UniqueKey] = true
					b.keys = append(b.keys, t.UniqueKey)
				}
			}
		} else if keyedInsert && !inserted[t.ID] && !changes[i].ResultState().Live() {
			b.insertsFirst = true
		}
	}
	b.next = storekit.NextOfTask(changes)
	return b
}

// row is one task of a batch, as the plan simulates it.
type row struct {
	id       string
	exists   bool   // stored before the batch (read, or assumed when optimistic)
	preFence uint64 // its fence then: the UPDATE checks it

	present  bool // stored, or inserted by the batch so far
	fence    uint64
	state    kernel.State
	attempt  int    // -1: unknown (optimistic)
	key      string // unique key, when keyKnown
	keyKnown bool

	ins *kernel.StoredTask // the row to insert, when the batch creates it

	dirty                bool // an existing row the batch changes
	setAttempt, setRunAt bool
	setLastError         bool
	runAt                time.Time
	lastError            string
	updatedAt            time.Time
}

// commitOnce runs the batch in one transaction. Optimistic: rows are assumed as the batch
// expects them (inserted IDs new, others live at the first change's fence), and errReplan
// says they were not. Otherwise the rows are read and locked first.
func (s *Store) commitOnce(ctx context.Context, b *batch, optimistic bool) ([]error, error) {
	rows := make(map[string]*row, len(b.ids))
	holders := make(map[string]string) // unique key → ID of the live task holding it
	if optimistic {
		for k, id := range b.ids {
			r := &row{id: id, attempt: -1}
			if c := &b.changes[b.first[k]]; c.Op != kernel.OpInsert {
				// Assumed stored and live at the fence the batch expects; the UPDATE checks it.
				r.exists, r.present, r.preFence, r.fence, r.state = true, true, c.Fence, c.Fence, kernel.Queued
			}
			rows[id] = r
		}
		results := plan(b, rows, holders)
		for i, r := range results {
			if r != nil && b.pre[i] == nil {
				return nil, errReplan // let the locked rows decide the refusals
			}
		}
		checks := s.absentChecks(rows, b.ids)
		stmts := s.statements(rows, b.ids, b.insertsFirst)
		switch {
		case len(stmts) == 0:
			// Nothing to write (every task of the batch is dropped): the checks alone.
			for _, st := range checks {
				if err := s.run(ctx, s.db, st, true); err != nil {
					return nil, err
				}
			}
			return results, nil
		case len(stmts) == 1 && stmts[0].want <= 1 && len(checks) == 0:
			// One INSERT, or one UPDATE of one row, applies all or nothing by itself: no
			// BEGIN and COMMIT round trips.
			return results, s.run(ctx, s.db, stmts[0], true)
		}
		stmts = append(checks, stmts...)
		return results, s.inTx(ctx, nil, func(tx *sql.Tx) error {
			for _, st := range stmts {
				if err := s.run(ctx, tx, st, true); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var results []error
	// Read committed: no gap locks on the IDs and keys read but absent, so fewer deadlocks
	// between concurrent commits; a racing insert shows up as a duplicate entry instead.
	err := s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		if err := s.lockRows(ctx, tx, b, rows, holders); err != nil {
			return err
		}
		results = plan(b, rows, holders)
		for _, st := range s.statements(rows, b.ids, false) {
			if err := s.run(ctx, tx, st, false); err != nil {
				return err
			}
		}
		return nil
	})
	return results, err
}

// inTx runs f in a transaction and commits it, or rolls it back when f fails.
func (s *Store) inTx(ctx context.Context, opts *sql.TxOptions, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback() // err is what matters; a broken connection is dropped anyway
		return err
	}
	return tx.Commit()
}

// statement is one write of a batch, or a check that some rows are not stored.
type statement struct {
	sql string
	// want is what RowsAffected must report: 1 for the UPDATE of one row, 2 for each row
	// of an INSERT … ON DUPLICATE KEY UPDATE (a row changed by it counts 2), -1 for an
	// INSERT of new rows.
	want int64
	// absent: sql is a SELECT that must find no row (see absentChecks).
	absent bool
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// run executes st. An update that changes fewer rows than it names, or an INSERT that
// meets a duplicate entry (an ID stored already, a unique key held), means the plan was
// wrong: errReplan.
func (s *Store) run(ctx context.Context, db execer, st statement, optimistic bool) error {
	if st.absent {
		found := false
		err := scanAll(ctx, db, st.sql, func(scanner) error { found = true; return nil })
		if err == nil && found {
			err = errReplan // a task the plan took for new is stored: it must be changed
		}
		return err
	}
	res, err := db.ExecContext(ctx, st.sql)
	if err != nil {
		var me *mysql.MySQLError
		if st.want < 0 && errors.As(err, &me) && me.Number == erDupEntry {
			return fmt.Errorf("%w: %w", errReplan, err)
		}
		return err
	}
	if st.want < 0 {
		return nil
	}
	got, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if got != st.want {
		if optimistic {
			return errReplan // a fence moved, a task ended or is unknown
		}
		// The rows are locked: only a writer ignoring the locks could do this.
		return fmt.Errorf("%w: update reported %d rows affected, want %d for locked rows", errReplan, got, st.want)
	}
	return nil
}

// statements returns the writes of the planned rows: updates of stored rows first (they
// may free unique keys that the inserts take), then INSERTs; or the other way round when
// insertsFirst (see batch.insertsFirst).
func (s *Store) statements(rows map[string]*row, ids []string, insertsFirst bool) []statement {
	if insertsFirst {
		return append(s.inserts(rows, ids), s.updates(rows, ids)...)
	}
	return append(s.updates(rows, ids), s.inserts(rows, ids)...)
}

// lockRows reads and locks the batch's rows and the holders of its inserts' unique keys.
func (s *Store) lockRows(ctx context.Context, tx *sql.Tx, b *batch, rows map[string]*row, holders map[string]string) error {
	ids := slices.Sorted(slices.Values(b.ids)) // one lock order for every committer
	for chunk := range slices.Chunk(ids, selectIDsMax) {
		q := newQuery(64 + len(chunk)*(2*kernel.StoredIDMax+4))
		q.raw("SELECT id, fence, state, attempt, unique_key FROM ").raw(s.table).raw(" WHERE id IN (")
		for i, id := range chunk {
			if i > 0 {
				q.raw(",")
			}
			q.hexString(id)
		}
		q.raw(") FOR UPDATE")
		err := scanAll(ctx, tx, q.String(), func(sc scanner) error {
			r := &row{exists: true, present: true, keyKnown: true}
			var code uint8
			if err := sc.Scan(&r.id, &r.fence, &code, &r.attempt, &r.key); err != nil {
				return err
			}
			st, err := decodeState(code)
			if err != nil {
				return err
			}
			r.state, r.preFence = st, r.fence
			rows[r.id] = r
			if r.key != "" && st.Live() {
				holders[r.key] = r.id
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, id := range b.ids {
		if rows[id] == nil {
			rows[id] = &row{id: id, attempt: -1}
		}
	}
	keys := slices.Sorted(slices.Values(b.keys))
	for chunk := range slices.Chunk(keys, selectIDsMax) {
		q := newQuery(64 + len(chunk)*(2*kernel.UniqueKeyMax+4))
		q.raw("SELECT id, live_key FROM ").raw(s.table).raw(" WHERE live_key IN (")
		for i, k := range chunk {
			if i > 0 {
				q.raw(",")
			}
			q.hexString(k)
		}
		q.raw(") FOR UPDATE")
		err := scanAll(ctx, tx, q.String(), func(sc scanner) error {
			var id, key string
			if err := sc.Scan(&id, &key); err != nil {
				return err
			}
			holders[key] = id
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// plan applies the batch to the rows as the kernel.Store contract says, in order, and
// returns each change's outcome, as storekit.MemoryStore does.
func plan(b *batch, rows map[string]*row, holders map[string]string) []error {
	results := slices.Clone(b.pre)
	for i := range b.changes {
		if results[i] != nil {
			continue
		}
		c := &b.changes[i]
		r := rows[c.Task.ID]
		if c.Op == kernel.OpInsert {
			results[i] = r.insert(c, holders)
			continue
		}
		switch {
		case !r.present:
			results[i] = fmt.Errorf("mysqlstore: %s %q: %w", c.Op, c.Task.ID, kernel.ErrUnknownTask)
		case r.state.Live() && r.fence == c.Fence:
			r.apply(c, holders)
		case storekit.AlreadyApplied(b.changes, results, b.next, i, r.fence, r.state, r.attempt):
			// The batch is a retry of one that landed: report what it reported then.
		default:
			results[i] = fmt.Errorf("mysqlstore: %s %q: fence %d, stored %d (%s): %w",
				c.Op, c.Task.ID, c.Fence, r.fence, r.state, kernel.ErrStaleFence)
		}
	}
	return results
}

func (r *row) insert(c *kernel.Change, holders map[string]string) error {
	if r.present {
		return nil // our own row: the retry of a commit whose answer was lost
	}
	t := c.Task // Payload is borrowed: Commit does not return before it is written
	if t.UniqueKey != "" && t.State.Live() {
		if h, ok := holders[t.UniqueKey]; ok && h != t.ID {
			return fmt.Errorf("mysqlstore: insert %q: key %q held by %q: %w", t.ID, t.UniqueKey, h, kernel.ErrDuplicateKey)
		}
		holders[t.UniqueKey] = t.ID
	}
	if t.Priority == kernel.PriorityDefault {
		t.Priority = kernel.Normal
	}
	t.LastError = storekit.TruncateLastError(t.LastError)
	r.ins = &t
	r.present, r.fence, r.state, r.attempt, r.key, r.keyKnown = true, t.Fence, t.State, t.Attempt, t.UniqueKey, true
	return nil
}

func (r *row) apply(c *kernel.Change, holders map[string]string) {
	switch c.Op {
	case kernel.OpStart:
		r.attempt, r.fence, r.setAttempt = c.Task.Attempt, c.Task.Fence, true
	case kernel.OpRetry:
		r.runAt, r.setRunAt = c.Task.RunAt, true
		r.lastError, r.setLastError = storekit.TruncateLastError(c.Task.LastError), true
	case kernel.OpFail:
		r.lastError, r.setLastError = storekit.TruncateLastError(c.Task.LastError), true
	case kernel.OpCancel:
		if c.Task.LastError != "" {
			r.lastError, r.setLastError = storekit.TruncateLastError(c.Task.LastError), true
		}
	}
	r.state, r.updatedAt = c.ResultState(), c.Task.UpdatedAt
	if t := r.ins; t != nil { // a row of this batch: change the row to insert
		t.Attempt, t.Fence, t.State, t.UpdatedAt = r.attempt, r.fence, r.state, r.updatedAt
		if r.setRunAt {
			t.RunAt = r.runAt
		}
		if r.setLastError {
			t.LastError = r.lastError
		}
	} else {
		r.dirty = true
	}
	if !r.state.Live() && r.keyKnown && r.key != "" && holders[r.key] == r.id {
		delete(holders, r.key)
	}
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
		if r := rows[id]; r.exists && r.dirty {
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
func (s *Store) dropped(t *kernel.StoredTask) bool {
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

// inserts returns the multi-row INSERTs of the batch's new rows.
func (s *Store) inserts(rows map[string]*row, ids []string) []statement {
	var stmts []statement
	var ins []*kernel.StoredTask
	for _, id := range ids {
		if t := rows[id].ins; t != nil && !s.dropped(t) {
			ins = append(ins, t)
		}
	}
	slices.SortFunc(ins, func(a, b *kernel.StoredTask) int { return compareStrings(a.ID, b.ID) })
	budget := s.statementBudget()
	for len(ins) > 0 {
		size := 0
		for _, t := range ins[:min(len(ins), insertRowsMax)] {
			size += 2*len(t.Payload) + 256
		}
		q := newQuery(min(size, budget) + 512)
		q.raw("INSERT INTO ").raw(s.table).raw(" (" + columns + ", live_key) VALUES ")
		n := 0
		for n < len(ins) && n < insertRowsMax && (n == 0 || q.Len()+2*len(ins[n].Payload)+2048 < budget) {
			t := ins[n]
			if n > 0 {
				q.raw(",")
			}
			q.raw("(").hexString(t.ID).raw(",").hexString(t.Kind).raw(",").hexBytes(t.Payload).raw(",").
				uint(uint64(priorityCode(t.Priority))).raw(",").int(millis(t.RunAt)).raw(",").
				int(int64(t.Timeout)).raw(",").int(int64(t.MaxAttempts)).raw(",").int(int64(t.Attempt)).raw(",").
				uint(t.Fence).raw(",").hexString(t.UniqueKey).raw(",").uint(uint64(stateCode(t.State))).raw(",").
				hexString(t.LastError).raw(",").int(millis(t.CreatedAt)).raw(",").int(millis(t.UpdatedAt)).raw(",")
			if t.UniqueKey != "" && t.State.Live() {
				q.hexString(t.UniqueKey)
			} else {
				q.raw("NULL")
			}
			q.raw(")")
			n++
		}
		stmts = append(stmts, statement{sql: q.String(), want: -1})
		ins = ins[n:]
	}
	return stmts
}
