package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storekit"
)

// heldStore is a MemoryStore whose commits wait until the test releases them, one at
// a time and in an order of its choosing (see drive). It records the most commits in
// flight at once, and the first task found in two commits in flight at once or a
// commit holding an insert with a unique key in flight beside another one.
type heldStore struct {
	*storekit.MemoryStore

	mu       sync.Mutex
	held     []*heldCommit  // guarded by mu: the commits waiting for their release
	inFlight map[string]int // guarded by mu: changes per task in the commits in flight
	keyed    int            // guarded by mu: commits in flight holding a keyed insert
	cur, max int            // guarded by mu: commits in flight now, and at most
	bad      string         // guarded by mu: the first breach found
	arrived  chan struct{}  // size 1: a commit arrived
}

type heldCommit struct {
	release chan struct{}
}

func newHeldStore() *heldStore {
	return &heldStore{MemoryStore: storekit.NewMemoryStore(), inFlight: map[string]int{}, arrived: make(chan struct{}, 1)}
}

func (s *heldStore) hold(cs []kernel.Change) func() {
	if len(cs) == 0 {
		return func() {} // a lone heartbeat
	}
	c := &heldCommit{release: make(chan struct{})}
	keyed := false
	for _, ch := range cs {
		keyed = keyed || ch.Op == kernel.OpInsert && ch.Task.UniqueKey != ""
	}
	s.mu.Lock()
	s.cur++
	s.max = max(s.max, s.cur)
	seen := map[string]bool{}
	for _, ch := range cs {
		if s.inFlight[ch.Task.ID] > 0 && !seen[ch.Task.ID] && s.bad == "" {
			s.bad = fmt.Sprintf("%s of task %s while a commit in flight holds a change of it", ch.Op, ch.Task.ID)
		}
		seen[ch.Task.ID] = true
	}
	if (keyed && s.cur > 1 || s.keyed > 0) && s.bad == "" {
		s.bad = fmt.Sprintf("%d commits in flight, one of them with an insert with a unique key", s.cur)
	}
	for _, ch := range cs {
		s.inFlight[ch.Task.ID]++
	}
	if keyed {
		s.keyed++
	}
	s.held = append(s.held, c)
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	<-c.release
	return func() {
		s.mu.Lock()
		for _, ch := range cs {
			s.inFlight[ch.Task.ID]--
		}
		if keyed {
			s.keyed--
		}
		s.cur--
		s.mu.Unlock()
	}
}

func (s *heldStore) Commit(ctx context.Context, cs []kernel.Change) ([]error, error) {
	done := s.hold(cs)
	defer done()
	return s.MemoryStore.Commit(ctx, cs)
}

func (s *heldStore) CommitAs(ctx context.Context, o kernel.Owner, cs []kernel.Change) ([]error, error) {
	done := s.hold(cs)
	defer done()
	return s.MemoryStore.CommitAs(ctx, o, cs)
}

// drive releases the held commits until stop is closed: each time every other
// goroutine of the bubble is blocked (so that the journal started every commit it
// would), it releases one, the newest and the oldest in turn, so that commits also
// land out of the order they started in. Run it on a goroutine of the bubble.
func (s *heldStore) drive(stop <-chan struct{}) {
	newest := true
	for {
		synctest.Wait()
		s.mu.Lock()
		var c *heldCommit
		if n := len(s.held); n > 0 {
			i := 0
			if newest {
				i = n - 1
			}
			newest = !newest
			c = s.held[i]
			s.held = append(s.held[:i], s.held[i+1:]...)
		}
		s.mu.Unlock()
		if c != nil {
			close(c.release)
			continue
		}
		select {
		case <-s.arrived:
		case <-stop:
			return
		}
	}
}

