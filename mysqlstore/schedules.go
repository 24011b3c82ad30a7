package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
)

var _ store.ScheduleStore = (*Store)(nil)

// schedSuffix names the schedule table after Options.Table. It is no longer than
// ownersSuffix, so TableMax holds for it.
const schedSuffix = "_sched"

// schedSchema is the schedule table ([store.ScheduleStore]): one row per durable
// schedule. next_fire is NULL for a schedule with no next occurrence.
const schedSchema = `CREATE TABLE IF NOT EXISTS %s (
	name       VARBINARY(100)   NOT NULL,
	spec       VARBINARY(255)   NOT NULL,
	next_fire  BIGINT           NULL COMMENT 'unix ms; NULL: no next occurrence',
	paused     TINYINT UNSIGNED NOT NULL DEFAULT 0,
	version    BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'bumped by every change',
	fire_token BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'random token of the last fire: a retry after a lost answer finds its own',
	` + lastFireColumn + `,
	updated_at DATETIME(6)      NOT NULL COMMENT 'UTC, server clock',
	PRIMARY KEY (name)
) ENGINE=InnoDB`

// lastFireColumn is the schedule table's last_fire column (StoredSchedule.Last), which
// Migrate adds to a schedule table that lacks it.
const lastFireColumn = "last_fire BIGINT NULL COMMENT 'unix ms: the latest target of the last fire with occurrences; NULL: none'"

// schedColumns are the columns scanSchedule reads.
const schedColumns = "name, spec, next_fire, last_fire, paused, version, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', updated_at)"

// scanSchedule reads the columns schedColumns and, into extra, those after them.
func scanSchedule(sc scanner, extra ...any) (store.StoredSchedule, error) {
	var (
		out     store.StoredSchedule
		next    sql.NullInt64
		last    sql.NullInt64
		paused  uint8
		updated int64
	)
	if err := sc.Scan(append([]any{&out.Name, &out.Spec, &next, &last, &paused, &out.Version, &updated}, extra...)...); err != nil {
		return store.StoredSchedule{}, err
	}
	if next.Valid {
		out.Next = fromMillis(next.Int64)
	}
	if last.Valid {
		out.Last = fromMillis(last.Int64)
	}
	out.Paused = paused != 0
	out.UpdatedAt = time.UnixMicro(updated).UTC()
	return out, nil
}

// nextLit appends the next_fire literal of t: its unix ms, or NULL for the zero time.
func nextLit(q *query, t store.StoredSchedule) *query {
	if t.Next.IsZero() {
		return q.raw("NULL")
	}
	return q.int(millis(t.Next))
}

func checkSchedule(what, name, spec string) error {
	if err := store.CheckScheduleName(name); err != nil {
		return fmt.Errorf("mysqlstore: %s: %w: %w", what, err, store.ErrInvalidChange)
	}
	if len(spec) > store.ScheduleSpecMax {
		return fmt.Errorf("mysqlstore: %s %q: spec of %d bytes: must be at most %d (ScheduleSpecMax): %w",
			what, name, len(spec), store.ScheduleSpecMax, store.ErrInvalidChange)
	}
	return nil
}

// getSchedule reads the schedule named name, and its fire token, with db; found is
// false when it is not stored.
func (s *Store) getSchedule(ctx context.Context, db queryer, name string) (out store.StoredSchedule, token uint64, found bool, err error) {
	q := newQuery(256 + 2*len(name)).raw("SELECT " + schedColumns + ", fire_token FROM ").raw(s.sched).raw(" WHERE name = ").hexString(name)
	err = scanAll(ctx, db, q.String(), func(sc scanner) error {
		var err error
		out, err = scanSchedule(sc, &token)
		found = err == nil
		return err
	})
	return out, token, found, err
}

// UpsertSchedule implements [store.ScheduleStore.UpsertSchedule]: an INSERT, which a
// stored row of the name refuses on the primary key, then a read of the row.
func (s *Store) UpsertSchedule(ctx context.Context, sc store.StoredSchedule) (store.StoredSchedule, bool, error) {
	if err := checkSchedule("upsert schedule", sc.Name, sc.Spec); err != nil {
		return store.StoredSchedule{}, false, err
	}
	if err := s.checkOpen("upsert schedule"); err != nil {
		return store.StoredSchedule{}, false, err
	}
	paused := "0"
	if sc.Paused {
		paused = "1"
	}
	q := newQuery(256 + 2*len(sc.Name) + 2*len(sc.Spec)).raw("INSERT INTO ").raw(s.sched).
		raw(" (name, spec, next_fire, paused, updated_at) VALUES (").hexString(sc.Name).raw(",").hexString(sc.Spec).raw(",")
	insert := nextLit(q, sc).raw("," + paused + "," + nowSQL + ")").String()
	var (
		out     store.StoredSchedule
		created bool
	)
	err := s.retry(ctx, "upsert schedule", func() error {
		created = false
		if _, err := s.db.ExecContext(ctx, insert); err != nil {
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != erDupEntry {
				return err
			}
		} else {
			created = true
		}
		var found bool
		var err error
		out, _, found, err = s.getSchedule(ctx, s.db, sc.Name)
		if err == nil && !found {
			return fmt.Errorf("%w: schedule %q deleted as it was created", errReplan, sc.Name)
		}
		return err
	})
	if err != nil {
		return store.StoredSchedule{}, false, err
	}
	return out, created, nil
}

