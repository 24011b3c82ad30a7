package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/queue"
)

// 256 is how many tasks [Batch.Go] buffers before it submits them.
const batchFlushSize = 256

// BatchOptions configures a [Batch] or a [Map] call. A nil *BatchOptions means the
// zero value: Normal priority, the kernel's default timeout, no retries, waiting
// for room when the kernel is full.
type BatchOptions struct {
	// Priority of every member. The zero value is Normal.
	Priority Priority
	// Timeout of each member's attempts; zero means Config.DefaultTimeout.
	Timeout time.Duration
	// Retry, if set, lets a failed member be retried under it. If nil, members are
	// not retried: a member's first error is final, as in errgroup (the kernel's
	// Config.Retry does not apply to batches).
	Retry *RetryPolicy
	// CancelOnError cancels the batch's context, and so every member not yet
	// finished, when a member fails (errgroup.WithContext's behaviour). [Map]
	// always does.
	CancelOnError bool
	// NoWait fails the submission with ErrQueueFull or ErrDegraded instead of
	// waiting for room while the kernel is full.
	NoWait bool
	// Group and Key put every member in a group of Config.Groups under one key,
	// as Task.Group and Task.Key do for a task: each member waits for its own
	// permit. A flush that would take the key past MaxWaiting submits the members
	// that fit and fails with ErrGroupFull. If Group is empty, no group (Key must
	// be empty too).
	Group, Key string
}

// Batch is an errgroup-shaped group of tasks run under a kernel's limits and
// priorities. Tasks added with [Batch.Go] are handed to the kernel in batches (one
// intake operation per batch, not per task): every 256 tasks, at
// [Batch.Flush] and at [Batch.Wait]. The batch's context, derived from the one
// given to [Kernel.NewBatch], is the parent of every member's context; when it
// ends, members not yet finished are cancelled. A Batch must not be reused after
// Wait. Its methods are safe for concurrent use.
type Batch struct {
	k      *Kernel
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool
	opts   BatchOptions

	mu       sync.Mutex
	idle     sync.Cond                     // on mu: signalled when left or flushing drops to 0
	pending  []func(context.Context) error // guarded by mu
	members  []*Handle                     // guarded by mu
	err      error                         // first error; guarded by mu
	flushing int                           // Flush calls submitting members; guarded by mu
	left     atomic.Int64                  // members submitted and not yet ended

	// For Map: members run runI(ctx, idx) instead of a closure each.
	runI func(context.Context, int) error
}

// NewBatch returns an empty batch whose members run under ctx (a nil ctx is
// context.Background()).
func (k *Kernel) NewBatch(ctx context.Context, opts *BatchOptions) *Batch {
	b := &Batch{k: k}
	b.idle.L = &b.mu
	if opts != nil {
		b.opts = *opts
	}
	if ctx == nil {
		ctx = context.Background()
	}
	b.ctx, b.cancel = context.WithCancelCause(ctx)
	b.stop = context.AfterFunc(b.ctx, func() { k.control(ctrlMsg{kind: ctrlCancelBatch, b: b}) })
	return b
}

// Context returns the batch's context, the parent of its members' contexts.
func (b *Batch) Context() context.Context { return b.ctx }

// Go adds fn to the batch. It does not block unless it fills a flush (see
// [Batch.Flush]). Errors of submission surface in [Batch.Wait]; a nil fn is one
// ([ErrNilFunc]), and adds nothing. Go may be called concurrently with Wait: Wait
// then waits for the tasks Go added before Wait returned.
func (b *Batch) Go(fn func(ctx context.Context) error) {
	if fn == nil {
		b.setErr(fmt.Errorf("kernel: Batch.Go: %w", ErrNilFunc))
		return
	}
	b.mu.Lock()
	b.pending = append(b.pending, fn)
	full := len(b.pending) >= batchFlushSize
	b.mu.Unlock()
	if full {
		_ = b.Flush()
	}
}

