package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/axsched/ax/store"
)

// outcome names the sentinel an error wraps, to compare results across commits.
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

// history makes a random but plausible sequence of batches over a few tasks: chains of
// inserts, starts, retries and ends, some duplicated or stale, some unique keys shared.
func history(seed uint64, batches, tasks int) [][]store.Change {
	rng := rand.New(rand.NewPCG(seed, 7))
	type model struct {
		inserted bool
		fence    uint64
		attempt  int
		state    store.State
	}
	m := make([]model, tasks)
	var out [][]store.Change
	tm := 0
	for range batches {
		var b []store.Change
		for range 1 + rng.IntN(12) {
			i := rng.IntN(tasks)
			id := fmt.Sprintf("h%02d", i)
			t := &m[i]
			tm++
			fence := t.fence
			if rng.IntN(8) == 0 { // a stale writer now and then
				fence = uint64(rng.IntN(int(t.fence) + 2))
			}
			var c store.Change
			switch {
			case !t.inserted || rng.IntN(15) == 0:
				tk := task(id)
				tk.UniqueKey = fmt.Sprintf("k%d", i%4)
				if rng.IntN(3) == 0 {
					tk.UniqueKey = ""
				}
				tk.State = []store.State{store.Queued, store.Delayed, store.Running}[rng.IntN(3)]
				c = ins(tk)
				if !t.inserted {
					*t = model{inserted: true, fence: 1, state: tk.State}
				}
			case t.state == store.Queued || t.state == store.Delayed || t.state == store.Retrying || rng.IntN(6) == 0:
				t.attempt++
				c = start(id, fence, t.fence+1+uint64(rng.IntN(3)), t.attempt)
				t.fence, t.state = c.Task.Fence, store.Running
			default:
				switch rng.IntN(5) {
				case 0:
					c = retry(id, fence, at(rng.IntN(1000)), fmt.Sprintf("err %d", tm))
					t.state = store.Retrying
				case 1:
					c = succeed(id, fence)
					t.state = store.Succeeded
				case 2:
					c = fail(id, fence, []store.State{0, store.TimedOut, store.Evicted}[rng.IntN(3)], fmt.Sprintf("fail %d", tm))
					t.state = store.Failed
				case 3:
					c = cancel(id, fence)
					t.state = store.Canceled
				default:
					c = retry(id, fence, at(rng.IntN(1000)), "")
					t.state = store.Retrying
				}
			}
			c.Task.UpdatedAt = at(tm)
			b = append(b, c)
		}
		out = append(out, b)
	}
	return out
}

func snapshot(t *testing.T, s store.Store, tasks int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range tasks {
		id := fmt.Sprintf("h%02d", i)
		tk, err := s.Get(context.Background(), id)
		if errors.Is(err, store.ErrUnknownTask) {
			out[id] = "unknown"
			continue
		}
		if err != nil {
			t.Fatalf("Get(%q) error = %v", id, err)
		}
		out[id] = fmt.Sprintf("%v fence=%d attempt=%d runAt=%d err=%q updated=%d key=%q",
			tk.State, tk.Fence, tk.Attempt, tk.RunAt.UnixMilli(), tk.LastError, tk.UpdatedAt.UnixMilli(), tk.UniqueKey)
	}
	return out
}

func testReplayBatches(t *testing.T, s store.Store) {
	// Every batch is committed twice, as a caller does after an error: the second commit
	// must report what the first did and change nothing.
	const tasks = 12
	for bi, b := range history(1, 150, tasks) {
		first := commit(t, s, b...)
		snap := snapshot(t, s, tasks)
		second := commit(t, s, b...)
		for i := range b {
			if outcome(first[i]) != outcome(second[i]) {
				t.Fatalf("batch %d replayed: results[%d] (%s %q fence %d) = %v, first commit said %v\nbatch: %s",
					bi, i, b[i].Op, b[i].Task.ID, b[i].Fence, second[i], first[i], describe(b))
			}
		}
		if again := snapshot(t, s, tasks); !mapsEqual(snap, again) {
			t.Fatalf("batch %d replayed changed the store:\nbefore %v\nafter  %v", bi, snap, again)
		}
	}
}

func testRetryAsPrefix(t *testing.T, s store.Store) {
	// A caller may retry a failed batch as the start of its next one, with new changes
	// after it. Whether the failed batch had landed or not, its changes report nil and the
	// new ones apply as if the two had been committed one after the other.
	mustCommit(t, s, ins(task("a")), ins(keyed("b", "kb")))
	failed := []store.Change{ins(keyed("c", "kc")), start("a", 1, 2, 1), start("b", 1, 2, 1)}
	next := []store.Change{succeed("a", 2), retry("b", 2, at(900), "e"), start("c", 1, 2, 1), ins(keyed("d", "kc"))}
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			prefix := make([]store.Change, len(failed))
			copy(prefix, failed)
			for i := range prefix { // other IDs per run
				prefix[i].Task.ID += fmt.Sprint(landed)
				if prefix[i].Op == store.OpInsert {
					prefix[i].Task.UniqueKey += fmt.Sprint(landed)
				}
			}
			rest := make([]store.Change, len(next))
			copy(rest, next)
			for i := range rest {
				rest[i].Task.ID += fmt.Sprint(landed)
				if rest[i].Op == store.OpInsert {
					rest[i].Task.UniqueKey += fmt.Sprint(landed)
				}
			}
			setup := []store.Change{ins(task("a" + fmt.Sprint(landed))), ins(keyed("b"+fmt.Sprint(landed), "kb"+fmt.Sprint(landed)))}
			mustCommit(t, s, setup...)
			if landed {
				mustCommit(t, s, prefix...) // its answer was lost
			}
			all := append(append([]store.Change(nil), prefix...), rest...)
			wantResults(t, all, commit(t, s, all...), nil, nil, nil, nil, nil, nil, store.ErrDuplicateKey)
			for id, st := range map[string]store.State{"a": store.Succeeded, "b": store.Retrying, "c": store.Running} {
				if got := get(t, s, id+fmt.Sprint(landed)); got.State != st || got.Fence != 2 || got.Attempt != 1 {
					t.Errorf("%s: %v fence %d attempt %d, want %v fence 2 attempt 1", id, got.State, got.Fence, got.Attempt, st)
				}
			}
		})
	}
}

func testReplayMatchesSingle(t *testing.T, once, twice store.Store) {
	// The same history on two stores, one committing each batch once and the other each
	// batch twice, leaves them equal.
	const tasks = 10
	for bi, b := range history(2, 120, tasks) {
		r1 := commit(t, once, b...)
		commit(t, twice, b...)
		r2 := commit(t, twice, b...)
		for i := range b {
			if outcome(r1[i]) != outcome(r2[i]) {
				t.Fatalf("batch %d: results[%d] (%s %q) = %v once, %v replayed\nbatch: %s",
					bi, i, b[i].Op, b[i].Task.ID, r1[i], r2[i], describe(b))
			}
		}
	}
	if a, b := snapshot(t, once, tasks), snapshot(t, twice, tasks); !mapsEqual(a, b) {
		t.Fatalf("stores differ:\nonce  %v\ntwice %v", a, b)
	}
}

func describe(b []store.Change) string {
	var sb strings.Builder
	for _, c := range b {
		fmt.Fprintf(&sb, "[%s %s fence %d→%d %v] ", c.Op, c.Task.ID, c.Fence, c.Task.Fence, c.Task.State)
	}
	return sb.String()
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
