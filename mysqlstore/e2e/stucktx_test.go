package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// proxyStores opens a store on table through a fresh sqlProxy and one straight to the
// server, migrated, both closed in t.Cleanup.
func proxyStores(t *testing.T, table string, opts mysqlstore.Options) (direct, proxied *mysqlstore.Store, p *sqlProxy) {
	t.Helper()
	return proxyStoresWith(t, table, opts, false)
}

// proxyStoresWith is proxyStores whose proxied store, when plain, is made by New: it
// sends each statement of a commit on its own (BEGIN, the renewal, the writes,
// COMMIT), so that a freeze after a write leaves its transaction open with its locks,
// as a process stopped inside a commit would. (A store made by Open sends a commit's
// statements and COMMIT as one query, which the server runs whole.)
func proxyStoresWith(t *testing.T, table string, opts mysqlstore.Options, plain bool) (direct, proxied *mysqlstore.Store, p *sqlProxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	p = newProxy(t, cfg.Addr)
	pcfg := cfg.Clone()
	pcfg.Addr = p.addr()
	opts.Table = table
	for _, dsn := range []string{testDSN(), pcfg.FormatDSN()} {
		var s *mysqlstore.Store
		var err error
		if plain && dsn != testDSN() {
			var db *sql.DB
			if db, err = sql.Open("mysql", dsn); err == nil {
				t.Cleanup(func() { _ = db.Close() })
				s, err = mysqlstore.New(db, opts)
			}
		} else {
			s, err = mysqlstore.Open(dsn, opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if direct == nil {
			direct = s
		} else {
			proxied = s
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := direct.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return direct, proxied, p
}

// freezeClaim starts a claim by o on proxied that freezes right after its locking
// statement (SKIP LOCKED), as a process stopped inside it would, and waits until it
// froze. The returned func ends it (its context) and waits for it.
func freezeClaim(t *testing.T, ctx context.Context, p *sqlProxy, proxied *mysqlstore.Store, o store.Owner, req store.ClaimRequest) func() {
	t.Helper()
	p.setRule(queryHas(proxyFreeze, "SKIP LOCKED"))
	claimCtx, claimCancel := context.WithCancel(ctx)
	claimDone := make(chan error, 1)
	go func() {
		_, _, err := proxied.Claim(claimCtx, o, req)
		claimDone <- err
	}()
	end := func() {
		claimCancel()
		if err := <-claimDone; err != nil {
			t.Logf("the frozen claim ended: %v", err) // its context ended
		}
	}
	select {
	case <-p.firing():
	case err := <-claimDone:
		claimDone <- err
		end()
		t.Fatalf("the claim returned (%v) before it froze", err)
	}
	return end
}

func insertChange(id string, now time.Time, pool bool) store.Change {
	return store.Change{Op: store.OpInsert, Pool: pool, Task: store.StoredTask{
		ID: id, Kind: "k", Priority: store.Normal, RunAt: now, Fence: 1, State: store.Queued,
		CreatedAt: now, UpdatedAt: now,
	}}
}

func startChange(id string, fence uint64, now time.Time) store.Change {
	return store.Change{Op: store.OpStart, Fence: fence, Task: store.StoredTask{ID: id, Attempt: 1, Fence: fence + 1, UpdatedAt: now}}
}

func commitAs(t *testing.T, s *mysqlstore.Store, o store.Owner, cs ...store.Change) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.CommitAs(ctx, o, cs)
	if err != nil {
		t.Fatalf("CommitAs(%s) = %v", o.Name, err)
	}
	for i, r := range res {
		if r != nil {
			t.Fatalf("CommitAs(%s): change %d: %v", o.Name, i, r)
		}
	}
}

// TestStuckClaimKeepsOthersLeases freezes one owner's connection inside a claim (a
// process stopped mid-transaction) and checks that the owners beside it keep their
// leases: a healthy owner, whose first Queued task sits right after the pool's range
// of the index (state, owner, priority, run_at), starts that task and renews while the
// claim is frozen, and a rescuer takes the frozen owner's Running task, never the
// healthy owner's, within a few leases.
func TestStuckClaimKeepsOthersLeases(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "stuckclaim")
	direct, proxied, p := proxyStores(t, table, mysqlstore.Options{Retention: -1})
	const lease = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()

	healthy, err := direct.Join(ctx, "healthy", lease)
	if err != nil {
		t.Fatal(err)
	}
	// The healthy owner renews every lease/4 from now on, and must keep its lease.
	stopRenew := renewEvery(ctx, direct, healthy, lease/4, lease)
	defer stopRenew()
	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		rescued   = map[string]time.Duration{}
		rescueErr []error
		frozeAt   time.Time // set before the rescuer starts
	)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	frozen, err := proxied.Join(ctx, "frozen", lease)
	if err != nil {
		t.Fatal(err)
	}
	rescuer, err := direct.Join(ctx, "rescuer", time.Minute) // not under test
	if err != nil {
		t.Fatal(err)
	}
	commitAs(t, direct, healthy, insertChange("a1", now, false))
	commitAs(t, proxied, frozen, insertChange("b1", now, false), startChange("b1", 1, now))
	commitAs(t, direct, healthy, insertChange("p1", now, true)) // the pool's only task

	// The frozen owner claims more than the pool holds, so its claim reads past the
	// pool's range, and freezes right after its locking statement.
	defer freezeClaim(t, ctx, p, proxied, frozen, store.ClaimRequest{Now: now, Want: store.ByPriority[int]{Normal: 5}, Kinds: []string{"k"}})()
	frozeAt = p.when()

	// The rescuer rescues every lease/4, and must not wait behind the frozen claim
	// either.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(lease / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			c, cc := context.WithTimeout(ctx, 2*lease)
			ts, err := direct.Rescue(c, rescuer, 0)
			cc()
			mu.Lock()
			if err != nil {
				rescueErr = append(rescueErr, err)
			}
			for _, task := range ts {
				rescued[task.ID] = time.Since(frozeAt)
			}
			mu.Unlock()
		}
	}()

	startCtx, startCancel := context.WithTimeout(ctx, 2*lease)
	res, err := direct.CommitAs(startCtx, healthy, []store.Change{startChange("a1", 1, time.Now())})
	startCancel()
	if err != nil || res[0] != nil {
		t.Errorf("healthy owner's start of a1 while another owner's claim is frozen = %v, %v; want it applied", res, err)
	}
	const margin = 3 * lease
	pollUntil(t, "the frozen owner's task to be rescued", 20*time.Millisecond, lease+margin, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		_, ok := rescued["b1"]
		return ok, nil
	})
	// A lease more: the healthy owner must still hold its task.
	<-time.After(lease)
	close(stop)
	wg.Wait()
	renewErrs := stopRenew()

	mu.Lock()
	defer mu.Unlock()
	if len(renewErrs) > 0 {
		t.Errorf("healthy owner's renewals failed while another owner's claim was frozen: %v", errors.Join(renewErrs...))
	}
	if at, ok := rescued["a1"]; ok {
		t.Errorf("healthy owner's task a1 rescued %v after the freeze", at)
	}
	t.Logf("b1 rescued %v after the freeze (lease %v); rescue errors: %v", rescued["b1"], lease, rescueErr)
	got, err := direct.Get(ctx, "a1")
	if err != nil || got.Fence != 2 {
		t.Errorf("Get(a1) = fence %d, %v; want fence 2 (the healthy owner's start, nobody else's)", got.Fence, err)
	}
}

