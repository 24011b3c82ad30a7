package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// stuckLease is the lease of the owner whose transaction is left open in these tests.
const stuckLease = 500 * time.Millisecond

// stuckBundle is an owner a with stuckLease and five live tasks, and a rescuer b.
type stuckBundle struct {
	s    *mysqlstore.Store
	db   *sql.DB
	logs *syncBuffer
	a, b store.Owner
	ids  []string
}

func setupStuck(t *testing.T) *stuckBundle {
	t.Helper()
	logs := &syncBuffer{}
	s, db := setup(t, mysqlstore.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := context.Background()
	a, err := s.Join(ctx, "a", stuckLease)
	if err != nil {
		t.Fatal(err)
	}
	var cs []store.Change
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		ids = append(ids, id)
		cs = append(cs, insertChange(id, nil))
	}
	if res, err := s.CommitAs(ctx, a, cs); err != nil || errors.Join(res...) != nil {
		t.Fatalf("CommitAs() = %v, %v", res, err)
	}
	b, err := s.Join(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return &stuckBundle{s: s, db: db, logs: logs, a: a, b: b, ids: ids}
}

// openTx begins a transaction on a connection of its own and returns it with the
// connection's ID; t.Cleanup rolls it back and closes the connection.
func openTx(t *testing.T, db *sql.DB) (*sql.Tx, int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tx.Rollback()
		_ = conn.Close()
	})
	return tx, id
}

// rescueUntil calls Rescue for b every 50 ms until it returns tasks or within has passed,
// and fails the test when a call takes longer than a few seconds (a lock wait).
func (tb *stuckBundle) rescueUntil(t *testing.T, within time.Duration) []store.StoredTask {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t0 := time.Now()
		got, err := tb.s.Rescue(ctx, tb.b, 0)
		cancel()
		if err != nil {
			t.Fatalf("Rescue() error = %v after %v", err, time.Since(t0))
		}
		if d := time.Since(t0); d > 3*time.Second {
			t.Fatalf("Rescue() took %v", d)
		}
		if len(got) > 0 || time.Now().After(deadline) {
			return got
		}
		wait := time.NewTimer(50 * time.Millisecond)
		<-wait.C
	}
}

// connected reports whether the server lists connection id.
func connected(t *testing.T, db *sql.DB, id int64) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestRescueKillsStuckCommit leaves a CommitAs of owner a open, as a process stopped
// between its statements leaves it: its transaction renewed a's lease (locking a's row)
// and changed one of a's tasks, and its client sends nothing more. Rescue by b must kill
// that connection once even the renewal's lease ended a lease ago, and then take a's
// tasks, each call returning promptly; a's late commit is refused.
func TestRescueKillsStuckCommit(t *testing.T) {
	tb := setupStuck(t)
	tx, stuckID := openTx(t, tb.db)
	owners := "`" + tb.s.Table() + "_owners`"
	renewed := time.Now()
	// What CommitAs sends first (see renew), then a task write of its batch.
	if _, err := tx.Exec("UPDATE "+owners+" SET expires_at = UTC_TIMESTAMP(6) + INTERVAL lease_us MICROSECOND, "+
		"conn_id = CONNECTION_ID() WHERE epoch = ? AND ended = 0 AND expires_at > UTC_TIMESTAMP(6)", tb.a.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE `"+tb.s.Table()+"` SET version = version + 1 WHERE id = ?", tb.ids[0]); err != nil {
		t.Fatal(err)
	}

	got := tb.rescueUntil(t, 15*time.Second)
	took := time.Since(renewed)
	if len(got) != len(tb.ids) {
		t.Fatalf("Rescue() = %d tasks %v after %v, want a's %d", len(got), got, took, len(tb.ids))
	}
	if took < 2*stuckLease {
		t.Errorf("rescued %v after the stuck renewal, want no sooner than its lease ended a lease ago (%v)", took, 2*stuckLease)
	}
	for _, task := range got {
		if task.Fence>>32 <= tb.b.Epoch {
			t.Errorf("%s: fence %#x, want one of an epoch above b's %d", task.ID, task.Fence, tb.b.Epoch)
		}
	}
	if n := tb.s.Kills(); n != 1 {
		t.Errorf("Kills() = %d, want 1", n)
	}
	if connected(t, tb.db, stuckID) {
		t.Errorf("connection %d of the open transaction is still there", stuckID)
	}
	if !strings.Contains(tb.logs.String(), "killed the connection") || !strings.Contains(tb.logs.String(), fmt.Sprintf("connection=%d", stuckID)) {
		t.Errorf("log does not tell of the kill of connection %d:\n%s", stuckID, tb.logs.String())
	}
	if err := tx.Commit(); err == nil {
		t.Error("Commit() of the killed transaction = nil, want an error")
	}
	if _, err := tb.s.CommitAs(context.Background(), tb.a, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("CommitAs() by a after the rescue = %v, want ErrLeaseLost", err)
	}
	os, err := tb.s.Owners(context.Background())
	if err != nil || len(os) != 1 || os[0].Epoch != tb.b.Epoch || os[0].Tasks != len(tb.ids) {
		t.Errorf("Owners() = %+v, %v; want only b, with the %d tasks", os, err, len(tb.ids))
	}
}

// TestRescueSparesLockWithoutWrite holds a's row in a transaction that locked it without
// writing it (as a rescue or any SELECT … FOR UPDATE does), long after a's lease ended.
// Nothing names that connection as the writer, so Rescue must kill nothing: neither it
// nor the connection that last renewed a's lease. Once it ends, Rescue takes a's tasks.
func TestRescueSparesLockWithoutWrite(t *testing.T) {
	tb := setupStuck(t)
	var lastWriter int64
	owners := "`" + tb.s.Table() + "_owners`"
	if err := tb.db.QueryRow("SELECT conn_id FROM "+owners+" WHERE epoch = ?", tb.a.Epoch).Scan(&lastWriter); err != nil {
		t.Fatal(err)
	}
	writerThere := connected(t, tb.db, lastWriter)
	tx, holderID := openTx(t, tb.db)
	if _, err := tx.Exec("SELECT epoch FROM "+owners+" WHERE epoch = ? FOR UPDATE", tb.a.Epoch); err != nil {
		t.Fatal(err)
	}
	// Past the time a stuck renewal would be killed: the lease ended a lease ago, and
	// the holder idles for more than a second.
	if got := tb.rescueUntil(t, 2*stuckLease+2*time.Second); len(got) != 0 {
		t.Fatalf("Rescue() while a's row is locked = %v, want none", got)
	}
	if n := tb.s.Kills(); n != 0 {
		t.Errorf("Kills() = %d, want 0; log:\n%s", n, tb.logs.String())
	}
	if !connected(t, tb.db, holderID) {
		t.Errorf("connection %d holding a's row was killed", holderID)
	}
	if writerThere && !connected(t, tb.db, lastWriter) {
		t.Errorf("connection %d, a's last renewer, was killed", lastWriter)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := tb.rescueUntil(t, 5*time.Second); len(got) != len(tb.ids) {
		t.Fatalf("Rescue() after the lock ended = %d tasks, want %d", len(got), len(tb.ids))
	}
}
