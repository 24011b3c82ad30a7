package durable

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/benbjohnson/clock"
)

// insertMem is a MemoryStore with InsertAs (CommitAs, counted), which waits for a
// token of gate when gate is set, after it tells entered.
type insertMem struct {
	*storekit.MemoryStore
	calls   atomic.Int64
	entered chan struct{}
	gate    chan struct{}
}

func (s *insertMem) InsertAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	s.calls.Add(1)
	if s.gate != nil {
		s.entered <- struct{}{}
		<-s.gate
	}
	return s.CommitAs(ctx, o, cs)
}

func newStreamJournal(t *testing.T, s *insertMem) (*Journal[*task, *attempt], *fakeJournalLoop, *Owner) {
	t.Helper()
	own, _, err := Join(Config{Store: s, Name: "o", Lease: 10 * time.Second, Timeout: 5 * time.Second, Clock: clock.New(), GuardFunc: guard, Loop: &fakeLoop{}})
	if err != nil {
		t.Fatalf("Join() = %v", err)
	}
	loop := &fakeJournalLoop{}
	j := NewJournal(JournalConfig[*task, *attempt]{
		Store: s, Owner: own, MaxBatch: 64, Timeout: 5 * time.Second, Clock: clock.New(),
		GuardFunc: guard, Loop: loop, ErrClosed: errClosed,
	})
	t.Cleanup(func() {
		j.Stop()
		own.Leave(context.Background())
	})
	return j, loop, own
}

func submit(j *Journal[*task, *attempt], now time.Time, ids ...string) (*Ack, []error) {
	errs := make([]error, len(ids))
	g := NewAck(errs, len(ids))
	es := make([]Entry[*task, *attempt], len(ids))
	for i, id := range ids {
		es[i] = Entry[*task, *attempt]{C: insert(id, now), H: &task{id}, Ack: g, Idx: i}
	}
	j.Add(es)
	return g, errs
}

// TestJournalInsertStream: on an InsertStore, acknowledged inserts commit through
// InsertAs on the insert stream; while it has a batch in flight, the group commit
// takes the next submit itself and does not wait for it; Flush waits for both.
func TestJournalInsertStream(t *testing.T) {
	s := &insertMem{MemoryStore: storekit.NewMemoryStore(), entered: make(chan struct{}), gate: make(chan struct{})}
	j, loop, _ := newStreamJournal(t, s)
	now := time.Now()
	g1, errs1 := submit(j, now, "a", "b")
	<-s.entered // the insert stream took the first submit
	g2, errs2 := submit(j, now, "c")
	<-g2.Done() // committed by the group commit while InsertAs waits
	if g2.All != nil || errs2[0] != nil {
		t.Fatalf("second submit: All = %v, Errs = %v; want no errors", g2.All, errs2)
	}
	select {
	case <-g1.Done():
		t.Fatal("the first submit settled before its InsertAs returned")
	default:
	}
	close(s.gate)
	<-g1.Done()
	if g1.All != nil || errors.Join(errs1...) != nil {
		t.Fatalf("first submit: All = %v, Errs = %v; want no errors", g1.All, errs1)
	}
	if err := j.Flush(context.Background()); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("InsertAs calls = %d, want 1", n)
	}
	loop.mu.Lock()
	if len(loop.stored) != 3 {
		t.Errorf("stored %d tasks, want 3", len(loop.stored))
	}
	loop.mu.Unlock()
	for _, id := range []string{"a", "b", "c"} {
		if st, err := s.Get(context.Background(), id); err != nil || st.State != store.Queued {
			t.Errorf("Get(%s) = %v, %v; want Queued", id, st.State, err)
		}
	}
}

// TestJournalInsertStreamLeaseLost: when InsertAs finds the lease ended, the batch
// goes to the group commit, which learns the same, joins again and refuses the
// submit with ErrLeaseLost; the insert stream then takes the next membership's
// inserts.
func TestJournalInsertStreamLeaseLost(t *testing.T) {
	s := &insertMem{MemoryStore: storekit.NewMemoryStore()}
	j, _, own := newStreamJournal(t, s)
	first := own.Current()
	if err := s.Leave(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	g, _ := submit(j, now, "a")
	<-g.Done()
	if !errors.Is(g.All, store.ErrLeaseLost) {
		t.Fatalf("submit after the lease ended: All = %v, want ErrLeaseLost", g.All)
	}
	if own.Current().Epoch == first.Epoch {
		t.Fatalf("the owner did not join again")
	}
	calls := s.calls.Load()
	g, errs := submit(j, now, "b")
	<-g.Done()
	if g.All != nil || errs[0] != nil {
		t.Fatalf("submit after the rejoin: All = %v, Errs = %v", g.All, errs)
	}
	if s.calls.Load() != calls+1 {
		t.Errorf("InsertAs calls = %d after the rejoin's submit, want %d", s.calls.Load(), calls+1)
	}
	if _, err := s.Get(context.Background(), "a"); !errors.Is(err, store.ErrUnknownTask) {
		t.Errorf("Get(a) = %v, want ErrUnknownTask", err)
	}
}
