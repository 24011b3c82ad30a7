package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// Statement sizes, in rows; statementBudget bounds them in bytes too.
const (
	insertRowsMax = 1000
	updateRowsMax = 1000
	selectIDsMax  = 1000
)

// Commit implements [store.Store.Commit]. It blocks until the transaction is durable (as
// durable as the server's innodb_flush_log_at_trx_commit makes it) and is safe for
// concurrent use. A batch runs optimistically first (no reads, fences checked by the
// UPDATE itself); when that does not hold, it is rolled back and planned again from rows
// locked with SELECT … FOR UPDATE.
func (s *Store) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	return s.commit(ctx, nil, changes)
}

// commit applies changes for owner o, or for no owner when o is nil. With an owner, every
// transaction first renews o's lease (see renew), and a batch of no changes (or of none
// that reaches the server) is that renewal alone.
func (s *Store) commit(ctx context.Context, o *store.Owner, changes []store.Change) ([]error, error) {
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
	b.owned = o != nil
	if o != nil {
		b.ownerName = o.Name
	}
	if len(b.ids) == 0 { // every change refused before reaching the server
		if o != nil {
			if err := s.retryAs(ctx, "commit", o, func() error { return s.renew(ctx, s.db, o) }); err != nil {
				return nil, err
			}
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return b.pre, nil
	}
	var starts *ownerStarts
	if o != nil && b.changesStored {
		// The batch changes stored tasks: its starts of o's tasks go to o's start set,
		// and its other changes read it (see doc.go, "Starts").
		starts = s.startsOf(o.Epoch)
		select {
		case starts.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, s.wrap("commit", ctx.Err())
		}
		defer func() { <-starts.sem }()
		b.toSet = true
	}
	optimistic := true
	var results []error
	err := s.retryAs(ctx, "commit", o, func() error {
		if optimistic {
			optimistic = false // whatever happens, a retry plans from locked rows
			res, err := s.commitOnce(ctx, b, true, o, starts)
			if err == nil {
				results = res
				return nil
			}
			if !errors.Is(err, errReplan) {
				return err
			}
		}
		res, err := s.commitOnce(ctx, b, false, o, starts)
		if err == nil {
			results = res
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			s.forgetStarts(o.Epoch)
		}
		return nil, err
	}
	return results, nil
}

// batch is a validated group commit.
type batch struct {
	changes []store.Change
	pre     []error  // refusals found without the server (invalid, payload too large)
	ids     []string // distinct IDs of the changes not refused, in order of appearance
	first   []int    // first[k]: index of the first change not refused of ids[k]
	keys    []string // distinct unique keys of the live inserts not refused
	next    []int    // next change of the same task, or -1
	owned   bool     // committed by an owner (CommitAs): its inserts not of Change.Pool are the owner's
	// changesStored: some change not refused is not an insert.
	changesStored bool
	// adopts: the IDs of the changes not refused with Change.Adopt. A plan from locked
	// rows locks theirs with SKIP LOCKED (lockRows): it never waits for a pool row
	// another owner's claim holds, and refuses the adopt of such a row.
	adopts map[string]bool
	// toSet: the starts of the committing owner's stored tasks go to its start set.
	toSet bool
	// noHistory: the store keeps no attempt records (Options.AttemptsKept < 0).
	noHistory bool
	// ownerName: the committing owner's name ("" without one), the Owner of the attempt
	// records a row keeps implicitly (started_at, history.go).
	ownerName string
	// insertsFirst: the optimistic plan runs the INSERT before the updates. True when a
	// live insert with a unique key comes before a change that ends a task not inserted
	// by the batch: that change may free the key, but only after the insert, which must
	// then meet the key still held (and fail, so that the batch is planned again from the
	// locked rows). Otherwise the updates run first, so that an insert after a change that
	// freed its key finds it free.
	insertsFirst bool
}

func (s *Store) newBatch(changes []store.Change) *batch {
	b := &batch{changes: changes, pre: make([]error, len(changes)), noHistory: s.opts.AttemptsKept < 0}
	for i := range changes {
		c := &changes[i]
		if err := c.Validate(); err != nil {
			b.pre[i] = fmt.Errorf("mysqlstore: %w", err)
		} else if c.Op == store.OpInsert && len(c.Task.Payload) > s.opts.MaxPayload {
			b.pre[i] = fmt.Errorf("mysqlstore: insert %q: payload of %d bytes, Options.MaxPayload is %d: %w",
				c.Task.ID, len(c.Task.Payload), s.opts.MaxPayload, store.ErrPayloadTooLarge)
		} else if len(c.Task.Result) > s.opts.MaxResult {
			b.pre[i] = fmt.Errorf("mysqlstore: %s %q: result of %d bytes, Options.MaxResult is %d: %w",
				c.Op, c.Task.ID, len(c.Task.Result), s.opts.MaxResult, store.ErrPayloadTooLarge)
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
		if changes[i].Op != store.OpInsert {
			b.changesStored = true
		}
		if changes[i].Adopt {
			if b.adopts == nil {
				b.adopts = make(map[string]bool)
			}
			b.adopts[t.ID] = true
		}
		if changes[i].Op == store.OpInsert {
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
	state    store.State
	attempt  int    // -1: unknown (optimistic)
	key      string // unique key, when keyKnown
	keyKnown bool
	// until and window: the stored row's key window (unique_until, unique_for_ms), when
	// keyKnown.
	until  time.Time
	window time.Duration
	// holds: the row inserted by the batch holds its key (live_key is written).
	holds bool

	ins  *store.StoredTask // the row to insert, when the batch creates it
	pool bool              // ins goes to the pool (Change.Pool): owner 0 whoever commits
	// owned: the row has an owner (read, or inserted for the committing owner); an
	// optimistic plan assumes a row it adopts has none, which the UPDATE checks.
	owned bool
	// adopt: the batch adopts the stored row (Change.Adopt): its UPDATE takes it for
	// the committing owner, only from the pool (see adopts).
	adopt bool
	// busy: the row exists and another transaction holds its lock (an adopted row a
	// claim took, see batch.adopts): every change of it is refused.
	busy bool
	// mine: the stored row is the committing owner's (read, or assumed when
	// optimistic, which the renewal then checks for the rows the batch starts).
	mine bool
	by   uint64 // the stored row's owner (read)
	// inSet: the row is in its owner's start set, which the fields above show
	// (Running, the set's attempt and fence); preFence is the stored row's fence.
	inSet bool
	// started: the batch starts the row and changes nothing else of it: the start
	// goes to the owner's start set, not to the row.
	started bool

	dirty                bool // an existing row the batch changes
	setAttempt, setRunAt bool
	setLastError         bool
	runAt                time.Time
	lastError            string
	updatedAt            time.Time

	hist string // attempt records the batch appends to the row's history (history.go)
	// startedAt: the started_at the batch writes (setStartedAt): the Start of the
	// record the row keeps implicitly, 0 for none (history.go).
	startedAt    int64
	setStartedAt bool
	lastOwner    string // the last_owner it writes with started_at: the batch's owner name
	setResult    bool
	result       []byte
}

// commitOnce runs the batch in one transaction. Optimistic: rows are assumed as the batch
// expects them (inserted IDs new, others live at the first change's fence, or as o's
// start set records them), and errReplan says they were not. Otherwise the rows are
// read and locked first. With an owner o, the transaction renews o's lease before it
// touches a task row (the lock order of owner rows before task rows), and inserts write
// o.Epoch as the tasks' owner (0, the pool, for those of a Change with Pool). With
// starts (b.toSet), the starts of o's stored tasks are written to o's start set, which
// the renewal (optimistic) or an UPDATE of the locked owner row writes.
func (s *Store) commitOnce(ctx context.Context, b *batch, optimistic bool, o *store.Owner, starts *ownerStarts) ([]error, error) {
	var owner uint64
	if o != nil {
		owner = o.Epoch
	}
	rows := make(map[string]*row, len(b.ids))
	keys := &keyPlan{holders: make(map[string]keyHolder)}
	if optimistic {
		var set *startSet
		if starts != nil {
			set = starts.set
			if set == nil {
				var err error
				if set, err = s.loadSet(ctx, s.db, owner); err != nil {
					return nil, err
				}
			}
			starts.set = nil // unknown until this transaction commits
		}
		for k, id := range b.ids {
			r := &row{id: id, attempt: -1}
			if c := &b.changes[b.first[k]]; c.Op != store.OpInsert {
				// Assumed stored and live at the fence the batch expects; the UPDATE checks it.
				r.exists, r.present, r.preFence, r.fence, r.state = true, true, c.Fence, c.Fence, store.Queued
				r.mine = b.toSet
				if e, ok := set.get(id); ok {
					r.inSet, r.preFence, r.fence, r.state, r.attempt, r.updatedAt = true, e.pre, e.fence, store.Running, e.attempt, fromMillis(e.updated)
				}
			}
			rows[id] = r
		}
		results := plan(b, rows, keys)
		for i, r := range results {
			if r != nil && b.pre[i] == nil {
				return nil, errReplan // let the locked rows decide the refusals
			}
		}
		if len(keys.frees) > 0 {
			return nil, errReplan // keys of stored rows: the locked rows decide
		}
		checks := s.absentChecks(rows, b.ids)
		stmts := s.statements(rows, b.ids, b.insertsFirst, owner, ownerGuard(owner))
		var renewal string
		if set != nil {
			fresh := toSet(set, rows, b.ids)
			renewal = s.renewSetQuery(o, set, fresh)
			stmts = append(stmts, s.pageWrites(owner, set)...)
		}
		switch {
		case o != nil:
			// The renewal and the writes in one transaction, below.
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
			return results, maybeApplied(s.run(ctx, s.db, stmts[0], true))
		}
		stmts = append(checks, stmts...)
		var err error
		if s.multiFits(o, append(stmts[:len(stmts):len(stmts)], statement{sql: renewal})) {
			err = s.multiTxWith(ctx, o, renewal, stmts)
		} else {
			err = s.inTx(ctx, nil, func(tx *sql.Tx) error {
				if renewal != "" {
					if err := s.renewWith(ctx, tx, o, renewal); err != nil {
						return err
					}
				} else if o != nil {
					if err := s.renew(ctx, tx, o); err != nil {
						return err
					}
				}
				for _, st := range stmts {
					if err := s.run(ctx, tx, st, true); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err == nil && set != nil {
			set.written(set.next())
			starts.set = set
		}
		return results, err
	}
	var results []error
	var set *startSet
	// Read committed: no gap locks on the IDs and keys read but absent, so fewer deadlocks
	// between concurrent commits; a racing insert shows up as a duplicate entry instead.
	err := s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		set = nil
		if o != nil {
			if err := s.renew(ctx, tx, o); err != nil {
				return err
			}
		}
		if starts != nil {
			// o's row is locked: the set read is the one to write over.
			var err error
			if set, err = s.loadSet(ctx, tx, owner); err != nil {
				return err
			}
		}
		keys = &keyPlan{holders: make(map[string]keyHolder)}
		if err := s.lockRows(ctx, tx, b, rows, keys.holders, owner, set); err != nil {
			return err
		}
		results = plan(b, rows, keys)
		stmts := s.statements(rows, b.ids, false, owner, "")
		if len(keys.frees) > 0 {
			// After the updates (which keep the keys of rows they end with a window),
			// before the inserts that take the keys.
			n := len(stmts) - len(s.inserts(rows, b.ids, owner))
			stmts = slices.Insert(stmts, n, s.freeKeys(keys.frees)...)
		}
		if set != nil {
			toSet(set, rows, b.ids)
			stmts = append(stmts, s.setWrites(owner, set)...)
		}
		for _, st := range stmts {
			if err := s.run(ctx, tx, st, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && set != nil {
		set.written(set.next())
		starts.set = set
	}
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
	return commitTx(ctx, tx)
}

// commitTx commits tx. When the COMMIT may have been sent and its answer was lost, the
// error is marked with errMaybeApplied.
func commitTx(ctx context.Context, tx *sql.Tx) error {
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback() // COMMIT not sent: nothing applies
		return err
	}
	return maybeApplied(tx.Commit())
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
	// where: sql ends in a WHERE whose conditions are joined by AND only, to which a
	// further condition may be appended (see multiQuery).
	where bool
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

// plan applies the batch to the rows as the store.Store contract says, in order, and
// returns each change's outcome, as storekit.MemoryStore does.
func plan(b *batch, rows map[string]*row, keys *keyPlan) []error {
	results := slices.Clone(b.pre)
	for i := range b.changes {
		if results[i] != nil {
			continue
		}
		c := &b.changes[i]
		r := rows[c.Task.ID]
		if c.Op == store.OpInsert {
			results[i] = r.insert(c, rows, keys, !b.owned)
			continue
		}
		switch {
		case r.busy:
			results[i] = fmt.Errorf("mysqlstore: %s %q: another owner holds the row (a claim takes it): %w", c.Op, c.Task.ID, store.ErrStaleFence)
		case !r.present:
			results[i] = fmt.Errorf("mysqlstore: %s %q: %w", c.Op, c.Task.ID, store.ErrUnknownTask)
		case c.Adopt && r.fence == c.Fence && !r.inPool():
			results[i] = fmt.Errorf("mysqlstore: adopt %q: not in the pool (%s): %w", c.Task.ID, r.state, store.ErrStaleFence)
		case r.state.Live() && r.fence == c.Fence:
			if c.Adopt {
				r.adopt, r.owned, r.pool = r.ins == nil, true, false
			}
			r.apply(c, keys.holders, b)
		case storekit.AlreadyApplied(b.changes, results, b.next, i, r.fence, r.state, r.attempt):
			// The batch is a retry of one that landed: report what it reported then.
		default:
			results[i] = fmt.Errorf("mysqlstore: %s %q: fence %d, stored %d (%s): %w",
				c.Op, c.Task.ID, c.Fence, r.fence, r.state, store.ErrStaleFence)
		}
	}
	return results
}

// inPool reports whether the row is in the pool as the plan knows it: waiting, with no
// owner (an inserted row: one of Change.Pool; a committing owner would hold the others).
func (r *row) inPool() bool {
	waiting := r.state == store.Queued || r.state == store.Delayed || r.state == store.Retrying
	if r.ins != nil {
		return waiting && r.pool
	}
	return waiting && !r.owned
}

func (r *row) insert(c *store.Change, rows map[string]*row, keys *keyPlan, noOwner bool) error {
	if r.present {
		return nil // our own row: the retry of a commit whose answer was lost
	}
	t := c.Task // Payload is borrowed: Commit does not return before it is written
	if t.UniqueKey != "" && t.State.Live() {
		if h, ok := keys.holders[t.UniqueKey]; ok && h.id != t.ID {
			if !h.ended || h.until.After(t.UpdatedAt.Truncate(time.Millisecond)) {
				return fmt.Errorf("mysqlstore: %w", &store.DuplicateKeyError{ID: t.ID, Key: t.UniqueKey, Holder: h.id})
			}
			// The ended holder's window is over: it gives the key up.
			if hr := rows[h.id]; hr != nil && hr.ins != nil {
				hr.holds = false
			} else {
				keys.frees = append(keys.frees, h.id)
			}
		}
		keys.holders[t.UniqueKey] = keyHolder{id: t.ID}
		r.holds = true
	}
	if t.Priority == store.PriorityDefault {
		t.Priority = store.Normal
	}
	t.LastError = storekit.TruncateLastError(t.LastError)
	r.ins, r.pool = &t, c.Pool || noOwner
	r.present, r.fence, r.state, r.attempt, r.key, r.keyKnown = true, t.Fence, t.State, t.Attempt, t.UniqueKey, true
	return nil
}

// apply applies c to the row. With toSet, a start of the owner's stored row that the
// batch changed no other way goes to the owner's start set (started) instead of the
// row; any other change of a row in the set, or started, writes the row whole (its
// attempt and fence from the set too).
func (r *row) apply(c *store.Change, holders map[string]keyHolder, b *batch) {
	toSet := b.toSet
	switch c.Op {
	case store.OpStart:
		r.attempt, r.fence, r.setAttempt = c.Task.Attempt, c.Task.Fence, true
	case store.OpRetry:
		r.runAt, r.setRunAt = c.Task.RunAt, true
		r.lastError, r.setLastError = storekit.TruncateLastError(c.Task.LastError), true
	case store.OpFail:
		r.lastError, r.setLastError = storekit.TruncateLastError(c.Task.LastError), true
	case store.OpCancel:
		if c.Task.LastError != "" {
			r.lastError, r.setLastError = storekit.TruncateLastError(c.Task.LastError), true
		}
	}
	if len(c.Task.Result) > 0 { // OpSucceed, OpFail (Validate): the column is NULL until then
		r.result, r.setResult = c.Task.Result, true
	}
	r.state, r.updatedAt = c.ResultState(), c.Task.UpdatedAt
	if c.Op != store.OpStart {
		r.startedAt, r.setStartedAt, r.lastOwner = 0, true, b.ownerName // the attempt it ends, if any, is the row's last
	}
	if c.Attempt.Number != 0 && !b.noHistory {
		if r.implicit(c, b.ownerName) {
			r.startedAt = millis(c.Attempt.Start)
		} else {
			r.hist += encodeAttempt(c.Attempt)
		}
	}
	switch t := r.ins; {
	case t != nil: // a row of this batch: change the row to insert
		t.Attempt, t.Fence, t.State, t.UpdatedAt = r.attempt, r.fence, r.state, r.updatedAt
		if r.setRunAt {
			t.RunAt = r.runAt
		}
		if r.setLastError {
			t.LastError = r.lastError
		}
	case toSet && c.Op == store.OpStart && !c.Adopt && !r.adopt && r.mine && !r.dirty && r.hist == "":
		r.started = true
	default:
		r.dirty = true
		if r.inSet {
			r.setAttempt = true // the row holds the attempt before the set's
		}
	}
	if h, ok := holders[r.key]; ok && !r.state.Live() && r.keyKnown && r.key != "" && h.id == r.id {
		w := store.StoredTask{UniqueKey: r.key, UpdatedAt: r.updatedAt.Truncate(time.Millisecond), UniqueUntil: r.until, UniqueFor: r.window}
		if t := r.ins; t != nil {
			w.UniqueUntil, w.UniqueFor = t.UniqueUntil, t.UniqueFor
		}
		if end := w.KeyHeldUntil(); !end.IsZero() {
			holders[r.key] = keyHolder{id: r.id, ended: true, until: end} // held for its window
		} else {
			delete(holders, r.key)
			r.holds = false
		}
	}
}

// keyHolder is the task that holds a unique key, as the plan knows it.
type keyHolder struct {
	id    string
	ended bool      // the task ended and holds the key for its window
	until time.Time // when ended: the window's end (store.StoredTask.KeyHeldUntil)
}

// keyPlan is what the plan knows of the unique keys of a batch.
type keyPlan struct {
	holders map[string]keyHolder // unique key → the task holding it
	// frees: stored rows, ended, whose windows are over and whose keys inserts of the
	// batch take: their live_key is set to NULL before the inserts (see freeKeys).
	frees []string
}
