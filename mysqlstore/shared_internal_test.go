package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
)

// internalStore returns a migrated store on a table of its own, dropped in t.Cleanup.
func internalStore(t testing.TB, tag string) *Store {
	t.Helper()
	dsn := os.Getenv("AX_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	table := fmt.Sprintf("axt_%s_%d", tag, os.Getpid())
	s, err := New(db, Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		for _, suffix := range []string{"", ownersSuffix, leasesSuffix, epochsSuffix, schedSuffix, startsSuffix, replicasSuffix} {
			_, _ = db.Exec("DROP TABLE IF EXISTS `" + table + suffix + "`")
		}
		_ = db.Close()
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate() = %v (run scripts/ensure-mariadb.sh if no server answers)", err)
	}
	return s
}

// TestRescueRetryReturnsTaken runs a rescue whose answer is lost (its result dropped)
// and then its retry, as Rescue does after a lost connection: the retry returns the
// tasks the first try took, with the fence it gave them, besides what it takes itself,
// in recovery order and within the limit.
func TestRescueRetryReturnsTaken(t *testing.T) {
	s := internalStore(t, "rescue_retry")
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var cs []store.Change
	for i := range 6 {
		cs = append(cs, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: fmt.Sprintf("u%d", i), Kind: "k", State: store.Queued, Fence: 1, RunAt: now.Add(time.Duration(i) * time.Second), UpdatedAt: now,
		}})
	}
	for i := range 6 { // left running by a store without owners: the pool's are not rescued
		cs = append(cs, store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: fmt.Sprintf("u%d", i), Fence: 2, Attempt: 1, UpdatedAt: now}})
	}
	if res, err := s.Commit(ctx, cs); err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	o, err := s.Join(ctx, "rescuer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var taken []rescued
	first, err := s.rescueOnce(ctx, &o, 2, &taken, &rescueState{})
	if err != nil || len(first) != 2 || len(taken) != 1 {
		t.Fatalf("first try = %d tasks, %v, %d taken; want 2 and 1", len(first), err, len(taken))
	}
	// The answer was lost: the retry must return u0 and u1 again, and nothing more with limit 2.
	again, err := s.rescueOnce(ctx, &o, 2, &taken, &rescueState{})
	if err != nil || len(again) != 2 || again[0].ID != "u0" || again[1].ID != "u1" || again[0].Fence != first[0].Fence {
		t.Fatalf("retry with limit 2 = %+v, %v; want u0 and u1 at fence %#x", again, err, first[0].Fence)
	}
	// With room, it takes more, at a new epoch, and returns all in recovery order.
	all, err := s.rescueOnce(ctx, &o, 0, &taken, &rescueState{})
	if err != nil || len(all) != 6 {
		t.Fatalf("retry without limit = %d tasks, %v; want 6", len(all), err)
	}
	for i, tk := range all {
		if want := fmt.Sprintf("u%d", i); tk.ID != want {
			t.Fatalf("retry without limit: [%d] = %s, want %s", i, tk.ID, want)
		}
		if got, err := s.Get(ctx, tk.ID); err != nil || got.Fence != tk.Fence {
			t.Fatalf("%s: returned fence %#x, stored %#x (%v)", tk.ID, tk.Fence, got.Fence, err)
		}
	}
	if all[0].Fence == all[5].Fence || all[5].Fence>>32 <= all[0].Fence>>32 {
		t.Fatalf("fences %#x and %#x: want the later try's epoch above the first's", all[0].Fence, all[5].Fence)
	}
	// A new call (nothing taken) finds nothing: every task is the rescuer's.
	if got, err := s.Rescue(ctx, o, 0); err != nil || len(got) != 0 {
		t.Fatalf("Rescue() = %d tasks, %v; want none", len(got), err)
	}
}

// TestClaimRetryReturnsTaken runs a claim whose answer is lost (its result dropped) and
// then its retry, as Claim does after a lost connection: the retry returns the tasks
// the first try took, with the fence it gave them, and they count against Want.
func TestClaimRetryReturnsTaken(t *testing.T) {
	s := internalStore(t, "claim_retry")
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var cs []store.Change
	for i := range 6 {
		cs = append(cs, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: fmt.Sprintf("p%d", i), Kind: "k", State: store.Queued, Fence: 1, RunAt: now.Add(time.Duration(i) * time.Second), UpdatedAt: now,
		}})
	}
	if res, err := s.Commit(ctx, cs); err != nil || res[0] != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	o, err := s.Join(ctx, "claimer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req := store.ClaimRequest{Now: now.Add(time.Minute), Want: store.ByPriority[int]{Normal: 2}, Kinds: []string{"k"}}
	var taken []rescued
	first, _, err := s.claimOnce(ctx, &o, req, &taken)
	if err != nil || len(first) != 2 || len(taken) != 1 {
		t.Fatalf("first try = %d tasks, %v, %d taken; want 2 and 1", len(first), err, len(taken))
	}
	// The answer was lost: the retry returns p0 and p1 again, and nothing more.
	again, next, err := s.claimOnce(ctx, &o, req, &taken)
	if err != nil || len(again) != 2 || again[0].ID != "p0" || again[1].ID != "p1" || again[0].Fence != first[0].Fence ||
		again[0].Attempt != 1 || !next.Equal(now.Add(2*time.Second)) {
		t.Fatalf("retry = %+v, next %v, %v; want p0 and p1 at fence %#x, attempt 1, next %v", again, next, err, first[0].Fence, now.Add(2*time.Second))
	}
	// With more wanted, it claims more at a new epoch and returns all by run_at.
	req.Want.Normal = 4
	all, next, err := s.claimOnce(ctx, &o, req, &taken)
	if err != nil || len(all) != 4 || !next.Equal(now.Add(4*time.Second)) {
		t.Fatalf("retry wanting 4 = %d tasks, next %v, %v; want 4, next %v", len(all), next, err, now.Add(4*time.Second))
	}
	for i, tk := range all {
		if want := fmt.Sprintf("p%d", i); tk.ID != want {
			t.Fatalf("retry wanting 4: [%d] = %s, want %s", i, tk.ID, want)
		}
		if got, err := s.Get(ctx, tk.ID); err != nil || got.Fence != tk.Fence || got.State != store.Running || got.Attempt != 1 {
			t.Fatalf("%s: returned fence %#x, stored %#x %v attempt %d (%v)", tk.ID, tk.Fence, got.Fence, got.State, got.Attempt, err)
		}
	}
	if all[3].Fence>>32 <= all[0].Fence>>32 {
		t.Fatalf("fences %#x and %#x: want the later try's epoch above the first's", all[0].Fence, all[3].Fence)
	}
}

