package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s, _ := setup(t, mysqlstore.Options{})
		return s
	})
}

// TestConformanceOpen runs the suite on stores made by Open, whose group commits go
// through the multi-statement pool.
func TestConformanceOpen(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store {
		db, table := openDB(t), tableName(t)
		s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = s.Close() // some cases close it themselves
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := dropTables(ctx, db, table); err != nil {
				t.Error(err)
			}
		})
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("Migrate() = %v", err)
		}
		return s
	})
}
