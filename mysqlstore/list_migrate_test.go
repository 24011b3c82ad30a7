package mysqlstore

import (
	"context"
	"maps"
	"testing"
)

// TestMigrateListIndexes: Migrate with Options.ListIndexes adds the listing's
// indexes to a table made without them, again without error; Migrate without the
// option keeps them.
func TestMigrateListIndexes(t *testing.T) {
	s := internalStore(t, "hlistmigrate")
	ctx := context.Background()
	indexes := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		err := scanAll(ctx, s.db, "SELECT INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) FROM information_schema.STATISTICS "+
			"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '"+s.opts.Table+"' GROUP BY INDEX_NAME", func(sc scanner) error {
			var name, cols string
			err := sc.Scan(&name, &cols)
			got[name] = cols
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := map[string]string{"PRIMARY": "id", "live_key": "live_key", "state_owner_priority_run_at": "state,owner,priority,run_at"}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := indexes(); !maps.Equal(got, base) {
		t.Fatalf("indexes after Migrate = %v, want %v", got, base)
	}
	si, err := New(s.db, Options{Table: s.opts.Table, Retention: -1, ListIndexes: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = si.Close() }()
	with := maps.Clone(base)
	with[kindIndexName], with[groupIndexName] = "kind", "grp,gkey"
	for range 2 {
		if err := si.Migrate(ctx); err != nil {
			t.Fatalf("Migrate with ListIndexes = %v", err)
		}
		if got := indexes(); !maps.Equal(got, with) {
			t.Fatalf("indexes after Migrate with ListIndexes = %v, want %v", got, with)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := indexes(); !maps.Equal(got, with) {
		t.Fatalf("indexes after Migrate without ListIndexes = %v, want them kept: %v", got, with)
	}
}
