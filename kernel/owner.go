package kernel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel/internal/ownerlock"
	"github.com/axsched/ax/store"
)

// ownership is a kernel's membership in a [store.SharedStore]: the owner it is now, how long
// its last renewal covers, and the rescuer goroutine that takes over the tasks of ended
// owners. The journal renews the lease with every commit (and alone when idle) and
// joins again when the store says the lease ended. Lease times run on the real clock:
// they are about the database, not about task times.
type ownership struct {
	k      *Kernel
	store  store.SharedStore // immutable
	slot   *ownerlock.Slot   // immutable: holds the default name; nil for Config.Owner or a generated one
	lease  time.Duration
	margin time.Duration // starts stop this long before the lease may end
	log    *kernelLog    // nil without Config.Logger

	cur     atomic.Pointer[store.Owner] // the membership now; replaced by the journal on a rejoin
	okUntil atomic.Int64                // unix ns: durable attempts may start without a commit until then

	rescueNow chan struct{} // size 1: rescue at once (after a rejoin)
	claimNow  chan struct{} // size 1: claim at once (a task went to the pool)
	follow    follow        // the pool tasks this kernel follows
	stopCh    chan struct{}
	stopOnce  sync.Once
	wg        sync.WaitGroup

	joins, rescued, lost, claimed atomicCounter
}

// atomicCounter is a counter read by Stats and the metrics.
type atomicCounter struct{ atomic.Int64 }

// joinStore makes the kernel an owner of s and reads back the tasks it rescues from
// ended owners (and from no owner): the recovery at New.
func (k *Kernel) joinStore(s store.SharedStore, c *Config) (*ownership, []store.StoredTask, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.StoreTimeout)
	defer cancel()
	name, slot, err := k.ownerName(ctx, s, c.Owner)
	if err != nil {
		return nil, nil, err
	}
	o := &ownership{
		k: k, store: s, slot: slot, lease: c.Lease, margin: c.Lease / 3,
		log: k.log, rescueNow: make(chan struct{}, 1), claimNow: make(chan struct{}, 1), stopCh: make(chan struct{}),
	}
	t0 := time.Now()
	m, err := storeCall(o.k, "Join", func() (store.Owner, error) { return s.Join(ctx, name, o.lease) })
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

// rescueBatch is the most tasks one Rescue call takes over.
const rescueBatch = 4096

