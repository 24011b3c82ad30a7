package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel/internal/callback"
	"github.com/axsched/ax/kernel/internal/check"
	"github.com/axsched/ax/kernel/internal/durable"
	"github.com/axsched/ax/kernel/internal/registry"
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
)

// DurableTask is a task that survives the process: it names a registered kind (see
// [Kernel.Register]) and carries its input as bytes, since a closure cannot be stored.
// Submit it with [Kernel.SubmitDurable]; the kernel must have a Config.Store.
type DurableTask struct {
	// Kind names the function that runs the task, registered with [Kernel.Register].
	// Required; at most KindMax bytes.
	Kind string

	// Payload is the function's input. The kernel copies it. The store may cap its
	// size (mysqlstore: Options.MaxPayload); a larger payload is refused with
	// [store.ErrPayloadTooLarge].
	Payload []byte

	// Priority chooses the bucket. The zero value is Normal.
	Priority Priority

	// Delay holds the task back for this long after submission; At until that time.
	// At most one of them may be set. The due time is stored: a task recovered after
	// it passed runs at once (the misfire policy is "run late, never skip").
	Delay time.Duration
	At    time.Time

	// Timeout bounds each attempt. If zero, Config.DefaultTimeout of the priority at
	// the time it runs; [NoTimeout] means none.
	Timeout time.Duration

	// MaxAttempts bounds the attempts, across restarts: an attempt interrupted by a
	// crash counts. If zero, Config.Retry's MaxAttempts of the priority. The other
	// fields of Config.Retry (backoff) apply.
	MaxAttempts int

	// UniqueKey, if not empty, refuses a second durable task with the same key while
	// one is live (delayed, queued, running or waiting for a retry), or in its window:
	// its submit fails with [store.ErrDuplicateKey] (a *store.DuplicateKeyError naming
	// the holder). At most UniqueKeyMax bytes. UniqueUntil and UniqueFor hold the key
	// after the task ends, until UniqueUntil or for UniqueFor after the end, whichever
	// is later (store.StoredTask.UniqueUntil); zero: freed at the end. Both need a
	// UniqueKey; UniqueFor >= 0.
	UniqueKey   string
	UniqueUntil time.Time
	UniqueFor   time.Duration

	// Group, if set, names a group of Config.Groups, and Key the task's key in it,
	// as Task.Group and Task.Key do for a task in memory: each attempt waits for a
	// permit of its key and group (concurrency, rate, breaker) before it enters its
	// bucket. Both are stored with the task and kept across restarts: a task
	// recovered, rescued or requeued by any kernel on the store waits in its group's
	// gate with its key again — or, if that kernel's Config.Groups has no such
	// group, is held like a task of an unregistered kind (Stats.Store.Held) until an
	// Update adds the group. Limits are per process: each kernel enforces its own
	// Config.Groups on the tasks it runs, so N processes with PerKey.Concurrency 5
	// run up to 5N tasks of a key at once. The group's MaxWaiting counts a durable
	// task while it waits in the gate but never refuses one. A pool task (see Pool)
	// of a group runs at once where it is claimed, holding a permit past the limits
	// if need be (the claim started it; in a kernel without its group it runs
	// ungrouped); its retries wait for their permits.
	//
	// A Group not in Config.Groups is refused at submit with a *ConfigError naming
	// DurableTask.Group. Key is at most GroupKeyMax bytes and must be empty without
	// a Group.
	Group string
	Key   string

	// Pool sends the task to the pool of the kernel's [store.SharedStore] instead of running
	// it here: any kernel on the store with a free slot claims and runs it (this one
	// too), when it is due. Its handle follows it wherever it runs: it ends as the
	// store says the task ended, within about a claim poll (50 ms to 2 s). A Cancel
	// asks the store to cancel it, which applies unless a kernel claimed it already.
	// Needs a SharedStore. See also Config.SharedPool.
	Pool bool
}

// DurableFunc runs one attempt of a durable task with its payload. Like Task.Run, it
// must honour ctx; an error makes the attempt fail (retried per the task's attempts
// and Config.Retry, unless it is [Permanent]).
type DurableFunc func(ctx context.Context, payload []byte) error

