package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storekit"
)

// overlapStore is a store whose commits take a while, and which records a task
// that has changes in two commits in flight at once.
type overlapStore struct {
	kernel.Store

	mu       sync.Mutex
	inFlight map[string]int // guarded by mu: changes per task in the commits in flight
	cur, max int            // guarded by mu: commits in flight now, and at most
	overlap  string         // guarded by mu: a task found in two commits in flight
}

func (s *overlapStore) Commit(ctx context.Context, changes []kernel.Change) ([]error, error) {
	s.mu.Lock()
	s.cur++
	s.max = max(s.max, s.cur)
	seen := map[string]bool{}
	for _, c := range changes {
		if s.inFlight[c.Task.ID] > 0 && !seen[c.Task.ID] && s.overlap == "" {
			s.overlap = fmt.Sprintf("%s %s", c.Op, c.Task.ID)
		}
		seen[c.Task.ID] = true
	}
	for _, c := range changes {
		s.inFlight[c.Task.ID]++
	}
	s.mu.Unlock()
	time.Sleep(300 * time.Microsecond) // a database's round trip
	res, err := s.Store.Commit(ctx, changes)
	s.mu.Lock()
	for _, c := range changes {
		s.inFlight[c.Task.ID]--
	}
	s.cur--
	s.mu.Unlock()
	return res, err
}

// TestJournalOverlapKeepsTaskOrder: in acknowledged mode the journal keeps commits
// in flight at once, but never two that hold changes of one task, even when a
// failed attempt's retry and its next start follow each other at once.
func TestJournalOverlapKeepsTaskOrder(t *testing.T) {
	s := &overlapStore{Store: storekit.NewMemoryStore(), inFlight: map[string]int{}}
	noDelay := kernel.RetryPolicy{MaxAttempts: 3, BackoffFunc: func(int, error) time.Duration { return 0 }}
	k := newTestKernel(t, kernel.Config{
		Store: s, MaxConcurrency: 8,
		Retry: kernel.ByPriority[kernel.RetryPolicy]{High: noDelay, Normal: noDelay, Low: noDelay},
	})
	var runs atomic.Int64
	if err := k.Register("flaky", func(_ context.Context, p []byte) error {
		if runs.Add(1)%2 == 0 {
			return errors.New("flaky: try again")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const callers, each = 16, 40
	hs := make([]*kernel.Handle, callers*each)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "flaky", Payload: fmt.Appendf(nil, "%d/%d", c, i)})
				if err != nil {
					t.Error(err)
					return
				}
				hs[c*each+i] = h
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	waitAll(t, hs)
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overlap != "" {
		t.Errorf("commits in flight at once share a task: %s", s.overlap)
	}
	t.Logf("at most %d commits in flight", s.max)
	for _, h := range hs {
		if st := stored(t, s, h.ID()); st.State != h.State() {
			t.Errorf("task %s: stored %s, ended %s", h.ID(), st.State, h.State())
		}
	}
	if st := k.Stats().Store; st.Refused != 0 || st.Errors != 0 {
		t.Errorf("Stats.Store = %+v, want no refusal and no error", st)
	}
}
