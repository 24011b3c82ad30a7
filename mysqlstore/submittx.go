package mysqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
)

// TxTask is a durable task that [Store.SubmitTx] inserts in a caller's transaction: the
// fields of a durable task (kernel.DurableTask) that the store keeps. It always goes to
// the pool: any kernel on the table whose Config.Store is this table claims and runs
// it.
type TxTask struct {
	// Kind names the registered function that runs the task; 1 to store.KindMax bytes.
	Kind string
	// Payload is the function's input, at most Options.MaxPayload bytes. SubmitTx
	// writes it before it returns and does not keep it.
	Payload []byte
	// Priority is the task's bucket. If zero, Normal.
	Priority store.Priority
	// Delay holds the task back for this long after the insert, At until that time,
	// both on the database's clock (UTC_TIMESTAMP), the clock claims compare due
	// times with. At most one of them may be set. If both are zero, the task is due at
	// once.
	Delay time.Duration
	At    time.Time
	// Timeout bounds each attempt. If zero, the running kernel's default.
	Timeout time.Duration
	// MaxAttempts bounds the attempts. If zero, the running kernel's default.
	MaxAttempts int
	// UniqueKey, if not empty, refuses the task while another task holds the key (see
	// "Unique keys" in store.Store): SubmitTx then returns a *store.DuplicateKeyError
	// naming the holder. UniqueUntil and UniqueFor are the key's window after the
	// task ends (store.StoredTask.UniqueUntil and UniqueFor).
	UniqueKey   string
	UniqueUntil time.Time
	UniqueFor   time.Duration
	// Group and Key name the task's group and its key in the group
	// (kernel.DurableTask.Group and Key).
	Group string
	Key   string
	// Headers are key-value pairs stored with the task (store.StoredTask.Headers), at
	// most store.HeadersMax bytes: a trace context, for one, as kernel.Hooks.Headers
	// returns it for the caller's context, so that the attempts continue the caller's
	// trace. SubmitTx copies them.
	Headers map[string]string
}

// txIDPrefix begins the IDs that SubmitTx makes: no kernel makes IDs that begin so.
const txIDPrefix = "axtx-"

// SubmitTx inserts tasks into the pool in tx, a transaction of the caller on the
// store's database, and returns their IDs, in order. The tasks exist when, and only
// if, tx commits: a rollback leaves nothing, a commit leaves every one of them, and
// any kernel on the store then claims and runs each of them once it is due, exactly
// as a task of [store.Change.Pool] (Queued or Delayed, no owner). Follow a task by its
// ID with [Store.Get]. After the commit, call [Store.Notify] to have the kernels of
// this process claim at once; the others claim within their claim poll.
//
// It validates every task before it writes anything (the rules of store.Change.Validate
// for an insert, with the same limits: an error naming the task, tasks[i], and the
// field; a payload over Options.MaxPayload is refused with store.ErrPayloadTooLarge),
// then inserts them: the tasks without a unique key in one multi-row INSERT, each task
// with one in an INSERT of its own. A key held by another task (live, or in its window)
// refuses the call with a *store.DuplicateKeyError, which wraps store.ErrDuplicateKey
// and names the holder; a key whose holder is another transaction's uncommitted insert
// waits for that transaction (up to the server's innodb_lock_wait_timeout), and
// refuses the call if it commits. A key held by an ended task whose window is over
// (on this process's clock, which also stamps the tasks' CreatedAt and UpdatedAt) is
// taken from it.
//
// On any error nothing of the call stays in tx (a call of several tasks runs inside a
// SAVEPOINT that it rolls back to), and tx is left open for the caller to commit or
// roll back; but an error of the server (a deadlock, a lost connection, ctx ending)
// may have ended tx, as with any statement of the caller's. It blocks until its
// statements return; it is safe for concurrent use with different transactions; a
// transaction is not safe for concurrent use.
func (s *Store) SubmitTx(ctx context.Context, tx *sql.Tx, tasks ...TxTask) ([]string, error) {
	if err := s.checkOpen("submit tx"); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, errors.New("mysqlstore: SubmitTx: tx is nil")
	}
	if len(tasks) == 0 {
		return nil, nil
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	ids := make([]string, len(tasks))
	stored := make([]store.StoredTask, len(tasks))
	var errs []error
	for i := range tasks {
		ids[i] = newTxID()
		t, err := s.txTask(&tasks[i], ids[i], now)
		if err != nil {
			errs = append(errs, fmt.Errorf("mysqlstore: SubmitTx: tasks[%d]: %w", i, err))
		}
		stored[i] = t
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(tasks) > 1 {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT ax_submit_tx"); err != nil {
			return nil, s.wrap("submit tx", err)
		}
	}
	if err := s.insertTx(ctx, tx, tasks, stored, now); err != nil {
		if len(tasks) > 1 {
			_, _ = tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT ax_submit_tx") // err says what went wrong; a dead tx is the caller's
		}
		var dk *store.DuplicateKeyError
		if errors.As(err, &dk) {
			return nil, fmt.Errorf("mysqlstore: SubmitTx: %w", err)
		}
		return nil, s.wrap("submit tx", err)
	}
	return ids, nil
}

