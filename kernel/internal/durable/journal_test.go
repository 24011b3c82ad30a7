package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/benbjohnson/clock"
)

type task struct{ id string }

type attempt struct{ n int }

// fakeJournalLoop records the journal's batches; it grants no start budget.
type fakeJournalLoop struct {
	fakeLoop
	mu      sync.Mutex
	stored  []*task
	refused []*task
	started []*attempt
}

func (l *fakeJournalLoop) StartBudget(int) int                 { return 0 }
func (l *fakeJournalLoop) Prestarted(hs []*task, reserved int) {}
func (l *fakeJournalLoop) Stored(hs []*task) {
	l.mu.Lock()
	l.stored = append(l.stored, hs...)
	l.mu.Unlock()
}

func (l *fakeJournalLoop) Started(started, refused []*attempt, errs []error) {
	l.mu.Lock()
	l.started = append(l.started, started...)
	l.mu.Unlock()
}

func (l *fakeJournalLoop) Orphan(*task) {}

func (l *fakeJournalLoop) Adopted(_, _ []*task) {}

func (l *fakeJournalLoop) Refuse(h *task) {
	l.mu.Lock()
	l.refused = append(l.refused, h)
	l.mu.Unlock()
}

var errClosed = errors.New("closed")

func newTestJournal(t *testing.T, s store.Store, every time.Duration) (*Journal[*task, *attempt], *fakeJournalLoop) {
	t.Helper()
	loop := &fakeJournalLoop{}
	j := NewJournal(JournalConfig[*task, *attempt]{
		Store: s, Every: every, MaxBatch: 64, Timeout: 5 * time.Second, Clock: clock.New(),
		GuardFunc: guard, Loop: loop, ErrClosed: errClosed,
	})
	t.Cleanup(j.Stop)
	return j, loop
}

func insert(id string, now time.Time) store.Change {
	return store.Change{Op: store.OpInsert, Task: store.StoredTask{
		ID: id, Kind: "k", State: store.Queued, RunAt: now, CreatedAt: now, UpdatedAt: now, MaxAttempts: 1, Fence: 1,
	}}
}

// TestJournalAcknowledgedInsert: an acknowledged submit's inserts are stored in one
// commit, handed to the loop, and its Ack settles without errors; a start then
// commits and comes back as started.
func TestJournalAcknowledgedInsert(t *testing.T) {
	mem := storekit.NewMemoryStore()
	j, loop := newTestJournal(t, mem, 0)
	now := time.Now()
	a, b := &task{"a"}, &task{"b"}
	errs := make([]error, 2)
	g := NewAck(errs, 2)
	j.Add([]Entry[*task, *attempt]{{C: insert("a", now), H: a, Ack: g, Idx: 0}, {C: insert("b", now), H: b, Ack: g, Idx: 1}})
	<-g.Done()
	if g.All != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("Ack: All = %v, Errs = %v; want no errors", g.All, errs)
	}
	at := &attempt{1}
	j.Add([]Entry[*task, *attempt]{{C: store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: "a", Attempt: 1, Fence: 2, UpdatedAt: now}}, Start: at}})
	if err := j.Flush(context.Background()); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
	loop.mu.Lock()
	defer loop.mu.Unlock()
	if len(loop.stored) != 2 || loop.stored[0] != a || loop.stored[1] != b {
		t.Errorf("stored = %v, want a, b", loop.stored)
	}
	if len(loop.started) != 1 || loop.started[0] != at {
		t.Errorf("started = %v, want the attempt", loop.started)
	}
	if c := j.Counts(); c.Changes != 3 || c.Pending != 0 || c.Down {
		t.Errorf("Counts() = %+v, want 3 changes, none pending, up", c)
	}
	st, err := mem.Get(context.Background(), "a")
	if err != nil || st.State != store.Running {
		t.Errorf("stored a = %v, %v; want Running", st.State, err)
	}
}

// startMany stores and starts gatherMin tasks in two commits, and returns their IDs.
func startMany(t *testing.T, j *Journal[*task, *attempt], loop *fakeJournalLoop, now time.Time) []string {
	t.Helper()
	ids := make([]string, gatherMin)
	errs := make([]error, len(ids))
	g := NewAck(errs, len(ids))
	var es []Entry[*task, *attempt]
	for i := range ids {
		ids[i] = fmt.Sprintf("t%02d", i)
		es = append(es, Entry[*task, *attempt]{C: insert(ids[i], now), H: &task{ids[i]}, Ack: g, Idx: i})
	}
	j.Add(es)
	<-g.Done()
	es = es[:0]
	for _, id := range ids {
		es = append(es, Entry[*task, *attempt]{C: store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Attempt: 1, Fence: 2, UpdatedAt: now}}, Start: &attempt{1}})
	}
	j.Add(es)
	synctest.Wait()
	loop.mu.Lock()
	started := len(loop.started)
	loop.mu.Unlock()
	if started != len(ids) {
		t.Fatalf("started %d, want %d", started, len(ids))
	}
	return ids
}