// durables is the kernel's durable side: the registry of kinds (with the unique
// keys of live durable tasks and the recovered tasks held for their kind or
// group), and the journal.
type durables struct {
	reg      *registry.Registry[DurableFunc] // immutable; safe for concurrent use
	prefix   string                          // immutable: the ID prefix of this kernel instance
	maxBytes int                             // immutable: the store's payload cap, 0 if unknown
	j        *journal
	own      *durable.Owner // nil unless the store is a SharedStore
	skew     durable.Skew   // the store's clock less Config.Clock: due times follow the store's
	// poolDue counts the due pool tasks submitted here on their way to the loop, which
	// adopts them (adopt.go): the claimer leaves their slots to them.
	poolDue atomic.Int64
}

// payloadCapper is implemented by stores that cap payload sizes; the kernel then
// refuses an oversized payload at submit, before any write.
type payloadCapper interface{ MaxPayload() int }

// initDurable starts the journal and reads back the live tasks of the store.
func (k *Kernel) initDurable(c *Config) error {
	d := &durables{reg: registry.New[DurableFunc]()}
	var b [6]byte
	_, _ = rand.Read(b[:])
	d.prefix = "ax" + hex.EncodeToString(b[:]) + "-"
	if pc, ok := c.Store.(payloadCapper); ok {
		d.maxBytes = pc.MaxPayload()
	}
	if rl, ok := c.Store.(store.ResultLimiter); ok {
		k.maxResult = max(min(k.maxResult, rl.MaxResult()), 0)
	}
	var tasks []store.StoredTask
	ctx, cancel := context.WithTimeout(context.Background(), c.StoreTimeout)
	_ = d.skew.Measure(ctx, c.Store, k.clk, func(f func()) (any, bool) { return callGuarded(k, f) }) // a store down fails the recovery below
	cancel()
	if ss, ok := c.Store.(store.SharedStore); ok {
		own, ts, err := k.joinStore(ss, c, &d.skew)
		if err != nil {
			return err
		}
		d.own, tasks = own, ts
		k.ls.pool.Owner = own // before the loop starts
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.StoreTimeout)
		ts, err := storeCall(k, "Recover", func() ([]store.StoredTask, error) { return c.Store.Recover(ctx) })
		cancel()
		if err != nil {
			return fmt.Errorf("kernel: recover durable tasks: %w", err)
		}
		tasks = ts
	}
	d.reg.Sort(tasks) // no kind is registered yet: all are held
	k.dur = d
	d.j = newJournal(k, c)
	return nil
}

// Register names the function that runs durable tasks of kind. Tasks of that kind
// recovered from the store when the kernel started (see Config.Store) are scheduled
// now (a task of a group in its group's gate, or held until its group is configured,
// see [DurableTask.Group]): queued and delayed ones with their priority and due time, those that were
// running as a new attempt — or, when that attempt was their last, dead-lettered as
// Failed. Register a kind once, before submitting tasks of it. It returns a
// *ConfigError for an empty or too long kind or a nil fn, and an error when the
// kernel has no store, the kind is registered already or the kernel is closed.
func (k *Kernel) Register(kind string, fn DurableFunc) error {
	switch {
	case kind == "":
		return &ConfigError{Field: "Register: kind", Reason: "must not be empty"}
	case len(kind) > store.KindMax:
		return &ConfigError{Field: "Register: kind", Reason: strconv.Itoa(len(kind)) + " bytes: must be at most " + strconv.Itoa(store.KindMax) + " bytes (KindMax)"}
	case fn == nil:
		return &ConfigError{Field: "Register: fn", Reason: "must not be nil"}
	}
	d := k.dur
	if d == nil {
		return errors.New("kernel: Register: Config.Store is nil; durable tasks need a store")
	}
	if k.isClosed() {
		return ErrClosed
	}
	held, ok := d.reg.Register(kind, fn)
	if !ok {
		return fmt.Errorf("kernel: Register: kind %q is registered already", kind)
	}
	if len(held) > 0 {
		k.recover(held, fn)
	}
	return nil
}

