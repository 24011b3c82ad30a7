package mysqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// perKey is a durable kind whose payload is "key/label": it counts the attempts
// running per key and keeps the maxima, and blocks until release is closed or its
// context ends.
type perKey struct {
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
	runs    map[string]int
	release chan struct{}
}

func newPerKey() *perKey {
	return &perKey{running: map[string]int{}, most: map[string]int{}, runs: map[string]int{}, release: make(chan struct{})}
}

func (p *perKey) run(ctx context.Context, payload []byte) error {
	key, _, _ := strings.Cut(string(payload), "/")
	p.mu.Lock()
	p.running[key]++
	p.most[key] = max(p.most[key], p.running[key])
	p.runs[string(payload)]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running[key]--
		p.mu.Unlock()
	}()
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *perKey) get(m func(*perKey) map[string]int, key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m(p)[key]
}

// TestDurableGroupRestart: a kernel runs durable tasks of a group with
// PerKey.Concurrency 2 on a table and is closed with 2 tasks of each key running
// and 3 waiting; the table holds their group and key; a new kernel on the table
// takes them over (a rescue), and runs them again under the same limit: 2 of each
// key at once while the others wait in its gate, then every task once.
func TestDurableGroupRestart(t *testing.T) {
	s, db := setup(t, mysqlstore.Options{})
	groups := map[string]kernel.GroupConfig{"hosts": {PerKey: kernel.Limits{Concurrency: 2}}}
	ctx := context.Background()
	running := func(p *perKey) map[string]int { return p.running }
	most := func(p *perKey) map[string]int { return p.most }

	k1, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 16, Groups: groups, Owner: "gdur-first"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k1.Close() })
	p1 := newPerKey()
	if err := k1.Register("call", p1.run); err != nil {
		t.Fatal(err)
	}
	var ts []kernel.DurableTask
	for _, key := range []string{"a", "b"} {
		for i := range 5 {
			ts = append(ts, kernel.DurableTask{Kind: "call", Group: "hosts", Key: key, Payload: fmt.Appendf(nil, "%s/%d", key, i)})
		}
	}
	if _, err := k1.SubmitDurableMany(ctx, ts); err != nil {
		t.Fatal(err)
	}
	axtest.Eventually(t, func() bool {
		g := k1.Stats().Groups["hosts"]
		return g.Running == 4 && g.Waiting == 6 && p1.get(running, "a") == 2 && p1.get(running, "b") == 2
	}, "2 tasks of each key running and 6 waiting in the first kernel")
	// groupRows counts the tasks by group, key and state (the store's codes: 2 Queued,
	// 3 Running, 5 Succeeded), as the store reads them (a start may be recorded in its
	// owner's row, not in the task's).
	code := map[store.State]int{store.Queued: 2, store.Running: 3, store.Succeeded: 5}
	groupRows := func() map[string]int {
		t.Helper()
		rows, err := db.QueryContext(ctx, "SELECT id FROM `"+s.Table()+"`")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, id := range ids {
			tk, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%s/%s/%d", tk.Group, tk.Key, code[tk.State])]++
		}
		return out
	}
	// States 2 and 3 are the store's codes of Queued and Running.
	axtest.Eventually(t, func() bool {
		r := groupRows()
		return r["hosts/a/2"] == 3 && r["hosts/a/3"] == 2 && r["hosts/b/2"] == 3 && r["hosts/b/3"] == 2
	}, "the table to hold 2 running and 3 queued tasks of hosts/a and of hosts/b")
	if err := k1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := groupRows(); got["hosts/a/3"] != 2 || got["hosts/b/3"] != 2 {
		t.Fatalf("rows by group/key/state after Close = %v, want the running ones left running", got)
	}

	// The next process, on the same table and groups.
	k2, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 16, Groups: groups, Owner: "gdur-second"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k2.Close() })
	p2 := newPerKey()
	if err := k2.Register("call", p2.run); err != nil {
		t.Fatal(err)
	}
	axtest.Eventually(t, func() bool {
		g := k2.Stats().Groups["hosts"]
		return g.Running == 4 && g.Waiting == 6 && p2.get(running, "a") == 2 && p2.get(running, "b") == 2
	}, "the second kernel to run 2 recovered tasks of each key, 6 waiting in its gate")
	close(p2.release)
	axtest.Eventually(t, func() bool {
		r := groupRows()
		return r["hosts/a/5"] == 5 && r["hosts/b/5"] == 5 // 5: Succeeded
	}, "every task to succeed in the second kernel")
	if err := k2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := p2.get(most, "a"), p2.get(most, "b"); a != 2 || b != 2 {
		t.Fatalf("most running at once in the second kernel: a %d, b %d; want 2 each (PerKey.Concurrency)", a, b)
	}
	for _, tk := range ts {
		if n := p2.get(func(p *perKey) map[string]int { return p.runs }, string(tk.Payload)); n != 1 {
			t.Errorf("%s ran %d times in the second kernel, want 1", tk.Payload, n)
		}
	}
}
