package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestMatchesMemoryStore commits random batches of many tasks (inserts, chains of
// starts, retries and ends, stale fences, unknown IDs, shared unique keys, replays) to
// the store and to storekit.MemoryStore, the reference, and compares every result and the
// tasks after each batch. It runs under DSN settings that change what the server
// reports: clientFoundRows (matched rows instead of changed ones) and the sql_mode
// SIMULTANEOUS_ASSIGNMENT (every assignment of an UPDATE reads the old row).
func TestMatchesMemoryStore(t *testing.T) {
	variants := []struct{ name, params string }{
		{"default", ""},
		{"clientFoundRows", "clientFoundRows=true"},
		{"simultaneousAssignment", "sql_mode=" + url.QueryEscape("'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'")},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cfg, err := mysql.ParseDSN(testDSN())
			if err != nil {
				t.Fatal(err)
			}
			dsn := cfg.FormatDSN()
			if v.params != "" {
				sep := "?"
				if cfg.Params != nil || len(dsn) > 0 && containsByte(dsn, '?') {
					sep = "&"
				}
				dsn += sep + v.params
			}
			s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: tableName(t), Retention: -1})
			if err != nil {
				t.Fatal(err)
			}
			admin := openDB(t)
			t.Cleanup(func() {
				_ = s.Close()
				_ = dropTables(context.Background(), admin, s.Table())
			})
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Noisy batches (most of them planned again from locked rows), then mostly
			// clean ones, where a single stale change meets the optimistic statements.
			compareWithModel(t, s, "n", 11, 20, 7, false)
			compareWithModel(t, s, "c", 12, 400, 40, false)
			// The same, committed by an owner: the starts of its stored tasks go to its
			// start set, and every later change and read goes through it.
			compareWithModel(t, s, "on", 13, 20, 7, true)
			compareWithModel(t, s, "oc", 14, 400, 40, true)
		})
	}
}

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// compareWithModel commits random batches over tasks named prefix+number to s and to a
// MemoryStore. About one change in unknown names a task never inserted, and one in stale
// a stale fence. With owned, an owner of each store commits them (CommitAs), then
// leaves, and an owner of each rescues the tasks: the rescued tasks must match too
// (but their fences, of each store's own epochs).
func compareWithModel(t *testing.T, s store.Store, prefix string, seed uint64, unknown, stale int, owned bool) {
	ctx := context.Background()
	ref := storekit.NewMemoryStore()
	commitRef, commitS := ref.Commit, s.Commit
	var refOwner, sOwner store.Owner
	if owned {
		var err error
		if refOwner, err = ref.Join(ctx, prefix, time.Hour); err != nil {
			t.Fatal(err)
		}
		if sOwner, err = s.(store.SharedStore).Join(ctx, prefix, time.Hour); err != nil {
			t.Fatal(err)
		}
		commitRef = func(ctx context.Context, b []store.Change) ([]error, error) { return ref.CommitAs(ctx, refOwner, b) }
		commitS = func(ctx context.Context, b []store.Change) ([]error, error) {
			return s.(store.SharedStore).CommitAs(ctx, sOwner, b)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	const tasks = 60
	type model struct {
		inserted bool
		fence    uint64
		attempt  int
		live     bool
	}
	m := make([]model, tasks)
	tm := 0
	var prev []store.Change
	for bi := range 120 {
		var b []store.Change
		if prev != nil && rng.IntN(6) == 0 {
			b = append(b, prev...) // a replay, alone or as the prefix of a longer batch
			if rng.IntN(2) == 0 {
				goto commit
			}
		}
		for range 1 + rng.IntN(40) {
			i := rng.IntN(tasks)
			if rng.IntN(unknown) == 0 {
				i = tasks + rng.IntN(3) // never inserted
			}
			id := fmt.Sprintf("%s%03d", prefix, i)
			tm++
			at := testNow.Add(time.Duration(tm) * time.Millisecond)
			if i >= tasks {
				b = append(b, store.Change{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: id, UpdatedAt: at}})
				continue
			}
			t := &m[i]
			fence := t.fence
			if rng.IntN(stale) == 0 {
				fence = uint64(rng.IntN(int(t.fence) + 2)) // a stale writer
			}
			var c store.Change
			switch {
			case !t.inserted || rng.IntN(12) == 0:
				c = insertChange(id, []byte(id))
				c.Task.UniqueKey = fmt.Sprintf("%sk%d", prefix, i%7)
				if rng.IntN(2) == 0 {
					c.Task.UniqueKey = ""
				}
				c.Task.State = []store.State{store.Queued, store.Delayed, store.Running}[rng.IntN(3)]
				if !t.inserted {
					*t = model{inserted: true, fence: 1, live: true}
				}
			case t.live && rng.IntN(3) == 0 || rng.IntN(8) == 0:
				t.attempt++
				next := t.fence + 1 + uint64(rng.IntN(3))
				c = store.Change{Op: store.OpStart, Fence: fence, Task: store.StoredTask{ID: id, Fence: next, Attempt: t.attempt}}
				t.fence = next
			default:
				switch rng.IntN(5) {
				case 0:
					c = store.Change{Op: store.OpRetry, Fence: fence, Task: store.StoredTask{ID: id, RunAt: at.Add(time.Second), LastError: fmt.Sprintf("err %d", tm)}}
				case 1:
					c = store.Change{Op: store.OpSucceed, Fence: fence, Task: store.StoredTask{ID: id}}
					t.live = false
				case 2:
					c = store.Change{Op: store.OpFail, Fence: fence, Task: store.StoredTask{ID: id, State: store.TimedOut, LastError: fmt.Sprintf("fail %d", tm)}}
					t.live = false
				case 3:
					c = store.Change{Op: store.OpCancel, Fence: fence, Task: store.StoredTask{ID: id}}
					t.live = false
				default:
					c = store.Change{Op: store.OpRetry, Fence: fence, Task: store.StoredTask{ID: id, RunAt: at}}
				}
			}
			c.Task.UpdatedAt = at
			b = append(b, c)
		}
	commit:
		want, err := commitRef(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := commitS(ctx, b)
		if err != nil {
			t.Fatalf("batch %d: Commit() error = %v", bi, err)
		}
		for i := range b {
			if outcome(got[i]) != outcome(want[i]) {
				t.Fatalf("batch %d: results[%d] (%s %q fence %d) = %v, MemoryStore says %v", bi, i, b[i].Op, b[i].Task.ID, b[i].Fence, got[i], want[i])
			}
		}
		touched := map[string]bool{}
		for _, c := range b {
			touched[c.Task.ID] = true
		}
		if bi == 119 { // at the end, every task
			for i := range tasks + 3 {
				touched[fmt.Sprintf("%s%03d", prefix, i)] = true
			}
		}
		for id := range touched {
			w, werr := ref.Get(ctx, id)
			g, gerr := s.Get(ctx, id)
			if outcome(gerr) != outcome(werr) {
				t.Fatalf("batch %d: Get(%q) error = %v, MemoryStore says %v", bi, id, gerr, werr)
			}
			if werr == nil && describeTask(g) != describeTask(w) {
				t.Fatalf("batch %d: Get(%q) =\n%s\nMemoryStore:\n%s", bi, id, describeTask(g), describeTask(w))
			}
		}
		prev = b
	}
	if !owned {
		return
	}
	rescued := func(ss store.SharedStore, o store.Owner) map[string]string {
		t.Helper()
		if err := ss.Leave(ctx, o); err != nil {
			t.Fatal(err)
		}
		r, err := ss.Join(ctx, prefix+"-rescuer", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := ss.Rescue(ctx, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, tk := range ts {
			if !strings.HasPrefix(tk.ID, prefix) {
				continue // a running row of no owner that an earlier comparison on s left
			}
			if tk.Fence>>32 < r.Epoch {
				t.Errorf("rescued %q with fence %#x, below the rescuer's epoch %d", tk.ID, tk.Fence, r.Epoch)
			}
			stored, err := ss.Get(ctx, tk.ID)
			if err != nil || describeTask(stored) != describeTask(tk) {
				t.Errorf("Get(%q) after the rescue = %s, %v; want what Rescue returned: %s", tk.ID, describeTask(stored), err, describeTask(tk))
			}
			tk.Fence = 0
			out[tk.ID] = describeTask(tk)
		}
		return out
	}
	want, got := rescued(ref, refOwner), rescued(s.(store.SharedStore), sOwner)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("rescued %q = %q, MemoryStore says %q", id, got[id], w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("rescued %q, which MemoryStore does not rescue", id)
		}
	}
}

func outcome(err error) string {
	for _, s := range []error{store.ErrDuplicateKey, store.ErrStaleFence, store.ErrUnknownTask, store.ErrInvalidChange, store.ErrPayloadTooLarge} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "nil"
}

func describeTask(t store.StoredTask) string {
	return fmt.Sprintf("%s %v fence=%d attempt=%d runAt=%d err=%q created=%d updated=%d key=%q prio=%v payload=%q",
		t.ID, t.State, t.Fence, t.Attempt, t.RunAt.UnixMilli(), t.LastError, t.CreatedAt.UnixMilli(), t.UpdatedAt.UnixMilli(), t.UniqueKey, t.Priority, t.Payload)
}

// TestUniqueKeyOrderInBatch checks that the order of a batch decides whether an insert
// meets a key that another change of the batch frees: before the change, the key is still
// held; after it, free. Every batch is also compared with storekit.MemoryStore.
func TestUniqueKeyOrderInBatch(t *testing.T) {
	s, _ := setup(t, mysqlstore.Options{})
	ref := storekit.NewMemoryStore()
	ctx := context.Background()
	succeed := func(id string) store.Change {
		return store.Change{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: id, UpdatedAt: testNow}}
	}
	batches := [][]store.Change{
		{keyedInsert("y1", "k1"), keyedInsert("y2", "k2"), insertChange("other", nil)},
		{keyedInsert("x1", "k1"), succeed("y1"), succeed("other")},          // held when inserted: refused
		{succeed("y2"), keyedInsert("x2", "k2"), insertChange("more", nil)}, // freed first: inserted
		{keyedInsert("x3", "k1"), succeed("more")},                          // y1 ended in the batch before: inserted
	}
	want := [][]error{{nil, nil, nil}, {store.ErrDuplicateKey, nil, nil}, {nil, nil, nil}, {nil, nil}}
	for bi, b := range batches {
		got, err := s.Commit(ctx, b)
		if err != nil {
			t.Fatalf("batch %d: Commit() error = %v", bi, err)
		}
		ref, err := ref.Commit(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			if !errors.Is(got[i], want[bi][i]) || outcome(got[i]) != outcome(ref[i]) {
				t.Errorf("batch %d: results[%d] (%s %q) = %v, want %v (MemoryStore: %v)", bi, i, b[i].Op, b[i].Task.ID, got[i], want[bi][i], ref[i])
			}
		}
	}
}
