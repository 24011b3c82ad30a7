package e2e

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// Environment of the children of the transactional-submit and window tests.
const (
	envTxChild     = "AX_E2E_TX_CHILD" // "submit" or "window": which child runs
	envTxChildTabl = "AX_E2E_TX_TABLE"
)

// txStore opens and migrates a store on table, closed in t.Cleanup.
func txStore(t *testing.T, table string) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// runSet is a durable kind that records its runs by payload and signals each.
type runSet struct {
	mu   sync.Mutex
	runs map[string]int
	ran  chan string
}

func newRunSet() *runSet { return &runSet{runs: map[string]int{}, ran: make(chan string, 16)} }

func (r *runSet) run(_ context.Context, p []byte) error {
	r.mu.Lock()
	r.runs[string(p)]++
	r.mu.Unlock()
	r.ran <- string(p)
	return nil
}

// TestSubmitTxCrash: a child process submits three tasks in its own transaction
// (beside a row of its own table), commits, and is killed with SIGKILL before any
// kernel claims them (it runs none). The rows are in the pool; a kernel started after
// the crash claims them and runs each once.
func TestSubmitTxCrash(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "subtx")
	s := txStore(t, table)
	orders := "`" + table + "_orders`"
	if _, err := db.Exec("CREATE TABLE " + orders + " (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + orders) })

	c := spawnChild(t, "TestSubmitTxChild", 1, envTxChild+"=submit", envTxChildTabl+"="+table)
	c.waitSignal(t) // committed
	c.kill(t, 0)

	var pool, orderRows int
	if err := db.QueryRow("SELECT COUNT(*) FROM `" + table + "` WHERE owner = 0 AND state IN (1, 2)").Scan(&pool); err != nil || pool != 3 {
		t.Fatalf("pool rows after the crash = %d, %v; want 3", pool, err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM " + orders).Scan(&orderRows); err != nil || orderRows != 1 {
		t.Fatalf("order rows = %d, %v; want 1", orderRows, err)
	}
	k, err := kernel.New(kernel.Config{Store: s, Owner: "e2e-subtx-after"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	r := newRunSet()
	if err := k.Register("tx-job", r.run); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		axtest.WaitOrTimeout(t, r.ran, "a task submitted before the crash")
	}
	pollUntil(t, "every task Succeeded", 10*time.Millisecond, 10*time.Second, func() (bool, error) {
		var done int
		err := db.QueryRow("SELECT COUNT(*) FROM `"+table+"` WHERE state = ?", codeSucceeded).Scan(&done)
		return done == 3, err
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range []string{"a", "b-keyed", "c-delayed"} {
		if r.runs[p] != 1 {
			t.Errorf("task %s ran %d times, want 1", p, r.runs[p])
		}
	}
}

// TestSubmitTxChild is the child of TestSubmitTxCrash and TestUniqueWindowProcesses.
func TestSubmitTxChild(t *testing.T) {
	role := os.Getenv(envTxChild)
	if role == "" {
		return
	}
	table := os.Getenv(envTxChildTabl)
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()
	ctx := context.Background()
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	switch role {
	case "submit":
		db, err := sql.Open("mysql", testDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO `"+table+"_orders` (id) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		_, err = s.SubmitTx(ctx, tx,
			mysqlstore.TxTask{Kind: "tx-job", Payload: []byte("a")},
			mysqlstore.TxTask{Kind: "tx-job", Payload: []byte("b-keyed"), UniqueKey: "order-1"},
			mysqlstore.TxTask{Kind: "tx-job", Payload: []byte("c-delayed"), Delay: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	case "window":
		k, err := kernel.New(kernel.Config{Store: s, Owner: "e2e-window-child"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k.Close() }()
		if err := k.Register("job", func(context.Context, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		h, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "job", UniqueKey: "hourly", UniqueFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, "the end stored", time.Millisecond, 10*time.Second, func() (bool, error) {
			got, err := s.Get(ctx, h.ID())
			return got.State == store.Succeeded, err
		})
	}
	_, _ = progress.Write([]byte{'k'})
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills it or goes away
}

// TestUniqueWindowProcesses: a child process runs a durable task whose key holds for
// an hour after its end; in this process a kernel's submit of the key is refused
// naming the child's task, and a kernel whose clock runs two hours ahead (past the
// window) takes the key and runs its task.
func TestUniqueWindowProcesses(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "uwin")
	s := txStore(t, table)
	c := spawnChild(t, "TestSubmitTxChild", 1, envTxChild+"=window", envTxChildTabl+"="+table)
	c.waitSignal(t)
	var holder string
	if err := db.QueryRow("SELECT id FROM `" + table + "` WHERE unique_key = 'hourly'").Scan(&holder); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k, err := kernel.New(kernel.Config{Store: s, Owner: "e2e-window-parent"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	if err := k.Register("job", func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	_, err = k.SubmitDurable(ctx, kernel.DurableTask{Kind: "job", UniqueKey: "hourly"})
	var dk *store.DuplicateKeyError
	if !errors.As(err, &dk) || dk.Holder != holder {
		t.Fatalf("SubmitDurable() within the window = %v, want a DuplicateKeyError naming %s", err, holder)
	}
	s2 := txStore(t, table)
	later, err := kernel.New(kernel.Config{Store: s2, Owner: "e2e-window-later", Clock: axtest.SkewClock{Clock: clock.New(), Off: 2 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = later.Close() }()
	if err := later.Register("job", func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h, err := later.SubmitDurable(ctx, kernel.DurableTask{Kind: "job", UniqueKey: "hourly"})
	if err != nil {
		t.Fatalf("SubmitDurable() after the window = %v", err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