// Notify wakes the kernels whose Config.Store is s, so that they claim the pool at
// once: call it after committing a transaction in which [Store.SubmitTx] inserted
// tasks. Kernels on other Store values, in this process or others, claim within their
// poll. It never blocks and is safe for concurrent use; a call with nothing new in
// the pool costs one claim of each kernel woken.
func (s *Store) Notify() {
	s.wakeMu.Lock()
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	s.wakeMu.Unlock()
}

// PoolWake implements [store.PoolWaker]: the channel the next [Store.Notify] closes.
func (s *Store) PoolWake() <-chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// newTxID returns a new task ID for SubmitTx: txIDPrefix and 32 random hex digits.
func newTxID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return txIDPrefix + hex.EncodeToString(b[:])
}

// txTask checks t and returns the row SubmitTx inserts for it. RunAt is left zero:
// the INSERT computes it on the database's clock.
func (s *Store) txTask(t *TxTask, id string, now time.Time) (store.StoredTask, error) {
	switch {
	case t.Delay < 0:
		return store.StoredTask{}, fmt.Errorf("TxTask.Delay = %v: must be >= 0: %w", t.Delay, store.ErrInvalidChange)
	case t.Delay > 0 && !t.At.IsZero():
		return store.StoredTask{}, fmt.Errorf("TxTask.At: must be zero when Delay is set: %w", store.ErrInvalidChange)
	case len(t.Payload) > s.opts.MaxPayload:
		return store.StoredTask{}, fmt.Errorf("TxTask.Payload: %d bytes, Options.MaxPayload is %d: %w",
			len(t.Payload), s.opts.MaxPayload, store.ErrPayloadTooLarge)
	}
	st := store.StoredTask{
		ID: id, Kind: t.Kind, Payload: t.Payload, Priority: t.Priority, Timeout: t.Timeout,
		MaxAttempts: t.MaxAttempts, Fence: 1, UniqueKey: t.UniqueKey, Group: t.Group, Key: t.Key,
		State: store.Queued, CreatedAt: now, UpdatedAt: now,
		UniqueUntil: t.UniqueUntil, UniqueFor: t.UniqueFor, Headers: maps.Clone(t.Headers),
	}
	if st.Priority == store.PriorityDefault {
		st.Priority = store.Normal
	}
	c := store.Change{Op: store.OpInsert, Task: st, Pool: true}
	if err := c.Validate(); err != nil {
		// The store's rules name the fields of the StoredTask they check, which are
		// the caller's TxTask fields of the same names.
		msg := strings.TrimPrefix(err.Error(), store.ErrInvalidChange.Error()+": ")
		return st, fmt.Errorf("%s: %w", strings.ReplaceAll(msg, " Task.", " TxTask."), store.ErrInvalidChange)
	}
	return st, nil
}

// dbNowMillis is the database's clock in unix ms, as SQL.
const dbNowMillis = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + nowSQL + ") DIV 1000)"

