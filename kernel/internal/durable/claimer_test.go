package durable

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/benbjohnson/clock"
)

func TestShareOut(t *testing.T) {
	tests := []struct {
		name string
		n    int
		q    [3]int
		want store.ByPriority[int]
	}{
		{"no quotas", 5, [3]int{}, store.ByPriority[int]{High: 5}},
		{"one", 1, [3]int{6, 3, 1}, store.ByPriority[int]{High: 1}},
		{"two", 2, [3]int{6, 3, 1}, store.ByPriority[int]{High: 1, Normal: 1}},
		{"three: one each", 3, [3]int{6, 3, 1}, store.ByPriority[int]{High: 1, Normal: 1, Low: 1}},
		{"ten", 10, [3]int{6, 3, 1}, store.ByPriority[int]{High: 6, Normal: 3, Low: 1}},
		{"no low quota", 10, [3]int{1, 1, 0}, store.ByPriority[int]{High: 5, Normal: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shareOut(tt.n, tt.q); got != tt.want {
				t.Errorf("shareOut(%d, %v) = %+v, want %+v", tt.n, tt.q, got, tt.want)
			}
		})
	}
}

func TestFollowBatchRotates(t *testing.T) {
	var f follow
	ids := make([]string, store.StatesMax+3)
	for i := range ids {
		ids[i] = string(rune('a'+i%26)) + string(rune('0'+i/26))
	}
	f.add(ids...)
	a, b := f.batch(), f.batch()
	if len(a) != store.StatesMax || len(b) != 3 {
		t.Fatalf("batch sizes = %d, %d, want %d, 3", len(a), len(b), store.StatesMax)
	}
	seen := append(slices.Clone(a), b...)
	slices.Sort(seen)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("two batches did not cover the followed IDs once")
	}
	f.remove(ids[0])
	if f.len() != len(ids)-1 {
		t.Errorf("len() = %d, want %d", f.len(), len(ids)-1)
	}
}

// fakeLoop records what the durable goroutines hand the loop; it grants slots
// claims until the budget is spent.
type fakeLoop struct {
	mu      sync.Mutex
	slots   int
	claimed []store.StoredTask
	got     chan struct{} // size 1: a claim delivered tasks
	calls   chan struct{} // size 1, if not nil: a claim returned
}

func (l *fakeLoop) ClaimBudget(bool) Budget {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Budget{Slots: l.slots, Kinds: []string{"k"}, Quotas: [3]int{1, 1, 1}}
}

func (l *fakeLoop) Claimed(ts []store.StoredTask, reserved int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimed = append(l.claimed, ts...)
	l.slots -= len(ts)
	if l.calls != nil {
		select {
		case l.calls <- struct{}{}:
		default:
		}
	}
	if len(ts) > 0 {
		select {
		case l.got <- struct{}{}:
		default:
		}
	}
}

func (l *fakeLoop) PoolEnded([]store.StoredTask) {}
func (l *fakeLoop) Rescued([]store.StoredTask)   {}
func (l *fakeLoop) LeaseLapse()                  {}

func guard(f func()) (any, bool) { f(); return nil, true }

// TestClaimerClaimsPoolTasks: a pool task inserted by one owner is claimed by
// another's claimer once ClaimNow wakes it, and handed to the loop in one batch.
func TestClaimerClaimsPoolTasks(t *testing.T) {
	mem := storekit.NewMemoryStore()
	clk := clock.New()
	base := Config{Store: mem, Lease: 10 * time.Second, Timeout: 5 * time.Second, Clock: clk, GuardFunc: guard}

	c1 := base
	c1.Name, c1.Loop = "writer", &fakeLoop{}
	w, _, err := Join(c1)
	if err != nil {
		t.Fatalf("Join(writer) = %v", err)
	}
	loop := &fakeLoop{slots: 4, got: make(chan struct{}, 1)}
	c2 := base
	c2.Name, c2.Loop = "claimer", loop
	o, _, err := Join(c2)
	if err != nil {
		t.Fatalf("Join(claimer) = %v", err)
	}
	if o.Doubt() {
		t.Errorf("Doubt() = true right after Join, want false")
	}
	o.Start()
	t.Cleanup(func() {
		o.Stop()
		o.Leave(context.Background())
		w.Leave(context.Background())
	})

	now := clk.Now()
	task := store.StoredTask{ID: "t1", Kind: "k", State: store.Queued, RunAt: now, CreatedAt: now, UpdatedAt: now, MaxAttempts: 1}
	res, err := w.Commit(context.Background(), []store.Change{{Op: store.OpInsert, Task: task, Pool: true}}, nil)
	if err != nil || res[0] != nil {
		t.Fatalf("Commit(pool insert) = %v, %v", res, err)
	}
	o.ClaimNow()
	select {
	case <-loop.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the claimer did not hand the pool task to the loop")
	}
	loop.mu.Lock()
	defer loop.mu.Unlock()
	if len(loop.claimed) != 1 || loop.claimed[0].ID != "t1" {
		t.Errorf("claimed = %+v, want t1", loop.claimed)
	}
	if c := o.Counts(); c.Claimed != 1 || c.Joins != 1 {
		t.Errorf("Counts() = %+v, want Claimed 1, Joins 1", c)
	}
}

// wakingStore is a MemoryStore with the wake-ups of a store.PoolWaker.
type wakingStore struct {
	*storekit.MemoryStore
	mu   sync.Mutex
	wake chan struct{}
}

func (s *wakingStore) PoolWake() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

func (s *wakingStore) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// TestClaimerWakesOnPoolWake: a claimer waiting for its next poll (on a clock that
// never moves) claims a task put in the pool behind its back as soon as the store
// wakes it.
func TestClaimerWakesOnPoolWake(t *testing.T) {
	mem := &wakingStore{MemoryStore: storekit.NewMemoryStore()}
	clk := clock.NewMock()
	loop := &fakeLoop{slots: 4, got: make(chan struct{}, 1), calls: make(chan struct{}, 1)}
	o, _, err := Join(Config{Store: mem, Name: "claimer", Loop: loop, Lease: 10 * time.Second, Timeout: 5 * time.Second, Clock: clk, GuardFunc: guard})
	if err != nil {
		t.Fatalf("Join() = %v", err)
	}
	o.Start()
	t.Cleanup(func() {
		o.Stop()
		o.Leave(context.Background())
	})
	waitFor(t, loop.calls, "the claimer's first claim")
	now := clk.Now()
	task := store.StoredTask{ID: "t1", Kind: "k", State: store.Queued, RunAt: now, CreatedAt: now, UpdatedAt: now, MaxAttempts: 1}
	if res, err := mem.Commit(context.Background(), []store.Change{{Op: store.OpInsert, Task: task}}); err != nil || res[0] != nil {
		t.Fatalf("Commit(pool insert) = %v, %v", res, err)
	}
	mem.notify()
	waitFor(t, loop.got, "the claim after the wake-up")
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
	}
}