// FireSchedule implements [store.ScheduleStore.FireSchedule] in one transaction (read
// committed): with an owner, the renewal of its lease (locking its row, as CommitAs
// does); an UPDATE of the schedule's row that sets the new next time, a new version and
// a random fire token WHERE the next time is the expected one and the schedule is not
// paused; and, when it changed the row, the INSERT of the occurrences (one stored
// already is left as it is). When the connection is lost as the transaction commits,
// the retry reads the row: the fire token tells whether the lost try fired. If another
// fire of the schedule landed between the lost try and the retry, the retry reports
// fired = false although its try fired: the occurrences are stored all the same, and
// run from the store (recovered, rescued or claimed) rather than from the caller.
func (s *Store) FireSchedule(ctx context.Context, f store.ScheduleFire) (store.StoredSchedule, bool, error) {
	if err := f.Validate(); err != nil {
		return store.StoredSchedule{}, false, fmt.Errorf("mysqlstore: fire schedule: %w", err)
	}
	for i := range f.Occurrences {
		if t := &f.Occurrences[i].Task; len(t.Payload) > s.opts.MaxPayload {
			return store.StoredSchedule{}, false, fmt.Errorf("mysqlstore: fire schedule %q: occurrence %q: payload of %d bytes, Options.MaxPayload is %d: %w",
				f.Name, t.ID, len(t.Payload), s.opts.MaxPayload, store.ErrPayloadTooLarge)
		}
	}
	if err := s.checkOpen("fire schedule"); err != nil {
		return store.StoredSchedule{}, false, err
	}
	if s.packet.Load() == 0 {
		if err := s.checkPacket(ctx); err != nil {
			return store.StoredSchedule{}, false, err
		}
	}
	token := rand.Uint64() | 1 // never the column's default, 0
	update := s.fireUpdate(f, token)
	inserts := s.occurrenceInserts(f)

	var (
		out     store.StoredSchedule
		fired   bool
		unknown bool // an earlier try may have committed
	)
	err := s.retryAs(ctx, "fire schedule", f.Owner, func() error {
		var err error
		out, fired, err = s.fireTry(ctx, f, update, inserts, token, unknown)
		if err != nil && unavailable(err) {
			unknown = true
		}
		return err
	})
	switch {
	case errors.Is(err, errNoSchedule):
		return store.StoredSchedule{}, false, fmt.Errorf("mysqlstore: fire schedule %q: %w", f.Name, store.ErrUnknownSchedule)
	case err != nil:
		return store.StoredSchedule{}, false, err
	}
	return out, fired, nil
}

// fireUpdate returns the UPDATE of a fire of f with the fire token token: the new next
// time, version, token, spec and last fire, where the schedule is not paused and its
// next time is f.Expect.
func (s *Store) fireUpdate(f store.ScheduleFire, token uint64) string {
	update := newQuery(384 + 2*len(f.Name) + 2*len(f.Spec)).raw("UPDATE ").raw(s.sched).raw(" SET next_fire = ")
	nextLit(update, store.StoredSchedule{Next: f.Next}).raw(", version = version + 1, fire_token = ").uint(token).
		raw(", updated_at = " + nowSQL)
	if f.Spec != "" {
		update.raw(", spec = ").hexString(f.Spec)
	}
	if last := f.Last(); !last.IsZero() {
		update.raw(", last_fire = ").int(millis(last))
	}
	update.raw(" WHERE name = ").hexString(f.Name).raw(" AND paused = 0 AND next_fire <=> ")
	return nextLit(update, store.StoredSchedule{Next: f.Expect}).String()
}

