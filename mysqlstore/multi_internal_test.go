package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// openStore returns a migrated store made by Open (with the multi-statement pool)
// on a table of its own, dropped in t.Cleanup.
func openStore(t *testing.T, tag string) *Store {
	t.Helper()
	dsn := os.Getenv("AX_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	s, err := Open(dsn, Options{Table: fmt.Sprintf("axt_%s_%d", tag, os.Getpid()), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Drop(ctx); err != nil {
			t.Error(err)
		}
		_ = s.Close()
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate() = %v (run scripts/ensure-mariadb.sh if no server answers)", err)
	}
	return s
}

// TestMultiTxRollsBack runs multiTx with statements that do not hold — an update of
// a row whose fence moved, an insert of a stored ID, a renewal of an owner that left
// — after an insert that did: each returns errReplan and leaves nothing written, and
// the connection (the pool holds one) then commits the next batch as a fresh
// transaction.
func TestMultiTxRollsBack(t *testing.T) {
	s := openStore(t, "multi_rollback")
	s.multi.SetMaxOpenConns(1)
	ctx := context.Background()
	if err := s.checkPacket(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(id string) statement {
		task := &store.StoredTask{
			ID: id, Kind: "k", Priority: store.Normal, State: store.Queued, Fence: 1, RunAt: now, CreatedAt: now, UpdatedAt: now,
		}
		r := &row{id: id, ins: task}
		return s.inserts(map[string]*row{id: r}, []string{id}, 0)[0]
	}
	if err := s.multiTx(ctx, nil, []statement{insert("a")}); err != nil {
		t.Fatalf("multiTx(insert a) = %v", err)
	}
	o, err := s.Join(ctx, "multi", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stale := s.updateOne(&row{id: "a", fence: 3, state: store.Running, preFence: 2, updatedAt: now}, "")
	for _, tc := range []struct {
		name  string
		owner *store.Owner
		stmts []statement
	}{
		{"stale fence", nil, []statement{insert("b"), stale}},
		{"stored ID", nil, []statement{insert("b"), insert("a")}},
		{"stale fence as owner", &o, []statement{insert("b"), stale}},
	} {
		if err := s.multiTx(ctx, tc.owner, tc.stmts); !errors.Is(err, errReplan) {
			t.Errorf("%s: multiTx() = %v, want errReplan", tc.name, err)
		}
		if _, err := s.Get(ctx, "b"); !errors.Is(err, store.ErrUnknownTask) {
			t.Fatalf("%s: Get(b) = %v, want ErrUnknownTask: the rolled-back insert landed", tc.name, err)
		}
	}
	if err := s.Leave(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := s.multiTx(ctx, &o, []statement{insert("b")}); !errors.Is(err, errReplan) {
		t.Errorf("multiTx() by an owner that left = %v, want errReplan", err)
	}
	if _, err := s.Get(ctx, "b"); !errors.Is(err, store.ErrUnknownTask) {
		t.Fatalf("Get(b) = %v, want ErrUnknownTask: an owner that left wrote", err)
	}
	b := store.Change{Op: store.OpInsert, Task: store.StoredTask{
		ID: "b", Kind: "k", State: store.Queued, Fence: 1, RunAt: now, CreatedAt: now, UpdatedAt: now,
	}}
	if _, err := s.CommitAs(ctx, o, []store.Change{b}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("CommitAs() by an owner that left = %v, want ErrLeaseLost", err)
	}
	good := s.updateOne(&row{id: "a", fence: 2, state: store.Running, preFence: 1, updatedAt: now}, "")
	if err := s.multiTx(ctx, nil, []statement{insert("c"), good}); err != nil {
		t.Fatalf("multiTx() after the rollbacks = %v", err)
	}
	for id, want := range map[string]store.State{"a": store.Running, "c": store.Queued} {
		if got, err := s.Get(ctx, id); err != nil || got.State != want {
			t.Errorf("Get(%s) = %v, %v; want %s", id, got.State, err, want)
		}
	}
}

// TestMultiTxParseErrorTurnsOff: a multi-statement query the server cannot parse (as a
// proxy that does not take multi-statement queries answers) returns errReplan, so that
// the batch goes by the locking plan, and turns the multi-statement path off; the
// store's commits then still work.
func TestMultiTxParseErrorTurnsOff(t *testing.T) {
	s := openStore(t, "multi_parse")
	ctx := context.Background()
	if err := s.checkPacket(ctx); err != nil {
		t.Fatal(err)
	}
	bad := statement{sql: "UPDATE WHERE nothing parses", want: -1}
	if !s.multiFits(nil, []statement{bad}) {
		t.Fatal("multiFits() = false before any refusal")
	}
	if err := s.multiTx(ctx, nil, []statement{bad}); !errors.Is(err, errReplan) {
		t.Fatalf("multiTx(unparsable) = %v, want errReplan", err)
	}
	if s.multiFits(nil, []statement{bad}) {
		t.Fatal("multiFits() = true after the server refused a query as unparsable")
	}
	now := time.Now()
	if _, err := s.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
		ID: "after", Kind: "k", State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now,
	}}}); err != nil {
		t.Fatalf("Commit() after the multi-statement path turned off = %v", err)
	}
	if st, err := s.Get(ctx, "after"); err != nil || st.State != store.Queued {
		t.Fatalf("Get(after) = %+v, %v", st, err)
	}
}