// newDurableHandle builds the record of a durable task, of group gd and key key
// (gd nil: none).
func (k *Kernel) newDurableHandle(t *Task, rc *resolved, fn DurableFunc, kind string, payload []byte, unique string, maxAttempts int, timeout time.Duration, gd *groupDef, key string) *Handle {
	h := &Handle{}
	t.Run = func(ctx context.Context) error { return fn(ctx, payload) }
	k.initHandle(h, t, normPriority(t.Priority), rc, nil)
	base := h.retry
	if base == nil {
		base = rc.retry[h.bucket]
	}
	p := *base
	p.MaxAttempts = maxAttempts
	h.retry = &p
	h.dur = &durTask{kind: kind, payload: payload, unique: unique, maxAttempts: maxAttempts, timeout: timeout, fence: 1}
	h.feat |= featDurable
	if gd != nil {
		// Not counted in the key's waiting tasks yet: the gate counts it, never
		// refusing it (MaxWaiting refuses no durable task).
		h.joinGroup(gd, key, false)
	}
	return h
}

// validate checks a durable task's fields, naming the bad ones.
func (t *DurableTask) validate(prefix string, maxBytes int, shared bool) error {
	e := fields(prefix)
	check.DurableTask(e, check.Durable{
		Kind: t.Kind, UniqueKey: t.UniqueKey, Group: t.Group, Key: t.Key, Priority: t.Priority,
		Delay: t.Delay, Timeout: t.Timeout, At: t.At, MaxAttempts: t.MaxAttempts, Pool: t.Pool,
		Payload: len(t.Payload), MaxPayload: maxBytes, Shared: shared,
	})
	check.UniqueWindow(e, t.UniqueKey, t.UniqueUntil, t.UniqueFor)
	return e.Err()
}

// SubmitDurable stores t and schedules it. It waits for room while the kernel is full
// (ctx bounds that wait; on a [store.SharedStore] a task this kernel has no room for goes
// to the store's pool instead, see [DurableTask.Pool]), then for the group commit
// that holds t — in acknowledged mode (Config.SnapshotEvery zero, the default) it
// returns only once t is durable, so a crash after it returned loses nothing: the
// next kernel on the store runs t. In periodic snapshot mode it returns at once and t
// is durable at the next snapshot.
//
// It refuses, with nothing stored: a bad field (a joined *ConfigError naming it), an
// unregistered Kind, a payload over the store's cap ([store.ErrPayloadTooLarge]), a live
// UniqueKey ([store.ErrDuplicateKey]), no room before ctx ended (ctx.Err(); a nil ctx
// waits without bound; never on a SharedStore), a closed kernel ([ErrClosed]) and a store that cannot be reached
// ([store.ErrStoreUnavailable], at once while the store is known to be down). The wait for
// the commit is bounded by Config.StoreTimeout, not by ctx: once the commit began its
// outcome is waited for. If the kernel closes between the commit and the hand-over,
// the task stays stored and its handle ends Canceled with ErrClosed.
//
// ErrStoreUnavailable means t was not stored: it never runs. A commit whose answer was
// lost returns [store.ErrOutcomeUnknown] instead: t may be stored and may run. A pool
// task then runs exactly when it was stored; any other is canceled in the next commit,
// unless the process dies first. Use UniqueKey to make a retried submit safe.
//
// In acknowledged mode a durable task starts running only once its start is stored
// too (one more group commit), so that a crash re-runs only tasks the store shows
// running; it holds no slot meanwhile. In both modes the durable attempts whose
// start is stored (or being stored) and that did not end never outnumber
// Config.MaxConcurrency: a durable task waits in its bucket while they fill the
// slots, and the tasks a crash finds Running are at most those that could have
// begun.
func (k *Kernel) SubmitDurable(ctx context.Context, t DurableTask) (*Handle, error) {
	hs, err := k.submitDurable(ctx, []DurableTask{t}, false)
	if err != nil {
		var be *check.Batch
		if errors.As(err, &be) {
			return nil, be.Errs[0]
		}
		return nil, err
	}
	return hs[0], nil
}

// SubmitDurableMany is [Kernel.SubmitDurable] for many tasks in one group commit, the
// fast way to enqueue a backlog. It takes room for all of them at once. A refused task
// has a nil handle and its error in the returned error, which joins one error per
// refused task, each naming it ("DurableTask[i].Kind ..."); the others are stored
// and scheduled. An error that concerns them all (room, closed kernel, store down)
// comes with no handles.
func (k *Kernel) SubmitDurableMany(ctx context.Context, ts []DurableTask) ([]*Handle, error) {
	return k.submitDurable(ctx, ts, true)
}

