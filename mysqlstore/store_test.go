package mysqlstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM `" + table + "`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPayloadTooLarge(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{MaxPayload: 1000})
	ctx := context.Background()
	ch := []store.Change{
		insertChange("big", make([]byte, 1001)),
		insertChange("fits", make([]byte, 1000)),
		insertChange("huge", make([]byte, 3<<20)),
	}
	res, err := s.Commit(ctx, ch)
	if err != nil {
		t.Fatalf("Commit() error = %v", err)
	}
	if !errors.Is(res[0], store.ErrPayloadTooLarge) || res[1] != nil || !errors.Is(res[2], store.ErrPayloadTooLarge) {
		t.Fatalf("Commit() = %v, want [ErrPayloadTooLarge nil ErrPayloadTooLarge]", res)
	}
	if n := countRows(t, db, s.Table()); n != 1 {
		t.Errorf("rows = %d, want 1 (only the one that fits)", n)
	}
	if _, err := s.Get(ctx, "big"); !errors.Is(err, store.ErrUnknownTask) {
		t.Errorf("Get(big) = %v, want ErrUnknownTask", err)
	}
	// A batch of nothing but oversized payloads writes nothing and needs no server round trip.
	res, err = s.Commit(ctx, ch[:1])
	if err != nil || !errors.Is(res[0], store.ErrPayloadTooLarge) {
		t.Fatalf("Commit(oversized) = %v, %v", res, err)
	}
	if n := countRows(t, db, s.Table()); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
}

func TestDefaultMaxPayload(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	res, err := s.Commit(context.Background(), []store.Change{
		insertChange("at-cap", bytes.Repeat([]byte{0xAB}, mysqlstore.MaxPayloadDefault)),
		insertChange("over", make([]byte, mysqlstore.MaxPayloadDefault+1)),
	})
	if err != nil || res[0] != nil || !errors.Is(res[1], store.ErrPayloadTooLarge) {
		t.Fatalf("Commit() = %v, %v; want [nil ErrPayloadTooLarge]", res, err)
	}
	got, err := s.Get(context.Background(), "at-cap")
	if err != nil || !bytes.Equal(got.Payload, bytes.Repeat([]byte{0xAB}, mysqlstore.MaxPayloadDefault)) {
		t.Fatalf("Get(at-cap) = %d bytes, %v", len(got.Payload), err)
	}
	if n := countRows(t, db, s.Table()); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
}

func TestMaxPayloadNeedsPacket(t *testing.T) {
	db := openDB(t)
	var packet int
	if err := db.QueryRow("SELECT @@max_allowed_packet").Scan(&packet); err != nil {
		t.Fatal(err)
	}
	capped := packet/2 > mysqlstore.MaxPayloadMax // a server whose packet holds any cap
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: tableName(t), MaxPayload: min(packet/2, mysqlstore.MaxPayloadMax), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	defer dropTables(context.Background(), db, s.Table()) //nolint:errcheck // best effort
	err = s.Migrate(context.Background())
	if capped && err != nil {
		t.Fatalf("Migrate() = %v with max_allowed_packet %d", err, packet)
	}
	if !capped && (err == nil || !strings.Contains(err.Error(), "max_allowed_packet")) {
		t.Fatalf("Migrate() = %v, want an error about max_allowed_packet", err)
	}
}

func TestUniqueKeyRefused(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	ctx := context.Background()
	res, err := s.Commit(ctx, []store.Change{keyedInsert("a", "order-1")})
	if err != nil || res[0] != nil {
		t.Fatalf("Commit(a) = %v, %v", res, err)
	}
	res, err = s.Commit(ctx, []store.Change{keyedInsert("b", "order-1")})
	if err != nil || !errors.Is(res[0], store.ErrDuplicateKey) {
		t.Fatalf("Commit(b, same key) = %v, %v; want ErrDuplicateKey", res, err)
	}
	if n := countRows(t, db, s.Table()); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
	// Even a writer that goes around the store cannot add a second live row: the unique
	// index holds.
	_, err = db.Exec("UPDATE `" + s.Table() + "` SET live_key = X'00' WHERE id = 'nope'")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("INSERT INTO `" + s.Table() + "` (id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, fence, unique_key, live_key, state, last_error, created_at, updated_at) " +
		"VALUES ('c', 'k', '', 2, 0, 0, 0, 0, 1, 'order-1', 'order-1', 2, '', 0, 0)")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		t.Fatalf("raw INSERT of a second live key = %v, want error 1062", err)
	}
}