// TestStuckInsertBoundsLockWaits freezes one owner's connection right after its
// commit inserted a task with a unique key, and has a healthy owner insert a task
// with the same key: the healthy owner's commit waits for the frozen row lock at
// most Options.LockWait per try while it holds its own owner row, so its heartbeats
// get through between the tries and it keeps its lease, and the commit fails
// instead of hanging.
func TestStuckInsertBoundsLockWaits(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "stuckinsert")
	direct, proxied, p := proxyStoresWith(t, table, mysqlstore.Options{Retention: -1, LockWait: time.Second}, true)
	const lease = 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()
	healthy, err := direct.Join(ctx, "healthy", lease)
	if err != nil {
		t.Fatal(err)
	}
	// The healthy owner renews every lease/8 from now on, and must keep its lease.
	stopHeartbeats := renewEvery(ctx, direct, healthy, lease/8, lease)
	defer stopHeartbeats()
	frozen, err := proxied.Join(ctx, "frozen", lease)
	if err != nil {
		t.Fatal(err)
	}
	const key = "stuck-key"
	keyed := func(id string) store.Change {
		c := insertChange(id, now, false)
		c.Task.UniqueKey = key
		return c
	}
	p.setRule(queryHas(proxyFreeze, fmt.Sprintf("%X", key)))
	frozenCtx, frozenCancel := context.WithCancel(ctx)
	frozenDone := make(chan struct{})
	go func() {
		defer close(frozenDone)
		_, _ = proxied.CommitAs(frozenCtx, frozen, []store.Change{keyed("b1")})
	}()
	defer func() {
		frozenCancel()
		<-frozenDone
	}()
	select {
	case <-p.firing():
	case <-frozenDone:
		t.Fatal("the frozen owner's commit returned before it froze")
	}

	t0 := time.Now()
	commitCtx, commitCancel := context.WithTimeout(ctx, 3*lease)
	_, commitErr := direct.CommitAs(commitCtx, healthy, []store.Change{keyed("a1")})
	commitCancel()
	took := time.Since(t0)
	if commitErr == nil || errors.Is(commitErr, context.DeadlineExceeded) {
		t.Errorf("healthy owner's insert of a key a frozen transaction holds = %v after %v; want a lock wait error well before %v", commitErr, took, 3*lease)
	}
	<-time.After(lease / 2) // heartbeats after the commit gave up
	for _, err := range stopHeartbeats() {
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("healthy owner's heartbeat while its commit waited for a frozen lock: %v", err)
		}
	}
	owners, err := direct.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		if o.Epoch == healthy.Epoch && !o.Live {
			t.Errorf("healthy owner's lease ended (expires %v)", o.Expires)
		}
	}
	t.Logf("the commit gave up after %v: %v", took, commitErr)
}

// renewEvery renews owner o on s (a CommitAs without changes) every period, each
// within lease, until the stop it returns is called. stop waits for the renewals to
// end and returns the errors they met; it may be called more than once.
func renewEvery(ctx context.Context, s *mysqlstore.Store, o store.Owner, period, lease time.Duration) (stop func() []error) {
	quit, done := make(chan struct{}), make(chan []error, 1)
	go func() {
		var errs []error
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				done <- errs
				return
			case <-tick.C:
			}
			c, cc := context.WithTimeout(ctx, lease)
			if _, err := s.CommitAs(c, o, nil); err != nil {
				errs = append(errs, err)
			}
			cc()
		}
	}()
	var once sync.Once
	var errs []error
	return func() []error {
		once.Do(func() {
			close(quit)
			errs = <-done
		})
		return errs
	}
}