// txRow appends the VALUES row of t (as checked into st) to q: the columns of
// columns, then live_key. Its due time and state come from the database's clock.
func txRow(q *query, t *TxTask, st *store.StoredTask) {
	runAt := dbNowMillis
	switch {
	case t.Delay > 0:
		ms := t.Delay.Milliseconds()
		if time.Duration(ms)*time.Millisecond < t.Delay {
			ms++ // never due before the delay
		}
		runAt = "(" + dbNowMillis + " + " + strconv.FormatInt(ms, 10) + ")"
	case !t.At.IsZero():
		runAt = strconv.FormatInt(millis(ceilMillis(t.At)), 10)
	}
	q.raw("(").hexString(st.ID).raw(",").hexString(st.Kind).raw(",").hexBytes(st.Payload).raw(",").
		uint(uint64(priorityCode(st.Priority))).raw(",").raw(runAt).raw(",").
		int(int64(st.Timeout)).raw(",").int(int64(st.MaxAttempts)).raw(",0,").uint(st.Fence).raw(",").
		hexString(st.UniqueKey).raw(",IF(").raw(runAt).raw(" > ").raw(dbNowMillis).raw(",").
		uint(uint64(stateCode(store.Delayed))).raw(",").uint(uint64(stateCode(store.Queued))).raw("),'',").
		int(millis(st.CreatedAt)).raw(",").int(millis(st.UpdatedAt)).raw(",").
		hexString(st.Group).raw(",").hexString(st.Key).raw(",").int(untilMillis(st.UniqueUntil)).raw(",").
		int(st.UniqueFor.Milliseconds()).raw(",")
	if len(st.Headers) > 0 {
		q.hexBytes(encodeHeaders(st.Headers)).raw(",")
	} else {
		q.raw("NULL,")
	}
	if st.UniqueKey != "" {
		q.hexString(st.UniqueKey)
	} else {
		q.raw("NULL")
	}
	q.raw(")")
}

// ceilMillis rounds t up to a whole millisecond.
func ceilMillis(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// insertTx writes the checked tasks in tx: those without a key in multi-row INSERTs,
// each keyed one in an INSERT of its own (see insertKeyed).
func (s *Store) insertTx(ctx context.Context, tx *sql.Tx, tasks []TxTask, stored []store.StoredTask, now time.Time) error {
	head := "INSERT INTO " + s.table + " (" + columns + ", live_key) VALUES "
	budget := s.statementBudget()
	var q *query
	flush := func() error {
		if q == nil {
			return nil
		}
		_, err := tx.ExecContext(ctx, q.String())
		q = nil
		return err
	}
	n := 0
	for i := range tasks {
		if stored[i].UniqueKey != "" {
			continue
		}
		size := 2*len(stored[i].Payload) + 2048
		if q != nil && (n >= insertRowsMax || q.Len()+size > budget) {
			if err := flush(); err != nil {
				return err
			}
		}
		if q == nil {
			q = newQuery(len(head) + size)
			q.raw(head)
			n = 0
		} else {
			q.raw(",")
		}
		txRow(q, &tasks[i], &stored[i])
		n++
	}
	if err := flush(); err != nil {
		return err
	}
	for i := range tasks {
		if stored[i].UniqueKey != "" {
			q := newQuery(len(head) + 2*len(stored[i].Payload) + 2048)
			q.raw(head)
			txRow(q, &tasks[i], &stored[i])
			if err := s.insertKeyed(ctx, tx, q.String(), &stored[i], now); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertKeyed runs insert, the INSERT of the keyed task t. When the key is held, it
// reads the holder with a shared lock (which never deadlocks with the other readers
// of a contended key): a live holder, or one in its window at now, refuses t; an
// ended holder whose window is over gives the key up (its live_key is set to NULL)
// and the INSERT runs again.
func (s *Store) insertKeyed(ctx context.Context, tx *sql.Tx, insert string, t *store.StoredTask, now time.Time) error {
	const tries = 3
	for range tries {
		_, err := tx.ExecContext(ctx, insert)
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || me.Number != erDupEntry || !strings.Contains(me.Message, "live_key") {
			return err
		}
		var (
			holder string
			code   uint8
			end    int64
		)
		q := newQuery(256).raw("SELECT id, state, " + windowEnd + " FROM ").raw(s.table).raw(" WHERE live_key = ").
			hexString(t.UniqueKey).raw(" LOCK IN SHARE MODE")
		err = tx.QueryRowContext(ctx, q.String()).Scan(&holder, &code, &end)
		if errors.Is(err, sql.ErrNoRows) {
			continue // the holder left meanwhile
		}
		if err != nil {
			return err
		}
		st, err := decodeState(code)
		if err != nil {
			return err
		}
		if st.Live() || fromUntil(end).After(now) {
			return &store.DuplicateKeyError{ID: t.ID, Key: t.UniqueKey, Holder: holder}
		}
		q = newQuery(256).raw("UPDATE ").raw(s.table).raw(" SET live_key = NULL, version = version + 1 WHERE id = ").
			hexString(holder).raw(" AND live_key = ").hexString(t.UniqueKey).raw(" AND state > " + liveMaxCode)
		if _, err := tx.ExecContext(ctx, q.String()); err != nil {
			return err
		}
	}
	return fmt.Errorf("mysqlstore: insert %q: key %q changed hands %d times while taken: %w", t.ID, t.UniqueKey, tries, store.ErrDuplicateKey)
}