// fireTry is one try of FireSchedule, whose statements are update and inserts and
// whose fire token is token. When unknown, an earlier try may have committed: it reads
// the schedule first, and reports that try's fire when the stored token is token.
func (s *Store) fireTry(ctx context.Context, f store.ScheduleFire, update string, inserts []string, token uint64, unknown bool) (out store.StoredSchedule, fired bool, err error) {
	if unknown {
		cur, tok, found, err := s.getSchedule(ctx, s.db, f.Name)
		if err != nil {
			return store.StoredSchedule{}, false, err
		}
		if found && tok == token {
			return cur, true, nil
		}
	}
	err = s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		out, fired = store.StoredSchedule{}, false
		if f.Owner != nil {
			if err := s.renew(ctx, tx, f.Owner); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, update)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			for _, q := range inserts {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			fired = true
		}
		var found bool
		out, _, found, err = s.getSchedule(ctx, tx, f.Name)
		if err == nil && !found {
			err = errNoSchedule
		}
		return err
	})
	if err != nil {
		return store.StoredSchedule{}, false, err
	}
	return out, fired, nil
}

// errNoSchedule: the schedule is not stored; the transaction is rolled back.
var errNoSchedule = errors.New("mysqlstore: no such schedule")

// occurrenceInserts returns the INSERTs of f's occurrences, owned by f.Owner (none:
// the pool); an occurrence stored already is left as it is.
func (s *Store) occurrenceInserts(f store.ScheduleFire) []string {
	if len(f.Occurrences) == 0 {
		return nil
	}
	rows := make(map[string]*row, len(f.Occurrences))
	ids := make([]string, 0, len(f.Occurrences))
	for i := range f.Occurrences {
		c := &f.Occurrences[i]
		if rows[c.Task.ID] != nil {
			continue // the first insert of an ID applies, as in a batch
		}
		t := c.Task
		if t.Priority == store.PriorityDefault {
			t.Priority = store.Normal
		}
		rows[t.ID] = &row{id: t.ID, ins: &t, pool: c.Pool}
		ids = append(ids, t.ID)
	}
	var owner uint64
	if f.Owner != nil {
		owner = f.Owner.Epoch
	}
	var out []string
	for _, st := range s.inserts(rows, ids, owner) {
		out = append(out, st.sql+" ON DUPLICATE KEY UPDATE id = id")
	}
	return out
}

// GetSchedule implements [store.ScheduleStore.GetSchedule].
func (s *Store) GetSchedule(ctx context.Context, name string) (store.StoredSchedule, error) {
	if err := checkSchedule("get schedule", name, ""); err != nil {
		return store.StoredSchedule{}, err
	}
	if err := s.checkOpen("get schedule"); err != nil {
		return store.StoredSchedule{}, err
	}
	var (
		out   store.StoredSchedule
		found bool
	)
	err := s.retry(ctx, "get schedule", func() error {
		var err error
		out, _, found, err = s.getSchedule(ctx, s.db, name)
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("mysqlstore: get schedule %q: %w", name, store.ErrUnknownSchedule)
	}
	return out, err
}

// PauseSchedule implements [store.ScheduleStore.PauseSchedule]: an UPDATE of the row
// when its flag differs, then a read of it.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool) (store.StoredSchedule, error) {
	if err := checkSchedule("pause schedule", name, ""); err != nil {
		return store.StoredSchedule{}, err
	}
	if err := s.checkOpen("pause schedule"); err != nil {
		return store.StoredSchedule{}, err
	}
	flag := "0"
	if paused {
		flag = "1"
	}
	update := newQuery(192 + 2*len(name)).raw("UPDATE ").raw(s.sched).raw(" SET paused = " + flag + ", version = version + 1, updated_at = " + nowSQL).
		raw(" WHERE name = ").hexString(name).raw(" AND paused <> " + flag).String()
	var (
		out   store.StoredSchedule
		found bool
	)
	err := s.retry(ctx, "pause schedule", func() error {
		if _, err := s.db.ExecContext(ctx, update); err != nil {
			return err
		}
		var err error
		out, _, found, err = s.getSchedule(ctx, s.db, name)
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("mysqlstore: pause schedule %q: %w", name, store.ErrUnknownSchedule)
	}
	return out, err
}

// DeleteSchedule implements [store.ScheduleStore.DeleteSchedule]: one DELETE. After a
// retry whose first try's answer was lost, it may report false for a schedule that try
// deleted.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := checkSchedule("delete schedule", name, ""); err != nil {
		return false, err
	}
	if err := s.checkOpen("delete schedule"); err != nil {
		return false, err
	}
	q := newQuery(128 + 2*len(name)).raw("DELETE FROM ").raw(s.sched).raw(" WHERE name = ").hexString(name)
	n, err := s.exec(ctx, "delete schedule", q.String())
	return n > 0, err
}