// TestMultiTxChecksInTheNextWhere: the count of a statement followed by an UPDATE that
// must change rows is checked in that UPDATE's WHERE, not by a guard of its own, so a
// renewal and two such UPDATEs take one guard; and a count that differs (a stale
// fence, an owner that left) still stops the query before COMMIT, the UPDATE after it
// changing nothing.
func TestMultiTxChecksInTheNextWhere(t *testing.T) {
	s := openStore(t, "multi_where")
	ctx := context.Background()
	if err := s.checkPacket(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var ins []store.Change
	for _, id := range []string{"a", "b", "c"} {
		ins = append(ins, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: id, Kind: "k", Priority: store.Normal, State: store.Queued, Fence: 1, RunAt: now, CreatedAt: now, UpdatedAt: now,
		}})
	}
	if _, err := s.Commit(ctx, ins); err != nil {
		t.Fatal(err)
	}
	o, err := s.Join(ctx, "multi", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := func(id string, pre uint64) statement {
		return s.updateOne(&row{id: id, fence: pre + 1, state: store.Running, preFence: pre, updatedAt: now}, "")
	}
	text, wants := s.multiQuery(&o, "", []statement{start("a", 1), start("b", 1)})
	if n := strings.Count(text, rowsGuardSQL); n != 1 {
		t.Errorf("multiQuery(renewal, 2 updates) has %d guards, want 1:\n%s", n, text)
	}
	if n := strings.Count(text, rowCountSQL); n != 2 {
		t.Errorf("multiQuery(renewal, 2 updates) checks %d counts in a WHERE, want 2:\n%s", n, text)
	}
	if want := []int64{0, 1, 1, 1, 0, 0}; !slices.Equal(wants, want) {
		t.Errorf("multiQuery() wants %v, want %v", wants, want)
	}
	state := func(id string) store.State {
		t.Helper()
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}
	// A stale fence for a: the update of b after it changes nothing.
	if err := s.multiTx(ctx, &o, []statement{start("a", 5), start("b", 1)}); !errors.Is(err, errReplan) {
		t.Errorf("multiTx(stale a, b) = %v, want errReplan", err)
	}
	if got := state("b"); got != store.Queued {
		t.Errorf("b is %s after a query stopped by a's stale fence, want Queued", got)
	}
	// Both hold: both land.
	if err := s.multiTx(ctx, &o, []statement{start("a", 1), start("b", 1)}); err != nil {
		t.Fatalf("multiTx(a, b) = %v", err)
	}
	if a, b := state("a"), state("b"); a != store.Running || b != store.Running {
		t.Errorf("a, b are %s, %s; want Running", a, b)
	}
	// An owner that left: its renewal changes no row, and the update after it nothing.
	if err := s.Leave(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := s.multiTx(ctx, &o, []statement{start("c", 1)}); !errors.Is(err, errReplan) {
		t.Errorf("multiTx(c) by an owner that left = %v, want errReplan", err)
	}
	if got := state("c"); got != store.Queued {
		t.Errorf("c is %s after a renewal that failed, want Queued", got)
	}
}