func TestUnreachable(t *testing.T) {
	// Nothing listens on port 1: calls fail fast with ErrStoreUnavailable.
	s, err := mysqlstore.Open("root@tcp(127.0.0.1:1)/test", mysqlstore.Options{Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	start := time.Now()
	_, err = s.Commit(ctx, []store.Change{insertChange("a", nil)})
	if !errors.Is(err, store.ErrStoreUnavailable) {
		t.Fatalf("Commit() = %v, want ErrStoreUnavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Commit() took %v to fail, want fast", d)
	}
	if err := s.Migrate(ctx); !errors.Is(err, store.ErrStoreUnavailable) {
		t.Errorf("Migrate() = %v, want ErrStoreUnavailable", err)
	}
	if _, err := s.Recover(ctx); !errors.Is(err, store.ErrStoreUnavailable) {
		t.Errorf("Recover() = %v, want ErrStoreUnavailable", err)
	}
}

// syncBuffer is a log sink safe for the driver's and the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestDSNPasswordNeverShown(t *testing.T) {
	const secret = "s3cr3t-Pa55w0rd"
	ctx := context.Background()
	// A user with a password, so that a login with the right one works and a wrong one fails.
	admin := openDB(t)
	user := "axpw_" + strings.ToLower(tableName(t))[4:12]
	_, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'")
	if _, err := admin.Exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + secret + "'"); err != nil {
		t.Fatalf("CREATE USER: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	if _, err := admin.Exec("GRANT SELECT ON test.* TO '" + user + "'@'%'"); err != nil {
		t.Fatalf("GRANT: %v", err)
	}
	dsns := map[string]string{
		"closed port":    "root:" + secret + "@tcp(127.0.0.1:1)/test",
		"wrong password": user + ":" + secret + "x@tcp(127.0.0.1:3306)/test",
		"no such db":     user + ":" + secret + "@tcp(127.0.0.1:3306)/no_such_db_" + secret,
		"no privilege":   user + ":" + secret + "@tcp(127.0.0.1:3306)/test", // may SELECT, not CREATE
		"bad param":      user + ":" + secret + "@tcp(127.0.0.1:3306)/test?parseTime=" + secret,
		"bad address":    user + ":" + secret + "@tcp(127.0.0.1:3306/test",
		"unescaped":      user + ":" + secret + "@tcp(127.0.0.1:3306)/test?x=%zz" + secret,
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var errs []error
			s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: tableName(t), Logger: logger, Retries: 1})
			errs = append(errs, err)
			if err == nil {
				errs = append(errs, s.Migrate(ctx))
				_, err = s.Commit(ctx, []store.Change{insertChange("a", nil)})
				errs = append(errs, err)
				_, err = s.Recover(ctx)
				errs = append(errs, err)
				errs = append(errs, s.Close())
			}
			t.Logf("errors: %v", errs)
			failed := false
			for _, err := range errs {
				if err == nil {
					continue
				}
				failed = true
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), dsn) {
					t.Errorf("error shows the password: %v", err)
				}
			}
			if !failed {
				t.Errorf("no call failed with DSN %q", name)
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("log shows the password:\n%s", logs.String())
			}
		})
	}
}