func endOf(id string, now time.Time) Entry[*task, *attempt] {
	return Entry[*task, *attempt]{C: store.Change{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: now}}}
}

// TestJournalGathersEnds: after a commit that started gatherMin tasks, the next
// commit waits (at most gatherMax) for their ends, so that they land in one commit;
// it goes at once when they are all there.
func TestJournalGathersEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storekit.NewMemoryStore()
		j, loop := newTestJournal(t, mem, 0)
		now := time.Now()
		ids := startMany(t, j, loop, now)
		c0 := j.Counts().Commits
		j.Add([]Entry[*task, *attempt]{endOf(ids[0], now)})
		synctest.Wait()
		if c := j.Counts().Commits; c != c0 {
			t.Fatalf("commits = %d after one of %d ends, want %d: the journal waits for the others", c, len(ids), c0)
		}
		for _, id := range ids[1:] {
			j.Add([]Entry[*task, *attempt]{endOf(id, now)})
		}
		synctest.Wait()
		if c := j.Counts(); c.Commits != c0+1 || c.Pending != 0 {
			t.Fatalf("Counts() = %+v once the ends came, want one commit more (%d), none pending", c, c0+1)
		}
		for _, id := range ids {
			if st, err := mem.Get(context.Background(), id); err != nil || st.State != store.Succeeded {
				t.Errorf("stored %s = %v, %v; want Succeeded", id, st.State, err)
			}
		}
	})
}

// TestJournalGatherBounded: the wait for the ends of started tasks lasts at most
// gatherMax; the ends that came then commit.
func TestJournalGatherBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storekit.NewMemoryStore()
		j, loop := newTestJournal(t, mem, 0)
		now := time.Now()
		ids := startMany(t, j, loop, now)
		c0 := j.Counts().Commits
		j.Add([]Entry[*task, *attempt]{endOf(ids[0], now)})
		synctest.Wait()
		if c := j.Counts().Commits; c != c0 {
			t.Fatalf("commits = %d before gatherMax, want %d", c, c0)
		}
		<-time.NewTimer(gatherMax).C // the bubble's clock moves once every goroutine waits
		synctest.Wait()
		if c := j.Counts(); c.Commits != c0+1 || c.Pending != 0 {
			t.Fatalf("Counts() = %+v after gatherMax, want one commit more (%d), none pending", c, c0+1)
		}
	})
}

// TestJournalNoGatherForFewStarts: after a commit that started fewer than gatherMin
// tasks, an end commits at once.
func TestJournalNoGatherForFewStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storekit.NewMemoryStore()
		j, _ := newTestJournal(t, mem, 0)
		now := time.Now()
		errs := make([]error, 2)
		g := NewAck(errs, 2)
		j.Add([]Entry[*task, *attempt]{{C: insert("a", now), H: &task{"a"}, Ack: g, Idx: 0}, {C: insert("b", now), H: &task{"b"}, Ack: g, Idx: 1}})
		<-g.Done()
		j.Add([]Entry[*task, *attempt]{
			{C: store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: "a", Attempt: 1, Fence: 2, UpdatedAt: now}}, Start: &attempt{1}},
			{C: store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: "b", Attempt: 1, Fence: 2, UpdatedAt: now}}, Start: &attempt{1}},
		})
		synctest.Wait()
		c0 := j.Counts().Commits
		j.Add([]Entry[*task, *attempt]{endOf("a", now)})
		synctest.Wait()
		if c := j.Counts().Commits; c != c0+1 {
			t.Fatalf("commits = %d after an end, want %d: two starts are too few to wait for", c, c0+1)
		}
	})
}

// TestJournalStoppedRefuses: once stopped, the journal refuses an acknowledged
// insert with ErrClosed and gives back what it holds.
func TestJournalStoppedRefuses(t *testing.T) {
	j, loop := newTestJournal(t, storekit.NewMemoryStore(), 0)
	j.Stop()
	errs := make([]error, 1)
	g := NewAck(errs, 1)
	h := &task{"x"}
	j.Add([]Entry[*task, *attempt]{{C: insert("x", time.Now()), H: h, Ack: g}})
	<-g.Done()
	if !errors.Is(g.All, errClosed) {
		t.Errorf("Ack.All = %v, want ErrClosed", g.All)
	}
	if len(loop.refused) != 1 || loop.refused[0] != h {
		t.Errorf("refused = %v, want x", loop.refused)
	}
	if err := j.Flush(context.Background()); !errors.Is(err, errClosed) {
		t.Errorf("Flush() after Stop = %v, want ErrClosed", err)
	}
}