// TestJournalOverlapKeepsTaskOrder: in acknowledged mode the journal keeps two
// commits in flight, but never two that hold changes of one task, even when an
// attempt's retry and the next attempt's start follow each other at once; it never
// overlaps a commit holding an insert with a unique key; and with commits landing out
// of order, every task ends stored in the state it ended in.
func TestJournalOverlapKeepsTaskOrder(t *testing.T) {
	for run := range 16 {
		shared := run%2 == 0
		t.Run(fmt.Sprintf("owner=%v/%d", shared, run/2), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newHeldStore()
				var st kernel.Store = s
				if !shared {
					st = struct{ kernel.Store }{s} // hides SharedStore: no owner
				}
				stop := make(chan struct{})
				driven := make(chan struct{})
				go func() { defer close(driven); s.drive(stop) }()
				noDelay := kernel.RetryPolicy{MaxAttempts: 3, BackoffFunc: func(int, error) time.Duration { return 0 }}
				k := newTestKernel(t, kernel.Config{
					Store: st, MaxConcurrency: 4,
					Retry: kernel.ByPriority[kernel.RetryPolicy]{High: noDelay, Normal: noDelay, Low: noDelay},
				})
				var (
					mu   sync.Mutex
					runs = map[string]int{}
				)
				_ = k.Register("flaky", func(_ context.Context, p []byte) error {
					mu.Lock()
					defer mu.Unlock()
					runs[string(p)]++
					if runs[string(p)] == 1 {
						return errors.New("flaky: try again")
					}
					return nil
				})
				const callers, each = 8, 9
				hs := make([]*kernel.Handle, callers*each)
				var wg sync.WaitGroup
				for c := range callers {
					wg.Go(func() {
						for i := range each {
							task := kernel.DurableTask{Kind: "flaky", Payload: fmt.Appendf(nil, "%d/%d", c, i)}
							if i%4 == 3 {
								task.UniqueKey = fmt.Sprintf("key-%d-%d", c, i)
							}
							h, err := k.SubmitDurable(context.Background(), task)
							if err != nil {
								t.Error(err)
								return
							}
							hs[c*each+i] = h
							if i%3 == 1 {
								h.Cancel() // queued, starting, running or retrying: its end races its other changes
							}
						}
					})
				}
				wg.Wait()
				if t.Failed() {
					close(stop)
					return
				}
				waitAll(t, hs)
				if err := k.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				close(stop)
				<-driven
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.bad != "" {
					t.Errorf("journal: %s", s.bad)
				}
				if s.max != 2 {
					t.Errorf("at most %d commits in flight at once, want 2", s.max)
				}
				for i, h := range hs {
					got := stored(t, s, h.ID())
					switch {
					case got.State != h.State():
						t.Errorf("task %s: stored %s, ended %s", h.ID(), got.State, h.State())
					case i%each%3 != 1 && (got.State != kernel.Succeeded || got.Attempt != 2):
						t.Errorf("task %s: stored %s attempt %d; want Succeeded on attempt 2", h.ID(), got.State, got.Attempt)
					}
				}
				if st := k.Stats().Store; st.Refused != 0 || st.Errors != 0 || st.Pending != 0 {
					t.Errorf("Stats().Store = %+v, want no refusal, no error, nothing pending", st)
				}
			})
		})
	}
}

// TestJournalOverlapRejoinsOnce: when both commits in flight learn that the lease
// ended, the first joins again and the second does not: the kernel joins once, both
// commits' submits fail with ErrLeaseLost, and a submit after them is stored by the
// new owner.
func TestJournalOverlapRejoinsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHeldStore()
		k := newTestKernel(t, kernel.Config{Store: s})
		_ = k.Register("k", func(context.Context, []byte) error { return nil })
		synctest.Wait()
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
				errs <- err
			}()
			synctest.Wait() // its commit is held
		}
		s.mu.Lock()
		held := s.held
		s.held = nil
		s.mu.Unlock()
		if len(held) != 2 {
			t.Fatalf("%d commits in flight, want 2", len(held))
		}
		owners, err := s.Owners(context.Background())
		if err != nil || len(owners) != 1 {
			t.Fatalf("Owners() = %v, %v; want one owner", owners, err)
		}
		old := kernel.Owner{Name: owners[0].Name, Epoch: owners[0].Epoch}
		if err := s.Leave(context.Background(), old); err != nil {
			t.Fatal(err)
		}
		for _, c := range held {
			close(c.release)
		}
		for range 2 {
			if err := <-errs; !errors.Is(err, kernel.ErrLeaseLost) {
				t.Errorf("SubmitDurable() = %v, want ErrLeaseLost", err)
			}
		}
		synctest.Wait()
		if st := k.Stats().Store; st.Joins != 2 || st.LeaseLost != 2 {
			t.Errorf("Stats().Store Joins %d, LeaseLost %d; want 2 and 2", st.Joins, st.LeaseLost)
		}
		stop := make(chan struct{})
		driven := make(chan struct{})
		go func() { defer close(driven); s.drive(stop) }()
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "k"})
		if err != nil {
			t.Fatalf("SubmitDurable() after the rejoin = %v", err)
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-driven
		if got := stored(t, s, h.ID()); got.State != kernel.Succeeded {
			t.Errorf("task after the rejoin stored %s, want Succeeded", got.State)
		}
	})
}

// TestJournalOverlapQueuedFirst: a task whose commit found no free slot queues once
// that commit lands; a task submitted while that commit is still in flight does not
// take a slot freed meanwhile in its own commit, ahead of it.
func TestJournalOverlapQueuedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newHeldStore()
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 1})
		var (
			mu    sync.Mutex
			order []string
		)
		_ = k.Register("k", func(_ context.Context, p []byte) error {
			mu.Lock()
			order = append(order, string(p))
			mu.Unlock()
			return nil
		})
		synctest.Wait()
		free := busySlot(t, k)
		queued := submitAsync(k, kernel.DurableTask{Kind: "k", Payload: []byte("queued")})
		synctest.Wait() // its commit is held, without a start: no slot is free
		free()
		synctest.Wait()
		fresh := submitAsync(k, kernel.DurableTask{Kind: "k", Payload: []byte("new")})
		synctest.Wait() // its commit is held beside the first
		s.mu.Lock()
		held := s.held
		s.held = nil
		s.mu.Unlock()
		if len(held) != 2 {
			t.Fatalf("%d commits in flight, want 2", len(held))
		}
		for _, c := range held { // in the order they started
			close(c.release)
			synctest.Wait()
		}
		stop := make(chan struct{})
		driven := make(chan struct{})
		go func() { defer close(driven); s.drive(stop) }()
		for _, res := range []<-chan submitResult{queued, fresh} {
			r := <-res
			if r.err != nil {
				t.Fatal(r.err)
			}
			if err := r.h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-driven
		if len(order) != 2 || order[0] != "queued" {
			t.Errorf("runs %v, want [queued new]", order)
		}
	})
}