// TestRetentionPurger: the purger deletes the completed tasks last changed and due
// before Retention, and keeps the others: one that ended recently, a dead letter, and
// one that ended long ago but is due in the future (canceled while it waited), which
// PurgeCompleted deletes.
func TestRetentionPurger(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{Retention: time.Hour, PurgeInterval: 20 * time.Millisecond})
	ctx := context.Background()
	old := time.Now().Add(-2 * time.Hour)
	ch := []store.Change{insertChange("old", nil), insertChange("new", nil), insertChange("dead", nil), insertChange("future", nil)}
	for i := range ch {
		ch[i].Task.UpdatedAt, ch[i].Task.RunAt = old, old
	}
	ch[3].Task.RunAt = time.Now().Add(time.Hour)
	ch = append(ch,
		store.Change{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: "old", UpdatedAt: old}},
		store.Change{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: "new", UpdatedAt: time.Now()}},
		store.Change{Op: store.OpFail, Fence: 1, Task: store.StoredTask{ID: "dead", UpdatedAt: old}},
		store.Change{Op: store.OpCancel, Fence: 1, Task: store.StoredTask{ID: "future", UpdatedAt: old}})
	if res, err := s.Commit(ctx, ch); err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	axtest.Eventually(t, func() bool { return countRows(t, db, s.Table()) == 3 },
		"the purger to delete the old completed task")
	for _, id := range []string{"new", "dead", "future"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("Get(%q) = %v; it must survive the purge", id, err)
		}
	}
	if n, err := s.PurgeCompleted(ctx, time.Now().Add(-time.Hour)); n != 1 || err != nil {
		t.Errorf("PurgeCompleted() = %d, %v; want 1, the task canceled before it was due", n, err)
	}
}

func TestDropCompleted(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{DropCompleted: true})
	ctx := context.Background()
	start := func(id string) store.Change {
		return store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: testNow}}
	}
	end := func(op store.ChangeOp, id string) store.Change {
		return store.Change{Op: op, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: testNow}}
	}
	states := func() map[string]store.State {
		t.Helper()
		got := map[string]store.State{}
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			if tk, err := s.Get(ctx, id); err == nil {
				got[id] = tk.State
			} else if !errors.Is(err, store.ErrUnknownTask) {
				t.Fatalf("Get(%q) = %v", id, err)
			}
		}
		return got
	}
	tests := []struct {
		name  string
		batch []store.Change
		want  map[string]store.State // every stored task afterwards
	}{
		{"inserted and completed: not written", []store.Change{
			insertChange("a", []byte("a")), start("a"), end(store.OpSucceed, "a"),
			insertChange("b", nil), start("b"), end(store.OpCancel, "b"),
		}, map[string]store.State{}},
		{"replayed: still not written", []store.Change{
			insertChange("a", []byte("a")), start("a"), end(store.OpSucceed, "a"),
		}, map[string]store.State{}},
		{"dead letters, keyed and live tasks are written", []store.Change{
			insertChange("c", nil), start("c"), end(store.OpFail, "c"),
			keyedInsert("d", "kd"), start("d"), end(store.OpSucceed, "d"),
			insertChange("e", nil),
			insertChange("f", nil), start("f"),
		}, map[string]store.State{"c": store.Failed, "d": store.Succeeded, "e": store.Queued, "f": store.Running}},
		{"a stored task inserted again is changed", []store.Change{
			insertChange("e", nil), start("e"), end(store.OpSucceed, "e"),
			insertChange("g", nil), start("g"), end(store.OpSucceed, "g"),
		}, map[string]store.State{"c": store.Failed, "d": store.Succeeded, "e": store.Succeeded, "f": store.Running}},
		{
			"completed in a later batch: kept",
			[]store.Change{end(store.OpSucceed, "f")},
			map[string]store.State{"c": store.Failed, "d": store.Succeeded, "e": store.Succeeded, "f": store.Succeeded},
		},
	}
	for _, tt := range tests {
		res, err := s.Commit(ctx, tt.batch)
		if err != nil || errors.Join(res...) != nil {
			t.Fatalf("%s: Commit() = %v, %v", tt.name, res, err)
		}
		got := states()
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: stored tasks = %v, want %v", tt.name, got, tt.want)
		}
		if n := countRows(t, db, s.Table()); n != len(tt.want) {
			t.Errorf("%s: %d rows, want %d", tt.name, n, len(tt.want))
		}
	}
}

