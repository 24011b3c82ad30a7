package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel/internal/durable/ownerlock"
	"github.com/axsched/ax/store"
	"github.com/benbjohnson/clock"
)

// Config is what [Join] needs. Every field but Name and Log must be set.
type Config struct {
	Store   store.SharedStore
	Name    string        // the owner name (Config.Owner); "" for a default one (see [Join])
	Lease   time.Duration // the lease each renewal grants
	Timeout time.Duration // the bound of each store call
	Clock   clock.Clock   // the kernel's clock, for claim requests
	Skew    *Skew         // the store's clock less Clock's; measured again by the rescuer
	Log     Logger        // nil: no logging
	// GuardFunc runs f, a call to the store (the user's code), on a goroutine of its
	// own and waits for it; it returns f's recovered panic value and whether f
	// returned normally, as the kernel's guard of user callbacks does.
	GuardFunc func(f func()) (recovered any, normal bool)
	Loop      Loop
	// Figures, if set, returns the kernel's figures, which the Owner publishes on a
	// store.ReplicaStore (see [Owner.publish]); Version, Rates and RateSpan are the
	// Owner's to fill.
	Figures func() store.ReplicaFigures
}

// Owner is a kernel's membership in a [store.SharedStore]: the owner it is now, how
// long its last renewal covers, and the goroutines that watch the lease, rescue the
// tasks of ended owners and claim pool tasks. The journal renews the lease with every
// commit ([Owner.Commit]), and alone when idle, and the Owner joins again when the
// store says the lease ended. Its methods are safe for concurrent use.
type Owner struct {
	store   store.SharedStore // immutable
	loop    Loop              // immutable
	clk     clock.Clock       // immutable
	skew    *Skew             // immutable
	slot    *ownerlock.Slot   // immutable: holds the default name; nil for Config.Name or a generated one
	lease   time.Duration
	margin  time.Duration // starts stop this long before the lease may end
	timeout time.Duration
	log     Logger // nil without a logger
	guard   func(func()) (any, bool)
	figures func() store.ReplicaFigures // nil: publish nothing

	cur     atomic.Pointer[store.Owner] // the membership now; replaced on a rejoin
	okUntil atomic.Int64                // unix ns: durable attempts may start without a commit until then

	claimNow chan struct{} // size 1: claim at once (a task went to the pool)
	// stream runs a store call on the journal's goroutine between its commits
	// (Journal.InStream); nil until the journal starts.
	stream   atomic.Pointer[func(func(), <-chan struct{}) bool]
	follow   follow // the pool tasks this kernel follows
	stopCh   chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	joins, rescued, lost, claimed atomic.Int64
}

// Counts are an Owner's counters, read by the kernel's Stats and metrics.
type Counts struct {
	Joins, LeaseLost, Rescued, Claimed uint64
	Following                          int // the pool tasks followed now
}

