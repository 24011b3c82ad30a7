package durable

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// The claimer goroutine claims due pool tasks while the kernel has free slots: the
// loop reserves the slots ([Loop.ClaimBudget]), the store claims and starts the
// tasks in one write (SharedStore.Claim), and the loop hands them to the run queue
// ([Loop.Claimed]). With nothing to claim it polls with backoff, from claimPollMin to
// claimPollMax, or until the next pool task is due, or until the store wakes it
// (store.PoolWaker). It also reads the states of the
// pool tasks the kernel follows (SharedStore.States), so that their handles end as
// the store says ([Loop.PoolEnded]).

// Poll delays of the claimer.
const (
	claimPollMin = 50 * time.Millisecond
	claimPollMax = 2 * time.Second
)

// follow is the set of pool tasks whose handles this kernel holds; guarded by its mu.
type follow struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	next []string // a round of IDs to read, refilled from ids when empty
}

func (f *follow) add(ids ...string) {
	f.mu.Lock()
	if f.ids == nil {
		f.ids = make(map[string]struct{})
	}
	for _, id := range ids {
		f.ids[id] = struct{}{}
	}
	f.mu.Unlock()
}

func (f *follow) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

func (f *follow) remove(id string) {
	f.mu.Lock()
	delete(f.ids, id)
	f.mu.Unlock()
}

// batch returns up to StatesMax followed IDs, a different slice of them each call.
func (f *follow) batch() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.next) == 0 {
		for id := range f.ids {
			f.next = append(f.next, id)
		}
	}
	n := min(len(f.next), store.StatesMax)
	out := slices.Clone(f.next[:n])
	f.next = f.next[n:]
	return out
}

// Follow adds a task the kernel put in the pool to the followed ones, whose states
// the claimer reads.
func (o *Owner) Follow(id string) { o.follow.add(id) }

// Unfollow removes a task from the followed ones.
func (o *Owner) Unfollow(id string) { o.follow.remove(id) }

// RunNow makes the waiting task id due at now in the store, in the pool or this
// owner's ([store.SharedStore.RunNow]), once flush has written the changes before
// it (a task's insert or retry, which set the RunAt it moves), and has the claimer
// claim at once when it found it. It reports whether the store holds id waiting
// there.
func (o *Owner) RunNow(ctx context.Context, flush func(context.Context) error, now time.Time, id string) (bool, error) {
	if err := flush(ctx); err != nil {
		return false, err
	}
	ok, err := o.store.RunNow(ctx, o.Current(), now, id)
	if ok {
		o.ClaimNow()
	}
	return ok, err
}

// ClaimNow makes the claimer claim at once rather than at its next poll. It never
// blocks; calls made while one is pending merge into it.
func (o *Owner) ClaimNow() {
	select {
	case o.claimNow <- struct{}{}:
	default:
	}
}

func (o *Owner) claimer() {
	backoff := time.Duration(0)
	hungry := true // the pool may hold due work (it may, at start)
	var lastStates time.Time
	var wake <-chan struct{} // closed at the store's next wake-up of its pool
	for {
		if backoff > 0 {
			t := o.clk.Timer(backoff)
			select {
			case <-o.stopCh:
				t.Stop()
				return
			case <-o.claimNow:
				t.Stop()
				backoff = 0
			case <-wake:
				t.Stop()
				backoff = 0
			case <-t.C:
			}
		} else {
			select {
			case <-o.stopCh:
				return
			default:
			}
		}
		// Before the claim: a wake-up after the claim read the pool closes this one.
		wake = o.poolWake()
		if o.clk.Since(lastStates) >= claimPollMin {
			o.readStates()
			lastStates = o.clk.Now()
		}
		// With work left in the pool and no free slot, the loop wakes the claimer as
		// soon as a slot frees (ClaimNow); otherwise it polls.
		b := o.loop.ClaimBudget(hungry)
		if b.Slots <= 0 {
			if hungry {
				backoff = claimPollMax
			} else {
				backoff = min(max(2*backoff, claimPollMin), claimPollMax)
			}
			continue
		}
		claimed, next, err := o.claim(b)
		o.claimed.Add(int64(len(claimed)))
		o.loop.Claimed(claimed, b.Slots)
		hungry = err == nil && (len(claimed) > 0 || !next.IsZero() && !next.After(o.storeNow()))
		switch {
		case err != nil:
			if !errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, errStreamStopped) && o.log != nil {
				o.log.Log(slog.LevelWarn, "kernel: claim pool tasks", "owner", o.Current().Name, "err", err)
			}
			backoff = min(max(2*backoff, claimPollMin), claimPollMax)
		case len(claimed) > 0:
			backoff = 0
		default:
			backoff = min(max(2*backoff, claimPollMin), claimPollMax)
			if !next.IsZero() {
				// The next pool task is due: not later than then, and not in a loop.
				backoff = max(claimPollMin/5, min(backoff, next.Sub(o.storeNow())))
			}
		}
	}
}

