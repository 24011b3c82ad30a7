package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestIdentity: stores on one table agree on their identity, whichever address and pool
// reached it (New on the test's pool, Open on the DSN with the host written otherwise);
// another table has another; a closed store returns ErrStoreClosed.
func TestIdentity(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t, mysqlstore.Options{})
	id, err := s.Identity(ctx)
	if err != nil {
		t.Fatalf("Identity() = %v", err)
	}
	if !strings.HasPrefix(id, "mysql://") || !strings.HasSuffix(id, "/"+s.Table()) {
		t.Errorf("Identity() = %q, want mysql://…/%s", id, s.Table())
	}

	cfg, err := mysql.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	if host, port, ok := strings.Cut(cfg.Addr, ":"); ok && cfg.Net == "tcp" && host == "127.0.0.1" {
		cfg.Addr = "localhost:" + port // the same server by another name
	}
	o, err := mysqlstore.Open(cfg.FormatDSN(), mysqlstore.Options{Table: s.Table(), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Close() }()
	if got, err := o.Identity(ctx); got != id || err != nil {
		t.Errorf("Identity() through %s = %q, %v; want %q", cfg.Addr, got, err, id)
	}

	other, err := mysqlstore.New(db, mysqlstore.Options{Table: s.Table() + "x", Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Identity(ctx); got == id || err != nil {
		t.Errorf("Identity() of another table = %q, %v; want another than %q", got, err, id)
	}
	_ = other.Close()
	if _, err := other.Identity(ctx); !errors.Is(err, store.ErrStoreClosed) {
		t.Errorf("Identity() after Close = %v, want ErrStoreClosed", err)
	}
}