// Join makes the kernel an owner of c.Store and reads back the tasks it rescues from
// ended owners (and from no owner): the recovery at a kernel's start. The name is
// c.Name when set; else a default one (see ownerName). It starts no goroutine: see
// [Owner.Start].
func Join(c Config) (*Owner, []store.StoredTask, error) {
	o := &Owner{
		store: c.Store, loop: c.Loop, clk: c.Clock, skew: c.Skew, lease: c.Lease, margin: c.Lease / 3, timeout: c.Timeout,
		log: c.Log, guard: c.GuardFunc, figures: c.Figures, claimNow: make(chan struct{}, 1), stopCh: make(chan struct{}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	name, slot, err := o.ownerName(ctx, c.Name)
	if err != nil {
		return nil, nil, err
	}
	o.slot = slot
	t0 := o.clk.Now()
	m, err := call(o.guard, "Join", func() (store.Owner, error) { return o.store.Join(ctx, name, o.lease) })
	if err != nil {
		if slot != nil {
			slot.Release()
		}
		return nil, nil, fmt.Errorf("kernel: join the store as owner %q: %w", name, err)
	}
	o.cur.Store(&m)
	o.renewed(t0)
	o.joins.Add(1)
	tasks, err := o.rescueAll(ctx, &m)
	if err != nil {
		if slot != nil {
			slot.Release()
		}
		return nil, nil, fmt.Errorf("kernel: rescue the tasks of ended owners: %w", err)
	}
	return o, tasks, nil
}

// call runs a call to the store through the guard and waits for it, turning a panic
// or a runtime.Goexit into an error: a Store is the user's code, and the kernel's
// goroutines must not die with it.
func call[T any](guard func(func()) (any, bool), op string, f func() (T, error)) (v T, err error) {
	r, ok := guard(func() { v, err = f() })
	switch {
	case ok:
		return v, err
	case r != nil:
		return v, fmt.Errorf("kernel: Store.%s panicked: %v", op, r)
	default:
		return v, fmt.Errorf("kernel: Store.%s called runtime.Goexit", op)
	}
}

// rescueBatch is the most tasks one Rescue call takes over.
const rescueBatch = 4096

// rescueAll rescues for m until the store has nothing left to rescue.
func (o *Owner) rescueAll(ctx context.Context, m *store.Owner) ([]store.StoredTask, error) {
	var all []store.StoredTask
	for {
		ts, err := call(o.guard, "Rescue", func() ([]store.StoredTask, error) { return o.store.Rescue(ctx, *m, rescueBatch) })
		if err != nil {
			return all, err
		}
		all = append(all, ts...)
		if len(ts) < rescueBatch {
			o.rescued.Add(int64(len(all)))
			return all, nil
		}
	}
}

// renewed records a renewal of the lease sent at t0: the store's clock read its "now"
// after t0, so the lease lasts at least until t0 + lease.
func (o *Owner) renewed(t0 time.Time) {
	until := t0.Add(o.lease - o.margin).UnixNano()
	for {
		cur := o.okUntil.Load()
		if until <= cur || o.okUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// setStream makes the Owner's claims run through f (Journal.InStream).
func (o *Owner) setStream(f func(func(), <-chan struct{}) bool) { o.stream.Store(&f) }

// Doubt reports whether the lease may end before an attempt started now got going:
// the kernel then starts a durable attempt only once a commit renewed the lease.
func (o *Owner) Doubt() bool { return o.clk.Now().UnixNano() >= o.okUntil.Load() }

// Current returns the membership now.
func (o *Owner) Current() store.Owner { return *o.cur.Load() }

// Store returns the store the Owner joined.
func (o *Owner) Store() store.SharedStore { return o.store }

// Counts returns the Owner's counters.
func (o *Owner) Counts() Counts {
	return Counts{
		Joins: uint64(o.joins.Load()), LeaseLost: uint64(o.lost.Load()),
		Rescued: uint64(o.rescued.Load()), Claimed: uint64(o.claimed.Load()),
		Following: o.follow.len(),
	}
}

// Commit is the journal's Store.Commit: CommitAs by the owner now. On ErrLeaseLost
// it joins again and rescues what the ended membership left (its own tasks among
// them: their rows get new fences, so the kernel's earlier writes for them are
// refused) before it returns, so that no later commit lands on a row of the ended
// membership; it retries the join until it joined or stop is closed. It returns the
// commit's error. The journal's goroutine only.
func (o *Owner) Commit(ctx context.Context, changes []store.Change, stop <-chan struct{}) ([]error, error) {
	m := o.cur.Load()
	t0 := o.clk.Now()
	res, err := call(o.guard, "CommitAs", func() ([]error, error) { return o.store.CommitAs(ctx, *m, changes) })
	if err == nil {
		o.renewed(t0)
		return res, nil
	}
	if errors.Is(err, store.ErrLeaseLost) {
		o.lost.Add(1)
		o.okUntil.Store(0)
		if o.log != nil {
			o.log.Log(slog.LevelWarn, "kernel: this kernel's lease on the store ended; it joins again as a new owner", "owner", m.Name, "epoch", m.Epoch, "err", err)
		}
		o.rejoin(m, stop)
	}
	return nil, err
}

// rejoin joins the store again after the membership old ended, and takes back what
// it can. It retries until it joined or stop is closed. Journal goroutine only.
func (o *Owner) rejoin(old *store.Owner, stop <-chan struct{}) {
	backoff := time.Duration(0)
	name := o.rejoinName(old)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		t0 := o.clk.Now()
		m, err := call(o.guard, "Join", func() (store.Owner, error) { return o.store.Join(ctx, name, o.lease) })
		if err == nil {
			o.cur.Store(&m)
			o.renewed(t0)
			o.joins.Add(1)
			ts, rerr := o.rescueAll(ctx, &m)
			cancel()
			if len(ts) > 0 {
				o.loop.Rescued(ts)
			}
			if rerr != nil && o.log != nil {
				o.log.Log(slog.LevelWarn, "kernel: rescue after joining again", "owner", name, "err", rerr)
			}
			if o.log != nil {
				o.log.Log(slog.LevelInfo, "kernel: joined the store again", "owner", name, "epoch", m.Epoch, "ended", old.Epoch, "rescued", len(ts))
			}
			return
		}
		cancel()
		backoff = nextBackoff(backoff)
		if !sleep(o.clk, backoff, stop) {
			return
		}
	}
}

// sleep waits d on clk, or returns false when stop is closed first.
func sleep(clk clock.Clock, d time.Duration, stop <-chan struct{}) bool {
	t := clk.Timer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// HeartbeatEvery is how often an idle kernel renews its lease.
func (o *Owner) HeartbeatEvery() time.Duration { return o.lease / 5 }

// watchLease tells the loop when the lease may be over in half a margin without a
// renewal ([Loop.LeaseLapse]), once per renewal missed: the loop then cancels the
// running durable attempts, so that they end before another kernel can rescue
// their tasks. A renewal that lands afterwards makes it watch the new end.
func (o *Owner) watchLease() {
	t := o.clk.Timer(time.Hour)
	defer t.Stop()
	var told int64 // the okUntil the loop was told about
	for {
		until := o.okUntil.Load()
		d := o.clk.Until(time.Unix(0, until).Add(o.margin / 2))
		if d <= 0 && until != told {
			told = until
			if o.log != nil {
				o.log.Log(slog.LevelWarn, "kernel: the lease on the store was not renewed in time; running durable attempts are cancelled", "owner", o.Current().Name)
			}
			o.loop.LeaseLapse()
		}
		if d <= 0 {
			d = max(o.lease/20, time.Millisecond) // wait for a renewal
		}
		t.Reset(d)
		select {
		case <-o.stopCh:
			return
		case <-t.C:
		}
	}
}

// Start starts the lease watcher, the rescuer, the claimer and, on a
// store.ReplicaStore, the publisher of the kernel's figures. Call it once the loop
// runs.
func (o *Owner) Start() {
	o.wg.Go(o.watchLease)
	o.wg.Go(o.rescuer)
	o.wg.Go(o.claimer)
	if rs, ok := o.store.(store.ReplicaStore); ok && o.figures != nil {
		o.wg.Go(func() { o.publish(rs) })
	}
}

// rescuer rescues the tasks of ended owners every quarter lease (with jitter), so
// that they run again within about lease + margin, and measures the store's clock
// (Skew) before each rescue.
func (o *Owner) rescuer() {
	for {
		d := o.lease / 4
		d += time.Duration(rand.Int64N(int64(d/5)+1)) - d/10
		t := o.clk.Timer(d)
		select {
		case <-o.stopCh:
			t.Stop()
			return
		case <-t.C:
		}
		m := o.cur.Load()
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		if err := o.skew.Measure(ctx, o.store, o.clk, o.guard); err != nil && o.log != nil {
			o.log.Log(slog.LevelWarn, "kernel: read the store's clock", "owner", o.Current().Name, "err", err)
		}
		ts, err := o.rescueAll(ctx, m)
		cancel()
		if len(ts) > 0 {
			if o.log != nil {
				o.log.Log(slog.LevelInfo, "kernel: rescued the tasks of ended owners", "owner", o.Current().Name, "tasks", len(ts))
			}
			o.loop.Rescued(ts)
		}
		if err != nil && !errors.Is(err, store.ErrLeaseLost) && o.log != nil {
			o.log.Log(slog.LevelWarn, "kernel: rescue of ended owners' tasks", "owner", o.Current().Name, "err", err)
		}
	}
}

// Stop stops the goroutines Start started and waits for them. Idempotent.
func (o *Owner) Stop() {
	o.stopOnce.Do(func() { close(o.stopCh) })
	o.wg.Wait()
}

// Leave ends the membership, so that the tasks left live (a Shutdown's abandoned
// ones, a Close's cancelled ones) are rescued at once by the other kernels.
func (o *Owner) Leave(ctx context.Context) {
	m := o.cur.Load()
	_, err := call(o.guard, "Leave", func() (struct{}, error) { return struct{}{}, o.store.Leave(ctx, *m) })
	if err != nil && o.log != nil {
		o.log.Log(slog.LevelWarn, "kernel: leave the store; its tasks are rescued once the lease ends", "owner", o.Current().Name, "err", err)
	}
}