func (k *Kernel) submitDurable(ctx context.Context, ts []DurableTask, many bool) ([]*Handle, error) {
	d := k.dur
	if d == nil {
		return nil, errors.New("kernel: durable submit: Config.Store is nil; durable tasks need a store")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if len(ts) == 0 {
		return nil, nil
	}
	errs := make([]error, len(ts))
	failed := 0
	fail := func(i int, err error) {
		if errs[i] == nil {
			failed++
		}
		errs[i] = err
	}
	fns, gds := make([]DurableFunc, len(ts)), make([]*groupDef, len(ts))
	keys, ids := make([]string, len(ts)), make([]string, len(ts))
	groups := k.rc.Load().groups
	prefix := func(i int) string {
		if many {
			return "DurableTask[" + strconv.Itoa(i) + "]."
		}
		return "DurableTask."
	}
	for i := range ts {
		if err := ts[i].validate(prefix(i), d.maxBytes, d.own != nil); err != nil {
			fail(i, err)
			continue
		}
		fn, ok := d.reg.Func(ts[i].Kind)
		if !ok {
			fail(i, &ConfigError{Field: prefix(i) + "Kind", Value: ts[i].Kind, Reason: "is not registered (Kernel.Register)"})
			continue
		}
		if g := ts[i].Group; g != "" {
			if gds[i] = groups[g]; gds[i] == nil {
				fail(i, &ConfigError{Field: prefix(i) + "Group", Value: g, Reason: "names no group of Config.Groups"})
				continue
			}
		}
		fns[i], keys[i], ids[i] = fn, ts[i].UniqueKey, d.prefix+fmt.Sprintf("%016x", k.seq.Add(1))
	}
	// Unique keys: refuse a key held by a live task, or twice in this batch.
	taken, dups := d.reg.TakeKeys(keys, ids...)
	for _, i := range dups {
		fail(i, fmt.Errorf("kernel: %sUniqueKey: %w", prefix(i), &store.DuplicateKeyError{ID: ids[i], Key: keys[i], Holder: d.reg.Holder(keys[i])}))
	}
	if failed == len(ts) {
		return nil, &check.Batch{Errs: errs}
	}
	if err := d.j.AvailableErr(); err != nil {
		d.reg.DropKeys(taken...)
		return nil, err
	}

	// Room: one ticket per task, per level, all or none.
	// Tasks for the pool wait in the store, not here: they take no room.
	rc := k.rc.Load()
	pool := make([]bool, len(ts))
	var need [queue.NumLevels]int64
	for i := range ts {
		if errs[i] == nil {
			if pool[i] = k.toPool(&ts[i], rc); !pool[i] {
				need[levelOf(normPriority(ts[i].Priority))]++
			}
		}
	}
	var got [queue.NumLevels]int64
	releaseAll := func() {
		for l := range queue.NumLevels {
			if got[l] > 0 {
				k.release(queue.Level(l), got[l])
			}
		}
	}
	for l := range queue.NumLevels {
		if need[l] == 0 {
			continue
		}
		if d.own != nil && !k.tryRoom(queue.Level(l), need[l], rc) {
			// No room here: to the pool, for whichever kernel has a slot.
			for i := range ts {
				if errs[i] == nil && !pool[i] && levelOf(normPriority(ts[i].Priority)) == queue.Level(l) {
					pool[i] = true
				}
			}
			continue
		}
		if d.own != nil {
			got[l] = need[l]
			continue
		}
		if _, err := k.admit(ctx, queue.Level(l), need[l], rc, admitDurable); err != nil {
			releaseAll()
			d.reg.DropKeys(taken...)
			return nil, err
		}
		got[l] = need[l]
		rc = k.rc.Load()
	}

	var hdrs map[string]string
	if k.hooks != nil {
		hdrs = callback.Headers(k.m.callbackPanics, k.hooks.Headers, ctx, store.HeadersMax, k.log.Warn)
	}
	now := k.clk.Now()
	hs := make([]*Handle, len(ts))
	entries := make([]jentry, 0, len(ts)-failed)
	for i := range ts {
		if errs[i] != nil {
			continue
		}
		t := &ts[i]
		prio := normPriority(t.Priority)
		maxAttempts := t.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = rc.retry[levelOf(prio)].MaxAttempts
		}
		id := ids[i]
		payload := bytes.Clone(t.Payload)
		task := Task{ID: id, Priority: prio, Delay: t.Delay, At: t.At, Timeout: t.Timeout}
		h := k.newDurableHandle(&task, rc, fns[i], t.Kind, payload, t.UniqueKey, maxAttempts, t.Timeout, gds[i], t.Key)
		hs[i], h.dur.headers = h, hdrs
		st := store.StoredTask{
			ID: id, Kind: t.Kind, Payload: payload, Priority: prio, RunAt: d.skew.NowToStore(now),
			Timeout: t.Timeout, MaxAttempts: maxAttempts, Fence: 1, UniqueKey: t.UniqueKey,
			Group: t.Group, Key: t.Key, State: Queued, CreatedAt: now, UpdatedAt: now, Headers: hdrs,
			UniqueUntil: t.UniqueUntil, UniqueFor: t.UniqueFor,
		}
		if h.due {
			// Stored at millisecond precision, rounded up, on the store's clock: a
			// recovered task never runs before the due time it was given.
			st.RunAt = durable.CeilMilli(d.skew.DueToStore(k.at(h.dueAt)))
			if st.RunAt.After(d.skew.NowToStore(now)) {
				st.State = Delayed
			}
		}
		h.dur.inPool = pool[i]
		if pool[i] && st.State == Queued {
			h.dur.poolDue = true
			d.poolDue.Add(1)
		}
		entries = append(entries, jentry{C: store.Change{Op: store.OpInsert, Task: st, Pool: pool[i]}, H: h, Idx: i, Due: h.due})
	}
	if d.j.Every() > 0 {
		// Periodic snapshot: journal the inserts (before the loop can journal a start),
		// then hand the tasks over at once — unless the journal is that far behind.
		if err := d.j.WaitRoom(ctx); err != nil {
			releaseAll()
			d.reg.DropKeys(taken...)
			return nil, err
		}
		d.j.Add(entries)
		live := hs[:0:0]
		for _, h := range hs {
			if h != nil {
				live = append(live, h)
			}
		}
		if !k.enqueueMany(live) {
			releaseAll()
			for _, h := range live {
				k.abortDurable(h)
			}
			return nil, ErrClosed
		}
		if failed > 0 {
			return hs, &check.Batch{Errs: errs}
		}
		return hs, nil
	}
	g := durable.NewAck(errs, len(entries))
	for i := range entries {
		entries[i].Ack = g
	}
	d.j.Add(entries)
	<-g.Done()
	// The journal released the tickets of refused tasks and handed the others over.
	if g.All != nil {
		return nil, g.All
	}
	anyFailed := false
	for i := range ts {
		if errs[i] != nil {
			hs[i] = nil
			anyFailed = true
		}
	}
	if anyFailed {
		return hs, &check.Batch{Errs: errs}
	}
	return hs, nil
}

// abortDurable ends the record of a durable task that never reached the loop (the
// kernel closed between its commit and its hand-over). Its row stays live.
func (k *Kernel) abortDurable(h *Handle) {
	k.poolLanded(h)
	h.state.Store(uint32(Canceled))
	h.finish(ErrClosed)
	k.dur.reg.DropKeys(h.dur.unique)
}

// poolLanded takes h off the due pool tasks on their way to the loop
// (durables.poolDue), once.
func (k *Kernel) poolLanded(h *Handle) {
	if h.dur.poolDue {
		h.dur.poolDue = false
		k.dur.poolDue.Add(-1)
	}
}

// toPool reports whether a durable submit of t goes to the pool whatever the room
// here (a task for which this kernel has no room goes there too: see submitDurable).
func (k *Kernel) toPool(t *DurableTask, rc *resolved) bool {
	return k.dur.own != nil && (t.Pool || rc.cfg.SharedPool)
}

// tryRoom takes n tickets of level l if there is room now, without waiting.
func (k *Kernel) tryRoom(l queue.Level, n int64, rc *resolved) bool {
	for {
		if k.tryAcquire(l, n, rc) == nil {
			return true
		}
		if !k.flushLazyTickets() {
			return false
		}
	}
}