// rescueAll rescues for m until the store has nothing left to rescue.
func (o *ownership) rescueAll(ctx context.Context, m *store.Owner) ([]store.StoredTask, error) {
	var all []store.StoredTask
	for {
		ts, err := storeCall(o.k, "Rescue", func() ([]store.StoredTask, error) { return o.store.Rescue(ctx, *m, rescueBatch) })
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
func (o *ownership) renewed(t0 time.Time) {
	until := t0.Add(o.lease - o.margin).UnixNano()
	for {
		cur := o.okUntil.Load()
		if until <= cur || o.okUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// doubt reports whether the lease may end before an attempt started now got going:
// the kernel then starts a durable attempt only once a commit renewed the lease.
func (o *ownership) doubt() bool { return time.Now().UnixNano() >= o.okUntil.Load() }

// owner returns the membership now.
func (o *ownership) owner() store.Owner { return *o.cur.Load() }

// commit is the journal's Store.Commit: CommitAs by the owner now. On ErrLeaseLost
// it joins again and rescues what the ended membership left (its own tasks among
// them: their rows get new fences, so the kernel's earlier writes for them are
// refused) before it returns, so that no later commit lands on a row of the ended
// membership. It returns the commit's error.
func (o *ownership) commit(ctx context.Context, changes []store.Change) ([]error, error) {
	m := o.cur.Load()
	t0 := time.Now()
	res, err := storeCall(o.k, "CommitAs", func() ([]error, error) { return o.store.CommitAs(ctx, *m, changes) })
	if err == nil {
		o.renewed(t0)
		return res, nil
	}
	if errors.Is(err, store.ErrLeaseLost) {
		o.lost.Add(1)
		o.okUntil.Store(0)
		if o.log != nil {
			o.log.warn("kernel: this kernel's lease on the store ended; it joins again as a new owner", "owner", m.Name, "epoch", m.Epoch, "err", err)
		}
		o.rejoin(m)
	}
	return nil, err
}

// rejoin joins the store again after the membership old ended, and takes back what
// it can. It retries until it joined or the kernel stops. Journal goroutine only.
func (o *ownership) rejoin(old *store.Owner) {
	backoff := time.Duration(0)
	name := o.rejoinName(old)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), o.k.dur.j.timeout)
		t0 := time.Now()
		m, err := storeCall(o.k, "Join", func() (store.Owner, error) { return o.store.Join(ctx, name, o.lease) })
		if err == nil {
			o.cur.Store(&m)
			o.renewed(t0)
			o.joins.Add(1)
			ts, rerr := o.rescueAll(ctx, &m)
			cancel()
			if len(ts) > 0 {
				o.k.recoverStored(ts)
			}
			if rerr != nil && o.log != nil {
				o.log.warn("kernel: rescue after joining again", "owner", name, "err", rerr)
			}
			if o.log != nil {
				o.log.info("kernel: joined the store again", "owner", name, "epoch", m.Epoch, "ended", old.Epoch, "rescued", len(ts))
			}
			return
		}
		cancel()
		backoff = nextBackoff(backoff)
		if !o.k.dur.j.sleep(backoff) {
			return
		}
	}
}

// heartbeatEvery is how often an idle kernel renews its lease.
func (o *ownership) heartbeatEvery() time.Duration { return o.lease / 5 }

// watchLease tells the loop when the lease may be over in half a margin without a
// renewal (ctrlLeaseLapse), once per renewal missed: the loop then cancels the
// running durable attempts, so that they end before another kernel can rescue
// their tasks. A renewal that lands afterwards makes it watch the new end.
func (o *ownership) watchLease() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var told int64 // the okUntil the loop was told about
	for {
		until := o.okUntil.Load()
		d := time.Until(time.Unix(0, until).Add(o.margin / 2))
		if d <= 0 && until != told {
			told = until
			if o.log != nil {
				o.log.warn("kernel: the lease on the store was not renewed in time; running durable attempts are cancelled", "owner", o.owner().Name)
			}
			o.k.control(ctrlMsg{kind: ctrlLeaseLapse})
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

// startRescuer starts the goroutine that rescues the tasks of ended owners every
// quarter lease (with jitter), so that they run again within about lease + margin.
func (o *ownership) startRescuer() {
	o.wg.Go(o.watchLease)
	o.wg.Go(func() {
		for {
			d := o.lease / 4
			d += time.Duration(rand.Int64N(int64(d/5)+1)) - d/10
			t := time.NewTimer(d)
			select {
			case <-o.stopCh:
				t.Stop()
				return
			case <-o.rescueNow:
				t.Stop()
			case <-t.C:
			}
			m := o.cur.Load()
			ctx, cancel := context.WithTimeout(context.Background(), o.k.dur.j.timeout)
			ts, err := o.rescueAll(ctx, m)
			cancel()
			if len(ts) > 0 {
				if o.log != nil {
					o.log.info("kernel: rescued the tasks of ended owners", "owner", o.owner().Name, "tasks", len(ts))
				}
				o.k.recoverStored(ts)
			}
			if err != nil && !errors.Is(err, store.ErrLeaseLost) && o.log != nil {
				o.log.warn("kernel: rescue of ended owners' tasks", "owner", o.owner().Name, "err", err)
			}
		}
	})
}

// stopRescuer stops the rescuer and claimer goroutines and waits for them.
func (o *ownership) stopRescuer() {
	o.stopOnce.Do(func() { close(o.stopCh) })
	o.wg.Wait()
}

// leave ends the membership, so that the tasks left live (a Shutdown's abandoned
// ones, a Close's cancelled ones) are rescued at once by the other kernels.
func (o *ownership) leave(ctx context.Context) {
	m := o.cur.Load()
	_, err := storeCall(o.k, "Leave", func() (struct{}, error) { return struct{}{}, o.store.Leave(ctx, *m) })
	if err != nil && o.log != nil {
		o.log.warn("kernel: leave the store; its tasks are rescued once the lease ends", "owner", o.owner().Name, "err", err)
	}
}

// recoverStored schedules tasks read back from the store (rescued ones): those of a
// registered kind now, the others once their kind is registered.
func (k *Kernel) recoverStored(ts []store.StoredTask) {
	d := k.dur
	byKind := make(map[string][]store.StoredTask)
	d.mu.Lock()
	for _, t := range ts {
		if t.UniqueKey != "" {
			d.keys[t.UniqueKey] = struct{}{}
		}
		if _, ok := d.kinds[t.Kind]; ok {
			byKind[t.Kind] = append(byKind[t.Kind], t)
		} else {
			d.held[t.Kind] = append(d.held[t.Kind], t)
		}
	}
	fns := make(map[string]DurableFunc, len(byKind))
	for kind := range byKind {
		fns[kind] = d.kinds[kind]
	}
	d.mu.Unlock()
	for kind, group := range byKind {
		k.recover(group, fns[kind])
	}
}

// leaseLapsed cancels the contexts of the durable attempts handed to the run queue
// (waiting there or running): the lease that covers their rows may end before
// they do, and another kernel would then run them again. Each attempt ends as its
// function returns, like one cancelled by [Kernel.Cancel] but without the task:
// its end or retry goes to the store, which refuses it if another owner took the
// task over meanwhile. Loop only.
func (k *Kernel) leaseLapsed() {
	q := &k.rq
	var as []*attempt
	q.mu.Lock()
	for _, r := range q.rings {
		r.Range(func(it ritem) bool {
			if it.a != nil && it.a.h.dur != nil && !it.a.settled {
				as = append(as, it.a)
			}
			return true
		})
	}
	for _, e := range q.execs {
		if a := e.cur; a != nil && a.h.dur != nil && !a.finished && !a.settled {
			as = append(as, a)
		}
	}
	q.mu.Unlock()
	for _, a := range as {
		a.ctx.cancel(context.Canceled)
	}
}