// Flush submits the tasks added since the last flush, waiting for room while the
// kernel is full (unless NoWait) and the batch's context allows. It returns the
// submission error, which Wait also reports.
func (b *Batch) Flush() error {
	b.mu.Lock()
	fns := b.pending
	b.pending = nil
	if len(fns) == 0 {
		b.mu.Unlock()
		return nil
	}
	b.flushing++
	b.mu.Unlock()
	err := b.submit(len(fns), func(h *Handle, i int) { h.run = fns[i] }, nil)
	if err != nil {
		b.setErr(err)
	}
	b.mu.Lock()
	if b.flushing--; b.flushing == 0 {
		b.idle.Broadcast()
	}
	b.mu.Unlock()
	return err
}

// Wait flushes, blocks until every member ended, cancels the batch's context and
// returns the first error: of a member (its final error) or of a submission.
func (b *Batch) Wait() error {
	b.mu.Lock()
	for {
		if len(b.pending) > 0 {
			b.mu.Unlock()
			_ = b.Flush()
			b.mu.Lock()
			continue
		}
		if b.flushing == 0 && b.left.Load() == 0 {
			break
		}
		b.idle.Wait()
	}
	err := b.err
	b.mu.Unlock()
	b.stop()
	b.cancel(context.Canceled)
	return err
}

// memberDone counts a member's end, waking Wait after the last one.
func (b *Batch) memberDone() {
	if b.left.Add(-1) == 0 {
		b.mu.Lock()
		b.idle.Broadcast()
		b.mu.Unlock()
	}
}

func (b *Batch) setErr(err error) {
	b.mu.Lock()
	first := b.err == nil
	if first {
		b.err = err
	}
	b.mu.Unlock()
	if first && b.opts.CancelOnError {
		b.cancel(err)
	}
}

// canceled reports whether the batch's context ended.
func (b *Batch) canceled() bool { return b.ctx.Err() != nil }

// cause is the error of members cancelled by the batch's context.
func (b *Batch) cause() error {
	return fmt.Errorf("%w: %w", ErrCanceled, context.Cause(b.ctx))
}

// submit admits and enqueues n members, as many at a time as the kernel has room
// for. init sets each member's function; slab, if given, holds the records.
func (b *Batch) submit(n int, init func(h *Handle, i int), slab []Handle) error {
	k := b.k
	t := Task{Priority: b.opts.Priority, Timeout: b.opts.Timeout, Retry: b.opts.Retry, Group: b.opts.Group, Key: b.opts.Key, Run: func(context.Context) error { return nil }}
	if err := t.validate(); err != nil {
		return err
	}
	gd, err := groupOf(&t, k.rc.Load())
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Field = "BatchOptions." + strings.TrimPrefix(ce.Field, "Task.")
		}
		return err
	}
	// The members share one resolved policy (initHandle would copy it for each).
	retry := &noRetry
	if t.Retry != nil {
		p := t.Retry.withDefaults()
		retry = &p
	}
	t.Retry = nil
	prio := normPriority(t.Priority)
	lvl := levelOf(prio)
	wait := noWait
	if !b.opts.NoWait {
		wait = b.ctx
	}
	hs := make([]*Handle, 0, min(n, 4096))
	for i := 0; i < n; {
		rc := k.rc.Load()
		got, err := k.acquireSome(wait, lvl, int64(n-i), rc)
		if err != nil {
			return err
		}
		if gd != nil && gd.counts != nil {
			took, err := countSome(gd, t.Key, got)
			if err != nil {
				k.release(lvl, got)
				return err
			}
			k.release(lvl, got-took)
			got = took
		}
		hs = hs[:0]
		for j := range int(got) {
			var h *Handle
			if slab != nil {
				h = &slab[i+j]
			} else {
				h = &Handle{}
			}
			k.initHandle(h, &t, prio, rc, b)
			if gd != nil {
				h.joinGroup(gd, t.Key, gd.counts != nil)
			}
			h.retry = retry
			h.run = nil
			init(h, i+j)
			hs = append(hs, h)
		}
		b.mu.Lock()
		b.members = append(b.members, hs...)
		b.mu.Unlock()
		b.left.Add(int64(len(hs)))
		if !k.enqueueMany(hs) {
			k.release(lvl, got)
			if gd != nil && gd.counts != nil {
				gd.counts.Sub(t.Key, int32(got))
			}
			b.left.Add(-int64(len(hs)))
			return ErrClosed
		}
		i += int(got)
	}
	return nil
}