// poolWake returns the store's wake-up channel of its pool (store.PoolWaker), or nil
// (never ready) for a store without one or whose PoolWake panicked.
func (o *Owner) poolWake() (ch <-chan struct{}) {
	w, ok := o.store.(store.PoolWaker)
	if !ok {
		return nil
	}
	defer func() {
		if recover() != nil {
			ch = nil
		}
	}()
	return w.PoolWake()
}

// claim claims, in one call, up to b.Slots pool tasks of b.Kinds, shared among the
// priorities by b.Quotas; the store gives the shares a priority could not use to
// the others, High first (store.ClaimRequest.Max).
func (o *Owner) claim(b Budget) ([]store.StoredTask, time.Time, error) {
	if len(b.Kinds) == 0 {
		return nil, time.Time{}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	req := store.ClaimRequest{Now: o.storeNow(), Want: shareOut(b.Slots, b.Quotas), Max: b.Slots, Kinds: b.Kinds}
	return o.claimCall(ctx, req)
}

// storeNow returns the time on the store's clock, as the kernel's clock and the
// Skew tell it: claims compare the tasks' RunAt with it.
func (o *Owner) storeNow() time.Time { return o.skew.NowToStore(o.clk.Now()) }

// claimCall makes the claim on the journal's goroutine, between two commits (the
// journal's stream): a claim renews the lease, as every commit does, and so would
// wait for the lock of the owner row that a commit in flight holds, and make the
// next commit wait for it.
func (o *Owner) claimCall(ctx context.Context, req store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	var (
		next time.Time
		got  []store.StoredTask
		err  error
	)
	claim := func() {
		got, err = call(o.guard, "Claim", func() ([]store.StoredTask, error) {
			ts, nx, err := o.store.Claim(ctx, o.Current(), req)
			next = nx
			return ts, err
		})
	}
	if s := o.stream.Load(); s != nil {
		if !(*s)(claim, o.stopCh) {
			return nil, time.Time{}, errStreamStopped
		}
	} else {
		claim()
	}
	return got, next, err
}

// errStreamStopped: the journal stopped before it made the claim.
var errStreamStopped = errors.New("kernel: claim: the journal stopped")

// shareOut splits n slots among the priorities by quotas (High, Normal, Low): each
// gets its share, rounded down, and at least one while n allows; High takes the rest.
func shareOut(n int, q [3]int) store.ByPriority[int] {
	total := q[0] + q[1] + q[2]
	if total <= 0 {
		return store.ByPriority[int]{High: n}
	}
	normal := n * q[1] / total
	low := n * q[2] / total
	if q[1] > 0 && normal == 0 && n >= 3 {
		normal = 1
	}
	if q[2] > 0 && low == 0 && n >= 3 {
		low = 1
	}
	high := n - normal - low
	if n < 3 { // too few to share: High first, one each below while n allows
		high, normal, low = n, 0, 0
		if n == 2 {
			high, normal = 1, 1
		}
	}
	return store.ByPriority[int]{High: high, Normal: normal, Low: low}
}

// readStates reads the states of followed pool tasks and hands those that ended
// elsewhere to the loop.
func (o *Owner) readStates() {
	ids := o.follow.batch()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	ts, err := call(o.guard, "States", func() ([]store.StoredTask, error) { return o.store.States(ctx, ids) })
	cancel()
	if err != nil {
		if o.log != nil {
			o.log.Log(slog.LevelWarn, "kernel: read the states of pool tasks", "owner", o.Current().Name, "err", err)
		}
		return
	}
	var ended []store.StoredTask
	for _, t := range ts {
		if t.State.Terminal() {
			ended = append(ended, t)
		}
	}
	if len(ended) > 0 {
		o.loop.PoolEnded(ended)
	}
}
