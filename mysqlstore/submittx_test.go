package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// runLog is a durable kind that records each run of a payload and signals it.
type runLog struct {
	mu   sync.Mutex
	runs map[string]int
	ran  chan string
}

func newRunLog() *runLog { return &runLog{runs: map[string]int{}, ran: make(chan string, 100)} }

func (r *runLog) run(_ context.Context, payload []byte) error {
	r.mu.Lock()
	r.runs[string(payload)]++
	r.mu.Unlock()
	r.ran <- string(payload)
	return nil
}

func (r *runLog) count(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[p]
}

// ordersTable makes the caller's own table of a test, dropped at its end.
func ordersTable(t *testing.T, db *sql.DB, s *mysqlstore.Store) string {
	t.Helper()
	name := "`" + s.Table() + "_orders`"
	if _, err := db.Exec("CREATE TABLE " + name + " (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + name) })
	return name
}

// submitOrder writes order id to orders and submits tasks in one transaction of the
// caller, committed when commit is true, rolled back otherwise.
func submitOrder(t *testing.T, db *sql.DB, s *mysqlstore.Store, orders string, id int, commit bool, tasks ...mysqlstore.TxTask) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", orders, id)); err != nil {
		t.Fatal(err)
	}
	ids, err := s.SubmitTx(ctx, tx, tasks...)
	if err != nil {
		t.Fatalf("SubmitTx() = %v", err)
	}
	if len(ids) != len(tasks) {
		t.Fatalf("SubmitTx() returned %d IDs for %d tasks", len(ids), len(tasks))
	}
	if !commit {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s.Notify()
	return ids
}

