package mysqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// Migrate creates the store's tables when they do not exist (CREATE TABLE IF NOT
// EXISTS), checks that an existing task table has the columns the store needs, adds the
// owner column and its index, the group and key columns (grp, gkey: empty for the
// rows stored before, tasks of no group), the unique-key window columns
// (unique_until, unique_for_ms: 0, no window, for the rows stored before), the
// headers column (NULL: none), the result and history columns (NULL for the rows
// stored before: no result, no attempt records) and the started_at and last_owner
// columns (0, empty: no implicit attempt record), to a task table that lacks them,
// drops the
// index (state, updated_at) of a task table that has it (online), with
// [Options.ListIndexes] the listing's indexes (kind) and (grp, gkey) to a task table
// that lacks them (online), the conn_id,
// started and started_v columns to an owner table that lacks them (in place), the
// table of the start sets' further pages (<table>_starts), the table of the figures
// owners publish (<table>_stats), and the last_fire column to a schedule table
// that lacks it, and checks that the server's max_allowed_packet holds a statement with
// the largest payload. It is idempotent and safe to call from several
// processes at once.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.checkOpen("migrate"); err != nil {
		return err
	}
	err := s.retry(ctx, "migrate", func() error {
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf(schema, s.table)); err != nil {
			return err
		}
		rows, err := s.db.QueryContext(ctx, "SELECT "+baseColumns+", live_key, version FROM "+s.table+" LIMIT 0")
		if err != nil {
			return fmt.Errorf("table %s exists with another schema: %w", s.opts.Table, err)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := s.addOwner(ctx); err != nil {
			return err
		}
		if err := s.addGroupKey(ctx); err != nil {
			return err
		}
		for _, c := range []struct{ name, def string }{
			{"unique_until", uniqueUntilColumn},
			{"unique_for_ms", uniqueForColumn},
			{"headers", headersColumn},
			{"result", resultColumn},
			{"history", historyColumn},
			{"started_at", startedAtColumn},
			{"last_owner", lastOwnerColumn},
		} {
			if err := s.addColumn(ctx, s.opts.Table, s.table, c.name, c.def); err != nil {
				return err
			}
		}
		if err := s.dropIndex(ctx, stateUpdatedIndex); err != nil {
			return err
		}
		for _, ix := range [][2]string{{kindIndexName, kindIndex}, {groupIndexName, groupIndex}} {
			if !s.opts.ListIndexes {
				break
			}
			if err := s.addIndex(ctx, ix[0], ix[1]); err != nil {
				return err
			}
		}
		for _, def := range []struct{ schema, table string }{
			{ownersSchema, s.owners},
			{leasesSchema, s.leases},
			{epochsSchema, s.epochs},
			{schedSchema, s.sched},
			{startsSchema, s.startsTable},
			{replicasSchema, s.replicas},
		} {
			if _, err := s.db.ExecContext(ctx, fmt.Sprintf(def.schema, def.table)); err != nil {
				return err
			}
		}
		for _, c := range []struct{ name, def string }{{"conn_id", connIDColumn}, {"started", startedColumn}, {"started_v", startedVColumn}} {
			if err := s.addColumn(ctx, s.opts.Table+ownersSuffix, s.owners, c.name, c.def); err != nil {
				return err
			}
		}
		return s.addColumn(ctx, s.opts.Table+schedSuffix, s.sched, "last_fire", lastFireColumn)
	})
	if err != nil {
		return err
	}
	return s.checkPacket(ctx)
}

// MySQL and MariaDB errors of a concurrent ALTER TABLE that did the same thing.
const (
	erDupFieldName  = 1060
	erDupKeyName    = 1061
	erCantDropField = 1091
)

// online ends an ALTER TABLE that adds or drops indexes: in place, without copying the
// table, and without blocking reads or writes while it runs (a server that cannot do it
// so refuses the statement instead of locking the table).
const online = ", ALGORITHM=INPLACE, LOCK=NONE"

