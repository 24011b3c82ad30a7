package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name  string
		opts  mysqlstore.Options
		field string // "" when valid
	}{
		{"zero", mysqlstore.Options{}, ""},
		{"plain", mysqlstore.Options{Table: "ax_tasks"}, ""},
		{"underscore first", mysqlstore.Options{Table: "_t9"}, ""},
		{"TableMax bytes", mysqlstore.Options{Table: strings.Repeat("a", mysqlstore.TableMax)}, ""},
		{"TableMax+1 bytes", mysqlstore.Options{Table: strings.Repeat("a", mysqlstore.TableMax+1)}, "Options.Table"},
		{"digit first", mysqlstore.Options{Table: "9tasks"}, "Options.Table"},
		{"dash", mysqlstore.Options{Table: "ax-tasks"}, "Options.Table"},
		{"dot", mysqlstore.Options{Table: "test.ax_tasks"}, "Options.Table"},
		{"space", mysqlstore.Options{Table: "ax tasks"}, "Options.Table"},
		{"backquote", mysqlstore.Options{Table: "ax`; DROP TABLE x; --"}, "Options.Table"},
		{"quote", mysqlstore.Options{Table: "ax'"}, "Options.Table"},
		{"unicode", mysqlstore.Options{Table: "tâches"}, "Options.Table"},
		{"newline", mysqlstore.Options{Table: "ax\n"}, "Options.Table"},
		{"nul", mysqlstore.Options{Table: "ax\x00"}, "Options.Table"},
		{"payload negative", mysqlstore.Options{MaxPayload: -1}, "Options.MaxPayload"},
		{"payload huge", mysqlstore.Options{MaxPayload: mysqlstore.MaxPayloadMax + 1}, "Options.MaxPayload"},
		{"result negative", mysqlstore.Options{MaxResult: -1}, "Options.MaxResult"},
		{"result huge", mysqlstore.Options{MaxResult: store.ResultMax + 1}, "Options.MaxResult"},
		{"attempts negative", mysqlstore.Options{AttemptsKept: -2}, "Options.AttemptsKept"},
		{"attempts huge", mysqlstore.Options{AttemptsKept: mysqlstore.AttemptsKeptMax + 1}, "Options.AttemptsKept"},
		{"purge interval", mysqlstore.Options{PurgeInterval: -1}, "Options.PurgeInterval"},
		{"lock wait", mysqlstore.Options{LockWait: -1}, "Options.LockWait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var oe *mysqlstore.OptionError
			if !errors.As(err, &oe) || oe.Field != tt.field {
				t.Fatalf("Validate() = %v, want an *OptionError for %s", err, tt.field)
			}
			if !strings.HasPrefix(err.Error(), "mysqlstore: "+tt.field+" = ") {
				t.Errorf("Validate() = %q, want it to name %s", err, tt.field)
			}
		})
	}
}

// TestBadTableRunsNoSQL proves that an invalid table name is refused before any SQL: the
// DSN points at a port where nothing listens, and the validation error still comes first;
// and on the real database, a pool with no connection opened stays at zero.
func TestBadTableRunsNoSQL(t *testing.T) {
	bad := mysqlstore.Options{Table: "x`; DROP TABLE ax_tasks; --"}
	if _, err := mysqlstore.Open("root@tcp(127.0.0.1:1)/test", bad); !isTableError(err) {
		t.Fatalf("Open(closed port, bad table) = %v, want an Options.Table error", err)
	}
	if _, err := mysqlstore.Open("not a dsn at all", bad); !isTableError(err) {
		t.Fatalf("Open(bad DSN, bad table) = %v, want the Options.Table error first", err)
	}
	db := openDB(t)
	db.SetMaxIdleConns(0) // no idle connection kept from the ping
	before := db.Stats()
	if _, err := mysqlstore.New(db, bad); !isTableError(err) {
		t.Fatalf("New(bad table) = %v, want an Options.Table error", err)
	}
	after := db.Stats()
	if after.OpenConnections != 0 || after.InUse != 0 || after.WaitCount != before.WaitCount {
		t.Errorf("New(bad table) touched the pool: %+v", after)
	}
	if _, err := mysqlstore.New(nil, mysqlstore.Options{}); err == nil {
		t.Error("New(nil) = nil error")
	}
}

func isTableError(err error) bool {
	var oe *mysqlstore.OptionError
	return errors.As(err, &oe) && oe.Field == "Options.Table"
}

func TestMigrateIdempotent(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	ctx := context.Background()
	for range 3 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate() again = %v", err)
		}
	}
	// The indexes the contract names exist.
	rows, err := db.QueryContext(ctx, "SELECT index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index), MIN(non_unique) "+
		"FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? GROUP BY index_name", s.Table())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	got := map[string]string{}
	for rows.Next() {
		var name, cols string
		var nonUnique int
		if err := rows.Scan(&name, &cols, &nonUnique); err != nil {
			t.Fatal(err)
		}
		got[name] = cols
		if name == "live_key" && nonUnique != 0 {
			t.Errorf("index live_key is not unique")
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PRIMARY": "id", "live_key": "live_key", "state_owner_priority_run_at": "state,owner,priority,run_at",
	}
	if len(got) != len(want) {
		t.Errorf("indexes %v, want %v alone", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("index %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestMigrateWrongSchema(t *testing.T) {
	db := openDB(t)
	table := tableName(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE `"+table+"` (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dropTables(context.Background(), db, table) })
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "another schema") {
		t.Fatalf("Migrate() over a foreign table = %v, want an error naming the schema", err)
	}
}

func TestCommitBeforeMigrate(t *testing.T) {
	db := openDB(t)
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: tableName(t), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	_, err = s.Commit(context.Background(), []kernelChange{insertChange("a", nil)})
	if err == nil || !strings.Contains(err.Error(), "call Migrate first") {
		t.Fatalf("Commit() before Migrate = %v, want a hint to call Migrate", err)
	}
}