// TestResultCaps: a store keeps the last Options.AttemptsKept records, and refuses a
// result over Options.MaxResult, which it reports as a store.ResultLimiter.
func TestResultCaps(t *testing.T) {
	s, _ := setup(t, mysqlstore.Options{MaxResult: 8, AttemptsKept: 2})
	var _ store.ResultLimiter = s
	if got := s.MaxResult(); got != 8 {
		t.Fatalf("MaxResult() = %d, want 8", got)
	}
	ctx := context.Background()
	now := time.UnixMilli(10_000)
	changes := []store.Change{{Op: store.OpInsert, Task: store.StoredTask{ID: "a", Kind: "k", State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now}}}
	for n := 1; n <= 3; n++ {
		changes = append(changes,
			store.Change{Op: store.OpStart, Fence: uint64(n), Task: store.StoredTask{ID: "a", Fence: uint64(n + 1), Attempt: n, UpdatedAt: now}},
			store.Change{
				Op: store.OpRetry, Fence: uint64(n + 1), Task: store.StoredTask{ID: "a", RunAt: now, LastError: "e", UpdatedAt: now},
				Attempt: store.Attempt{Number: n, Start: now, End: now, Outcome: store.Failed, Error: "e"},
			})
	}
	if res, err := s.Commit(ctx, changes); err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	big := store.Change{Op: store.OpSucceed, Fence: 4, Task: store.StoredTask{ID: "a", Result: []byte("123456789"), UpdatedAt: now}}
	res, err := s.Commit(ctx, []store.Change{big})
	if err != nil || !errors.Is(res[0], store.ErrPayloadTooLarge) || !strings.Contains(res[0].Error(), "Options.MaxResult is 8") {
		t.Fatalf("Commit(result of 9 bytes) = %v, %v; want ErrPayloadTooLarge naming Options.MaxResult", res, err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.Retrying || len(got.History) != 2 || got.History[0].Number != 2 || got.History[1].Number != 3 {
		t.Fatalf("Get() = %s, history %+v; want retrying with attempts 2 and 3", got.State, got.History)
	}
}

// TestNoHistory: with Options.AttemptsKept -1 the store writes no attempt records.
func TestNoHistory(t *testing.T) {
	s, _ := setup(t, mysqlstore.Options{AttemptsKept: -1})
	ctx := context.Background()
	now := time.UnixMilli(10_000)
	changes := []store.Change{
		{Op: store.OpInsert, Task: store.StoredTask{ID: "a", Kind: "k", State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now}},
		{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: "a", Fence: 2, Attempt: 1, UpdatedAt: now}},
		{
			Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: "a", Result: []byte("r"), UpdatedAt: now},
			Attempt: store.Attempt{Number: 1, Start: now, End: now, Outcome: store.Succeeded},
		},
	}
	if res, err := s.Commit(ctx, changes); err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil || got.History != nil || string(got.Result) != "r" {
		t.Fatalf("Get() = history %+v, result %q, %v; want none, r", got.History, got.Result, err)
	}
}

// TestOpenKeepsIdleConnections: a store made by Open keeps the connections its
// callers in flight at once used, where database/sql's default of 2 idle ones
// would close (and later open again) all but two after every burst.
func TestOpenKeepsIdleConnections(t *testing.T) {
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: tableName(t), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	const callers, rounds = 12, 20
	for range rounds {
		// All callers hold a connection at once: each waits for the others to
		// have theirs (a barrier inside one transaction each) before letting go.
		var held, release sync.WaitGroup
		held.Add(callers)
		release.Add(1)
		errs := make(chan error, callers)
		for range callers {
			go func() {
				tx, err := s.DB().BeginTx(ctx, nil)
				held.Done()
				if err != nil {
					errs <- err
					return
				}
				release.Wait()
				errs <- tx.Rollback()
			}()
		}
		held.Wait()
		release.Done()
		for range callers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.DB().Stats()
	if st.MaxIdleClosed != 0 || st.OpenConnections != callers {
		t.Errorf("after %d bursts of %d callers: %d connections closed for want of an idle slot, %d open; want 0 and %d",
			rounds, callers, st.MaxIdleClosed, st.OpenConnections, callers)
	}
}