func newTxKernel(t *testing.T, s *mysqlstore.Store, owner string, r *runLog) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(kernel.Config{Store: s, Owner: owner, MaxConcurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	if err := k.Register("job", r.run); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSubmitTxRollback: tasks submitted in a transaction that rolls back leave no row
// and never run; a task committed after them runs (the claimer looked after the
// rollback).
func TestSubmitTxRollback(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	orders := ordersTable(t, db, s)
	r := newRunLog()
	newTxKernel(t, s, "tx-rollback", r)
	gone := submitOrder(t, db, s, orders, 1, false, mysqlstore.TxTask{Kind: "job", Payload: []byte("rolled-back")},
		mysqlstore.TxTask{Kind: "job", Payload: []byte("rolled-back-keyed"), UniqueKey: "order-1"})
	s.Notify()
	submitOrder(t, db, s, orders, 2, true, mysqlstore.TxTask{Kind: "job", Payload: []byte("marker"), UniqueKey: "order-1"})
	if got := axtest.WaitOrTimeout(t, r.ran, "the marker task"); got != "marker" {
		t.Fatalf("ran %q, want marker", got)
	}
	for _, id := range gone {
		if _, err := s.Get(context.Background(), id); !errors.Is(err, store.ErrUnknownTask) {
			t.Errorf("Get(%s) of a rolled-back submit = %v, want ErrUnknownTask", id, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM `" + s.Table() + "`").Scan(&n); err != nil || n != 1 {
		t.Fatalf("task rows = %d, %v; want 1 (the marker)", n, err)
	}
	if r.count("rolled-back") != 0 || r.count("rolled-back-keyed") != 0 {
		t.Fatal("a rolled-back task ran")
	}
}

// TestSubmitTxCommitRunsOnce: tasks committed with the caller's row are claimed by two
// kernels on the table and each runs exactly once; the store shows them Succeeded
// after one attempt, and the caller's row is there.
func TestSubmitTxCommitRunsOnce(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	s2, err := mysqlstore.New(db, mysqlstore.Options{Table: s.Table(), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	orders := ordersTable(t, db, s)
	r := newRunLog()
	newTxKernel(t, s, "tx-once-a", r)
	newTxKernel(t, s2, "tx-once-b", r)
	var tasks []mysqlstore.TxTask
	for i := range 20 {
		tt := mysqlstore.TxTask{Kind: "job", Payload: fmt.Appendf(nil, "t%02d", i), Priority: store.Priority(1 + i%3)}
		if i%4 == 0 {
			tt.UniqueKey = fmt.Sprintf("once-%d", i)
		}
		if i == 7 {
			tt.Delay = 20 * time.Millisecond
		}
		tasks = append(tasks, tt)
	}
	ids := submitOrder(t, db, s, orders, 1, true, tasks...)
	for range tasks {
		axtest.WaitOrTimeout(t, r.ran, "a committed task")
	}
	ctx := context.Background()
	axtest.Eventually(t, func() bool {
		for _, id := range ids {
			if got, err := s.Get(ctx, id); err != nil || got.State != store.Succeeded {
				return false
			}
		}
		return true
	}, "every task Succeeded in the store")
	for i, id := range ids {
		got, err := s.Get(ctx, id)
		if err != nil || got.Attempt != 1 || got.UniqueKey != tasks[i].UniqueKey || got.Priority != tasks[i].Priority {
			t.Errorf("Get(%s) = %+v, %v; want one attempt, key %q, priority %v", id, got, err, tasks[i].UniqueKey, tasks[i].Priority)
		}
		if n := r.count(string(tasks[i].Payload)); n != 1 {
			t.Errorf("task %s ran %d times, want 1", tasks[i].Payload, n)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + orders).Scan(&n); err != nil || n != 1 {
		t.Fatalf("orders = %d, %v; want 1", n, err)
	}
}

// TestSubmitTxUniqueRace: 50 transactions submit tasks with the same unique keys at
// once (and a row of their own each); each commits when SubmitTx succeeded and rolls
// back otherwise. Exactly one task per key is stored, every refusal is a
// DuplicateKeyError naming the stored task, and the winner's row is the only one.
func TestSubmitTxUniqueRace(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	orders := ordersTable(t, db, s)
	const txs = 50
	keys := []string{"race-a", "race-b", "race-c"}
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	results := make([][]string, txs)
	errs := make([]error, txs)
	for i := range txs {
		wg.Go(func() {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer tx.Rollback() //nolint:errcheck // a no-op after Commit
			<-start
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", orders, i)); err != nil {
				errs[i] = err
				return
			}
			var tasks []mysqlstore.TxTask
			for _, k := range keys {
				tasks = append(tasks, mysqlstore.TxTask{Kind: "job", UniqueKey: k, Payload: []byte(k)})
			}
			ids, err := s.SubmitTx(ctx, tx, tasks...)
			if err != nil {
				errs[i] = err
				return
			}
			if err := tx.Commit(); err != nil {
				errs[i] = err
				return
			}
			results[i] = ids
		})
	}
	close(start)
	wg.Wait()
	var winners []int
	for i := range txs {
		if results[i] != nil {
			winners = append(winners, i)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d transactions stored their tasks, want exactly 1 (errors: %v)", len(winners), errors.Join(errs...))
	}
	won := results[winners[0]]
	for i, err := range errs {
		if i == winners[0] {
			continue
		}
		var dk *store.DuplicateKeyError
		if !errors.As(err, &dk) || dk.Holder != won[0] {
			t.Errorf("transaction %d: %v, want a DuplicateKeyError naming %s", i, err, won[0])
		}
	}
	rows, err := db.Query("SELECT unique_key, COUNT(*) FROM `" + s.Table() + "` GROUP BY unique_key")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	n := 0
	for rows.Next() {
		var k string
		var c int
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		if c != 1 {
			t.Errorf("key %q: %d rows, want 1", k, c)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != len(keys) {
		t.Fatalf("%d keys stored, %v; want %d", n, err, len(keys))
	}
	var o int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + orders).Scan(&o); err != nil || o != 1 {
		t.Fatalf("orders = %d, %v; want 1", o, err)
	}
}

// TestSubmitTxUniqueWindow: a key held by an ended task in its window refuses a
// transactional submit naming the holder; one whose window is over is taken.
func TestSubmitTxUniqueWindow(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	ended := func(id, key string, until time.Time) []store.Change {
		return []store.Change{
			{Op: store.OpInsert, Task: store.StoredTask{
				ID: id, Kind: "job", UniqueKey: key, UniqueUntil: until,
				State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now,
			}},
			{Op: store.OpCancel, Fence: 1, Task: store.StoredTask{ID: id, UpdatedAt: now}},
		}
	}
	res, err := s.Commit(ctx, append(ended("held", "in-window", now.Add(time.Hour)), ended("over", "past-window", now.Add(-time.Second))...))
	if err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	_, err = s.SubmitTx(ctx, tx, mysqlstore.TxTask{Kind: "job", UniqueKey: "in-window"})
	var dk *store.DuplicateKeyError
	if !errors.As(err, &dk) || dk.Holder != "held" || !errors.Is(err, store.ErrDuplicateKey) {
		t.Fatalf("SubmitTx(key in its window) = %v, want a DuplicateKeyError naming held", err)
	}
	ids, err := s.SubmitTx(ctx, tx, mysqlstore.TxTask{Kind: "job", UniqueKey: "past-window", UniqueFor: time.Minute})
	if err != nil {
		t.Fatalf("SubmitTx(key past its window) = %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, ids[0])
	if err != nil || got.State != store.Queued || got.UniqueFor != time.Minute {
		t.Fatalf("Get(%s) = %+v, %v; want Queued with UniqueFor 1m", ids[0], got, err)
	}
	// The old holder gave its key up: a Commit with the key meets the new one.
	res, err = s.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
		ID: "late", Kind: "job", UniqueKey: "past-window",
		State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now,
	}}})
	if err != nil || !errors.As(res[0], &dk) || dk.Holder != ids[0] {
		t.Fatalf("Commit(insert past-window) = %v, %v; want a DuplicateKeyError naming %s", res, err, ids[0])
	}
}

// TestSubmitTxBadInput: refused tasks name their index and field, and nothing of the
// call is written (a call of several tasks is all or nothing).
func TestSubmitTxBadInput(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{MaxPayload: 16})
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // rolled back at the end
	for _, tc := range []struct {
		name  string
		task  mysqlstore.TxTask
		field string
		is    error
	}{
		{"empty kind", mysqlstore.TxTask{}, "TxTask.Kind", store.ErrInvalidChange},
		{"long kind", mysqlstore.TxTask{Kind: strings.Repeat("k", store.KindMax+1)}, "TxTask.Kind", store.ErrInvalidChange},
		{"negative delay", mysqlstore.TxTask{Kind: "job", Delay: -1}, "TxTask.Delay", store.ErrInvalidChange},
		{"delay and at", mysqlstore.TxTask{Kind: "job", Delay: 1, At: time.Now()}, "TxTask.At", store.ErrInvalidChange},
		{"payload", mysqlstore.TxTask{Kind: "job", Payload: make([]byte, 17)}, "TxTask.Payload", store.ErrPayloadTooLarge},
		{"long group", mysqlstore.TxTask{Kind: "job", Group: strings.Repeat("g", store.GroupNameMax+1)}, "TxTask.Group", store.ErrInvalidChange},
		{"key without group", mysqlstore.TxTask{Kind: "job", Key: "k"}, "TxTask.Key", store.ErrInvalidChange},
		{"negative window", mysqlstore.TxTask{Kind: "job", UniqueKey: "u", UniqueFor: -1}, "TxTask.UniqueFor", store.ErrInvalidChange},
		{"window without key", mysqlstore.TxTask{Kind: "job", UniqueUntil: time.Now()}, "TxTask.UniqueUntil", store.ErrInvalidChange},
		{"bad priority", mysqlstore.TxTask{Kind: "job", Priority: 9}, "TxTask.Priority", store.ErrInvalidChange},
	} {
		ids, err := s.SubmitTx(ctx, tx, mysqlstore.TxTask{Kind: "job"}, tc.task)
		if ids != nil || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), "tasks[1]") || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: SubmitTx() = %v, %v; want %v naming tasks[1] and %s", tc.name, ids, err, tc.is, tc.field)
		}
	}
	if _, err := s.SubmitTx(ctx, nil, mysqlstore.TxTask{Kind: "job"}); err == nil {
		t.Error("SubmitTx(nil tx) succeeded")
	}
	// A duplicate key in a call of several: the call's other inserts are undone.
	if _, err := s.SubmitTx(ctx, tx, mysqlstore.TxTask{Kind: "job", UniqueKey: "dup"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitTx(ctx, tx, mysqlstore.TxTask{Kind: "job"}, mysqlstore.TxTask{Kind: "job", UniqueKey: "dup"}); !errors.Is(err, store.ErrDuplicateKey) {
		t.Fatalf("SubmitTx(a held key) = %v, want ErrDuplicateKey", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+s.Table()+"`").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in tx = %d, %v; want 1 (the first keyed task)", n, err)
	}
}

// TestNotify: each Notify closes the channel PoolWake returned before it, and only
// that one.
func TestNotify(t *testing.T) {
	s, _ := setup(t, mysqlstore.Options{})
	w := s.PoolWake()
	if w2 := s.PoolWake(); w2 != w {
		t.Fatal("PoolWake() returned another channel before a Notify")
	}
	s.Notify()
	axtest.WaitOrTimeout(t, w, "the wake-up")
	next := s.PoolWake()
	select {
	case <-next:
		t.Fatal("the channel after a Notify is closed already")
	default:
	}
	s.Notify()
	s.Notify() // nothing waits: no panic
	axtest.WaitOrTimeout(t, next, "the second wake-up")
}

// TestSubmitTxHeaders: a task's headers (a trace context) are stored with it, and a
// store returns them; headers over store.HeadersMax are refused, naming the field.
func TestSubmitTxHeaders(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	orders := ordersTable(t, db, s)
	h := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	ids := submitOrder(t, db, s, orders, 1, true, mysqlstore.TxTask{Kind: "job", Headers: h})
	got, err := s.Get(context.Background(), ids[0])
	if err != nil || !maps.Equal(got.Headers, h) {
		t.Fatalf("Get() = headers %v, %v; want %v", got.Headers, err, h)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // the refusal leaves it open
	big := map[string]string{"k": strings.Repeat("v", store.HeadersMax)}
	if _, err := s.SubmitTx(context.Background(), tx, mysqlstore.TxTask{Kind: "job", Headers: big}); err == nil || !strings.Contains(err.Error(), "Headers") {
		t.Fatalf("SubmitTx(headers over HeadersMax) = %v, want an error naming Headers", err)
	}
}