// addOwner adds the owner column, then its index (dropping the index it replaces), to a
// task table that lacks them: two ALTER TABLEs, so that the column is added in place
// without copying the table (where the server can: MariaDB >= 10.3, MySQL >= 8.0), and
// the index is built online. A concurrent Migrate that did either first is not an error.
func (s *Store) addOwner(ctx context.Context) error {
	name := newQuery(64).hexString(s.opts.Table).String()
	var column, index, old int
	err := s.db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = "+name+" AND COLUMN_NAME = 'owner'), (SELECT COUNT(*) FROM information_schema.STATISTICS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = "+name+" AND INDEX_NAME = 'state_owner_priority_run_at'), "+
		"(SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = "+name+
		" AND INDEX_NAME = '"+ownerIndexOld+"')").Scan(&column, &index, &old)
	if err != nil {
		return err
	}
	var alters []string
	if column == 0 {
		alters = append(alters, "ALTER TABLE "+s.table+" ADD COLUMN "+ownerColumn)
	}
	switch {
	case index == 0 && old > 0:
		alters = append(alters, "ALTER TABLE "+s.table+" ADD "+ownerIndex+", DROP KEY "+ownerIndexOld+online)
	case index == 0:
		alters = append(alters, "ALTER TABLE "+s.table+" ADD "+ownerIndex+online)
	case old > 0:
		alters = append(alters, "ALTER TABLE "+s.table+" DROP KEY "+ownerIndexOld+online)
	}
	for _, alter := range alters {
		if _, err := s.db.ExecContext(ctx, alter); err != nil {
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != erDupFieldName && me.Number != erDupKeyName && me.Number != erCantDropField {
				return err
			}
			return s.addOwner(ctx) // another Migrate did some of it: look again
		}
	}
	return nil
}

// addGroupKey adds the grp and gkey columns to a task table that lacks them (made by
// an earlier version of the store): in-place ALTER TABLEs where the server can (MariaDB
// >= 10.3 adds a column with a default instantly). A concurrent Migrate that added
// either first is not an error.
func (s *Store) addGroupKey(ctx context.Context) error {
	name := newQuery(64).hexString(s.opts.Table).String()
	var grp, gkey int
	err := s.db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = "+name+" AND COLUMN_NAME = 'grp'), (SELECT COUNT(*) FROM information_schema.COLUMNS "+
		"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = "+name+" AND COLUMN_NAME = 'gkey')").Scan(&grp, &gkey)
	if err != nil {
		return err
	}
	var alters []string
	if grp == 0 {
		alters = append(alters, "ALTER TABLE "+s.table+" ADD COLUMN "+groupColumn)
	}
	if gkey == 0 {
		alters = append(alters, "ALTER TABLE "+s.table+" ADD COLUMN "+keyColumn)
	}
	for _, alter := range alters {
		if _, err := s.db.ExecContext(ctx, alter); err != nil {
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != erDupFieldName {
				return err
			}
			return s.addGroupKey(ctx) // another Migrate did some of it: look again
		}
	}
	return nil
}

// addColumn adds the column named column, defined by def, to the table whose
// unquoted name is name and quoted name is quoted, when it lacks it (made by an earlier
// version of the store): an in-place ALTER TABLE where the server can. A concurrent
// Migrate that did it first is not an error.
func (s *Store) addColumn(ctx context.Context, name, quoted, column, def string) error {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = "+newQuery(64).hexString(name).String()+" AND COLUMN_NAME = "+newQuery(64).hexString(column).String()).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = s.db.ExecContext(ctx, "ALTER TABLE "+quoted+" ADD COLUMN "+def)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erDupFieldName {
		return nil
	}
	return err
}

// addIndex adds the index named name, defined by def, to a task table that lacks it
// (made by an earlier version of the store), online: building a secondary index
// neither copies the table nor blocks its writers. A concurrent Migrate that added it
// first is not an error.
func (s *Store) addIndex(ctx context.Context, name, def string) error {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = "+newQuery(64).hexString(s.opts.Table).String()+" AND INDEX_NAME = "+newQuery(64).hexString(name).String()).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = s.db.ExecContext(ctx, "ALTER TABLE "+s.table+" ADD "+def+online)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erDupKeyName {
		return nil
	}
	return err
}

// dropIndex drops the task table's index named name when the table has it (made by an
// earlier version of the store), online: dropping a secondary index neither copies the
// table nor blocks its writers. A concurrent Migrate that dropped it first is not an
// error.
func (s *Store) dropIndex(ctx context.Context, name string) error {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "+
		"AND TABLE_NAME = "+newQuery(64).hexString(s.opts.Table).String()+" AND INDEX_NAME = "+newQuery(64).hexString(name).String()).Scan(&n)
	if err != nil || n == 0 {
		return err
	}
	_, err = s.db.ExecContext(ctx, "ALTER TABLE "+s.table+" DROP KEY `"+name+"`"+online)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erCantDropField {
		return nil
	}
	return err
}
