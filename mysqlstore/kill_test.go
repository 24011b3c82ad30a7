package mysqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// idConnector records the server's connection ID of every connection it opens, so that a
// test can KILL them from another session.
type idConnector struct {
	driver.Connector
	mu  sync.Mutex
	ids []int64
}

func (c *idConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := conn.(driver.QueryerContext).QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	dest := make([]driver.Value, 1)
	err = rows.Next(dest)
	_ = rows.Close()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	id, _ := dest[0].(int64)
	c.mu.Lock()
	c.ids = append(c.ids, id)
	c.mu.Unlock()
	return conn, nil
}

func (c *idConnector) last(n int) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.ids[max(0, len(c.ids)-n):]...)
}

// TestKilledConnections kills the store's connections with KILL from another session
// while it commits batches of inserts, starts and completions. Each batch is committed
// again until it succeeds, as the kernel does. Whether a killed commit had landed or not,
// the retry must report every change applied (no ErrDuplicateKey for its own keyed
// inserts, no ErrStaleFence for its own starts), and the table must end exactly as if
// each batch had been committed once: no task twice, none lost. A failure that says
// nothing applied (ErrStoreUnavailable, where no try of the batch returned
// ErrOutcomeUnknown) must not have landed.
func TestKilledConnections(t *testing.T) {
	for _, retries := range []int{-1, 0} { // the caller's retries only; the store's own too
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			testKilledConnections(t, retries)
		})
	}
}

func testKilledConnections(t *testing.T, retries int) {
	admin := openDB(t)
	cfg, err := mysql.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = discard{}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn := &idConnector{Connector: inner}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(2)
	table := tableName(t)
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1, Retries: retries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		_ = dropTables(context.Background(), admin, table)
	})
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// The killer: KILL one of the store's recent connections every 3–25 ms.
	stop := make(chan struct{})
	var kills, killErrs int
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 4))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(3000+rng.IntN(22000)) * time.Microsecond):
			}
			ids := conn.last(2)
			if len(ids) == 0 {
				continue
			}
			if _, err := admin.Exec(fmt.Sprintf("KILL %d", ids[rng.IntN(len(ids))])); err != nil {
				killErrs++ // "Unknown thread id": that one is gone already
			} else {
				kills++
			}
		}
	})

	const rounds, per = 30, 200
	var failures, retriedOK, landed int
	deadline := time.Now().Add(2 * time.Minute)
	for r := range rounds {
		var batch []store.Change
		for i := range per {
			id := fmt.Sprintf("r%02d-%03d", r, i)
			c := keyedInsert(id, "key-"+id)
			c.Task.UpdatedAt = testNow.Add(time.Duration(r) * time.Second)
			batch = append(batch, c)
			if r > 0 {
				prev := fmt.Sprintf("r%02d-%03d", r-1, i)
				at := testNow.Add(time.Duration(r) * time.Second)
				batch = append(batch, store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: prev, Fence: 2, Attempt: 1, UpdatedAt: at}})
				if i%3 != 0 {
					batch = append(batch, store.Change{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: prev, UpdatedAt: at}})
				}
			}
		}
		maybe := false // a failed try of this round may have landed
		for try := 0; ; try++ {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no commit got through in time", r)
			}
			res, err := s.Commit(ctx, batch)
			if err != nil {
				unknown := errors.Is(err, store.ErrOutcomeUnknown)
				if !unknown && !errors.Is(err, store.ErrStoreUnavailable) {
					t.Fatalf("round %d: Commit() = %v, want an error wrapping ErrStoreUnavailable or ErrOutcomeUnknown", r, err)
				}
				maybe = maybe || unknown
				failures++
				var n int // did the failed commit land? (then the retry replays it)
				if admin.QueryRow("SELECT COUNT(*) FROM `"+table+"` WHERE id = ?", batch[0].Task.ID).Scan(&n) == nil && n > 0 {
					landed++
					if !maybe {
						t.Errorf("round %d: Commit() = %v, which says nothing applied, but the batch landed", r, err)
					}
				}
				continue
			}
			for i, e := range res {
				if e != nil {
					t.Fatalf("round %d try %d: results[%d] (%s %q) = %v, want nil", r, try, i, batch[i].Op, batch[i].Task.ID, e)
				}
			}
			if try > 0 {
				retriedOK++
			}
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d kills (%d missed), %d failed commits (%d of which had landed), %d batches through after a failure",
		kills, killErrs, failures, landed, retriedOK)
	if kills == 0 {
		t.Fatal("no connection was killed")
	}
	if retries < 0 && failures == 0 {
		t.Error("no commit failed: the kills did not hit a batch")
	}

	// The table is as if each batch had been committed once.
	var rows, keys, succeeded, running, queued int
	err = admin.QueryRow("SELECT COUNT(*), COUNT(DISTINCT unique_key), SUM(state = 5), SUM(state = 3), SUM(state = 2) FROM `"+table+"`").
		Scan(&rows, &keys, &succeeded, &running, &queued)
	if err != nil {
		t.Fatal(err)
	}
	wantSucceeded := (rounds - 1) * (per - (per+2)/3)
	wantRunning := (rounds - 1) * ((per + 2) / 3)
	if rows != rounds*per || keys != rows || succeeded != wantSucceeded || running != wantRunning || queued != per {
		t.Errorf("table: %d rows, %d keys, %d succeeded, %d running, %d queued; want %d, %d, %d, %d, %d",
			rows, keys, succeeded, running, queued, rounds*per, rounds*per, wantSucceeded, wantRunning, per)
	}
	var badFence int
	if err := admin.QueryRow("SELECT COUNT(*) FROM `" + table + "` WHERE state IN (3, 5) AND (fence <> 2 OR attempt <> 1)").Scan(&badFence); err != nil {
		t.Fatal(err)
	}
	if badFence != 0 {
		t.Errorf("%d started tasks without fence 2 and attempt 1", badFence)
	}
	live, err := s.Recover(ctx)
	if err != nil || len(live) != per+wantRunning {
		t.Errorf("Recover() = %d tasks, %v; want %d", len(live), err, per+wantRunning)
	}
}