// noRetry is the policy of batch members without BatchOptions.Retry.
var noRetry = RetryPolicy{MaxAttempts: 1}.withDefaults()

// acquireSome takes between 1 and want tickets of level lvl, waiting for room
// while ctx allows (nil: no wait).
func (k *Kernel) acquireSome(ctx context.Context, lvl queue.Level, want int64, rc *resolved) (int64, error) {
	for {
		if k.isClosed() {
			return 0, ErrClosed
		}
		w := &k.waiting[lvl]
		cur := w.Load()
		free := rc.capacity[lvl] - cur
		refusal := ErrQueueFull
		if lvl != queue.High && rc.degrade > 0 {
			total := k.waiting[0].Load() + k.waiting[1].Load() + k.waiting[2].Load()
			if d := rc.degrade - total; d < free {
				free = d
				refusal = ErrDegraded
			}
		}
		if free > 0 {
			n := min(free, want)
			if w.CompareAndSwap(cur, cur+n) {
				return n, nil
			}
			continue
		}
		if k.flushLazyTickets() || k.reclaimTickets() {
			continue
		}
		if ctx == nil {
			k.m.rejected[lvl].Add(int(want))
			return 0, refusal
		}
		if err := k.waitRoom(ctx, lvl, rc, true); err != nil {
			return 0, err
		}
		rc = k.rc.Load()
	}
}

// batchMemberDone accounts for a member's end. Loop only.
func (k *Kernel) batchMemberDone(h *Handle, err error) {
	b := h.batch
	if err != nil {
		b.setErr(err)
	}
	b.memberDone()
}

// Map runs fn on every item as one batch of tasks under k's limits and priorities
// and returns the results in the order of items. The first error cancels the
// members not yet finished and is returned with the results gathered so far
// (members that did not succeed leave the zero R). Map blocks until every member
// ended. It allocates one task record per item in a single slab.
func Map[T, R any](ctx context.Context, k *Kernel, items []T, fn func(ctx context.Context, item T) (R, error), opts *BatchOptions) ([]R, error) {
	switch {
	case k == nil:
		return nil, errors.New("kernel: Map: k must not be nil")
	case fn == nil:
		return nil, fmt.Errorf("kernel: Map: %w", ErrNilFunc)
	}
	o := BatchOptions{}
	if opts != nil {
		o = *opts
	}
	o.CancelOnError = true
	b := k.NewBatch(ctx, &o)
	out := make([]R, len(items))
	// A member's result is stored by its function's goroutine, which may outlive
	// the member (a timed-out zombie, a function that ignores Close): slot i is
	// claimed once, by the first attempt that returns nil within its timeout
	// before Map returns, so nothing writes out after Map read it.
	slots := make([]atomic.Uint32, len(items))
	b.runI = func(ctx context.Context, i int) error {
		r, err := fn(ctx, items[i])
		// A success counts even if the context was cancelled meanwhile (success
		// outranks a cancel), but not past the attempt's timeout: it is a zombie.
		if err == nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) && slots[i].CompareAndSwap(slotFree, slotWriting) {
			out[i] = r
			slots[i].Store(slotWritten)
		}
		return err
	}
	slab := make([]Handle, len(items))
	if err := b.submit(len(items), func(h *Handle, i int) { h.idx = i }, slab); err != nil {
		b.setErr(err)
	}
	err := b.Wait()
	for i := range slots {
		// Close the slots nobody claimed; wait out a store under way.
		for !slots[i].CompareAndSwap(slotFree, slotClosed) && slots[i].Load() == slotWriting {
			runtime.Gosched()
		}
	}
	return out, err
}

// The states of a Map result slot.
const (
	slotFree    = iota // no attempt stored a result
	slotWriting        // an attempt is storing its result
	slotWritten        // a result is stored
	slotClosed         // Map returned: later attempts store nothing
)