// TestFireRetryFindsItsToken: a retry after a try whose answer was lost reports that
// try's fire when the stored fire token is its own, and fires nothing more.
func TestFireRetryFindsItsToken(t *testing.T) {
	ctx := context.Background()
	s := internalStore(t, "firetoken")
	t0 := time.UnixMilli(1_900_000_000_000).UTC()
	if _, _, err := s.UpsertSchedule(ctx, store.StoredSchedule{Name: "tok", Next: t0}); err != nil {
		t.Fatal(err)
	}
	f := store.ScheduleFire{Name: "tok", Expect: t0, Next: t0.Add(time.Second)}
	update := func(token uint64) string {
		return "UPDATE " + s.sched + " SET next_fire = " + fmt.Sprint(t0.Add(time.Second).UnixMilli()) +
			", version = version + 1, fire_token = " + fmt.Sprint(token) + ", updated_at = UTC_TIMESTAMP(6) WHERE name = 'tok' AND paused = 0 AND next_fire <=> " +
			fmt.Sprint(t0.UnixMilli())
	}
	if got, fired, err := s.fireTry(ctx, f, update(7), nil, 7, false); err != nil || !fired || got.Version != 1 {
		t.Fatalf("fireTry() = %+v, %v, %v; want fired, version 1", got, fired, err)
	}
	// The same try again, as after a lost answer: its token is stored.
	if got, fired, err := s.fireTry(ctx, f, update(7), nil, 7, true); err != nil || !fired || got.Version != 1 {
		t.Fatalf("fireTry(retry, own token) = %+v, %v, %v; want fired, version still 1", got, fired, err)
	}
	// Another caller's retry: its token is not stored, and the schedule moved on.
	if got, fired, err := s.fireTry(ctx, f, update(9), nil, 9, true); err != nil || fired || got.Version != 1 {
		t.Fatalf("fireTry(retry, other token) = %+v, %v, %v; want not fired, version 1", got, fired, err)
	}
}

// TestJoinEpochFloor: Join takes its epoch from the counter, and a counter found empty
// beside live tasks (a task table restored alone) is raised above their fences first.
func TestJoinEpochFloor(t *testing.T) {
	s := internalStore(t, "join_floor")
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const restored = 7<<32 + 3 // a fence of epoch 7, written where the counter was another
	res, err := s.Commit(ctx, []store.Change{
		{Op: store.OpInsert, Task: store.StoredTask{ID: "live", Kind: "k", State: store.Queued, Fence: 1, UpdatedAt: now}},
		{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: "live", Fence: restored, Attempt: 1, UpdatedAt: now}},
	})
	if err != nil || errors.Join(res...) != nil {
		t.Fatalf("Commit() = %v, %v", res, err)
	}
	if _, err := s.db.ExecContext(ctx, "DELETE FROM "+s.epochs); err != nil {
		t.Fatal(err)
	}
	first, err := s.Join(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if first.Epoch <= restored>>32 {
		t.Fatalf("Join() with an empty counter = epoch %d, want above the live fence's epoch %d", first.Epoch, restored>>32)
	}
	second, err := s.Join(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if second.Epoch <= first.Epoch {
		t.Fatalf("second Join() = epoch %d, want above the first's %d", second.Epoch, first.Epoch)
	}
	// The counter keeps its largest row through a prune, so it is never found empty again.
	e := second.Epoch
	for e%epochPruneEvery != 0 {
		if e, err = s.nextEpoch(ctx, s.db, 0); err != nil {
			t.Fatal(err)
		}
	}
	s.pruneEpochs(e)
	var rows int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.epochs).Scan(&rows); err != nil || rows == 0 {
		t.Fatalf("counter rows after a prune = %d, %v; want at least one", rows, err)
	}
}

// BenchmarkJoin measures a Join beside 20,000 live tasks, as a restarted process's
// Join on a busy table.
func BenchmarkJoin(b *testing.B) {
	s := internalStore(b, "join_bench")
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 20_000; i += 1000 {
		cs := make([]store.Change, 0, 1000)
		for j := i; j < i+1000; j++ {
			cs = append(cs, store.Change{Op: store.OpInsert, Task: store.StoredTask{
				ID: fmt.Sprintf("t%06d", j), Kind: "k", State: store.Queued, Fence: 1, UpdatedAt: now, Payload: make([]byte, 256),
			}})
		}
		if res, err := s.Commit(ctx, cs); err != nil || errors.Join(res...) != nil {
			b.Fatalf("Commit() = %v, %v", res, err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Join(ctx, "bench", time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}
