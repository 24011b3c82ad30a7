package kernel_test

// The guides in docs/ show the bodies of these examples; internal/doccheck fails the
// tests when a block of a guide and the body it names differ.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// Per-key limits: at most 2 calls at once and 20 per second per host, 8 at once in
// all; a host that answers 429 pauses without costing an attempt.
func Example_groups() {
	k, err := kernel.New(kernel.Config{Groups: map[string]kernel.GroupConfig{
		"upstream": {
			PerKey:     kernel.Limits{Concurrency: 2, Rate: kernel.Rate{N: 20, Per: time.Second}},
			Total:      kernel.Limits{Concurrency: 8},
			MaxWaiting: 1000, // per host; beyond it ErrGroupFull
		},
	}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	var once sync.Once
	call := func(context.Context) error {
		var err error
		once.Do(func() { // the upstream asks us to slow down, once
			err = &kernel.RateLimitedError{RetryAfter: 50 * time.Millisecond}
		})
		return err
	}
	var hs []*kernel.Handle
	for i := range 12 {
		host := []string{"a.example", "b.example", "c.example"}[i%3]
		h, err := k.TrySubmit(kernel.Task{Group: "upstream", Key: host, Run: call})
		if err != nil {
			panic(err)
		}
		hs = append(hs, h)
	}
	// Pause a host during an incident: its tasks stay queued, in order.
	_ = k.Pause(kernel.Selector{Group: "upstream", Key: "c.example"})
	_ = k.Resume(kernel.Selector{Group: "upstream", Key: "c.example"})
	ok := 0
	for _, h := range hs {
		if h.Wait(context.Background()) == nil && h.Attempts() == 1 {
			ok++ // the rate-limited attempt was not spent
		}
	}
	fmt.Println(ok, k.Stats().Groups["upstream"].RateLimited)
	// Output:
	// 12 1
}

// Ordered keys: an account's entries apply one at a time, in the order they were
// submitted, whatever their priorities; an entry that fails holds its account until
// its retry succeeded.
func Example_ordered() {
	k, err := kernel.New(kernel.Config{Groups: map[string]kernel.GroupConfig{
		"ledger": {Ordered: true}, // per account: one task at a time, in order
	}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	var mu sync.Mutex
	var applied []string
	failed := false
	apply := func(entry string) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if entry == "deposit" && !failed {
				failed = true
				return errors.New("ledger: timeout") // retried after its backoff
			}
			applied = append(applied, entry)
			return nil
		}
	}
	retry := &kernel.RetryPolicy{Base: 10 * time.Millisecond}
	var hs []*kernel.Handle
	for _, entry := range []string{"open", "deposit", "withdraw", "close"} {
		prio := kernel.Normal
		if entry == "close" {
			prio = kernel.High // does not overtake the entries before it
		}
		h, err := k.TrySubmit(kernel.Task{Group: "ledger", Key: "acct-42", Priority: prio, Retry: retry, Run: apply(entry)})
		if err != nil {
			panic(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		_ = h.Wait(context.Background())
	}
	fmt.Println(strings.Join(applied, " "))
	// Output:
	// open deposit withdraw close
}

// High work overtakes queued Low work; under saturation the quotas share the slots.
func Example_quotas() {
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: 64,
		Quotas:         kernel.Quotas{High: 17, Normal: 2, LowGuaranteed: 1}, // the defaults: 85 / 10 / 5 %
		Reserve:        kernel.Reserve{High: 8},                              // 8 slots only High may take
		AgeAfter:       10 * time.Second,                                     // then picked one level higher
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	// Bulk work, fire-and-forget: no handle, no allocation.
	for range 1000 {
		if err := k.TryGo(kernel.Task{Priority: kernel.Low, Run: func(ctx context.Context) error {
			select { // a millisecond of work that stops when its context ends
			case <-time.After(time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}); err != nil {
			panic(err)
		}
	}
	// An urgent task starts in the next slot that frees, ahead of every queued Low task.
	h, err := k.TrySubmit(kernel.Task{Priority: kernel.High, Run: func(context.Context) error { return nil }})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()), h.State())

	// Quotas, Reserve, AgeAfter and Capacity may change while the kernel runs.
	err = k.Update(func(c *kernel.Config) { c.Reserve.High = 16 })
	fmt.Println(err)
	// Output:
	// <nil> succeeded
	// <nil>
}

// A timeout cancels the attempt's context; a function that watches it ends at once.
func Example_timeouts() {
	k, err := kernel.New(kernel.Config{
		DefaultTimeout: kernel.ByPriority[time.Duration]{High: time.Second, Normal: 30 * time.Second},
		MaxZombies:     10,          // functions that ignore their context and give their slot back
		ZombieGrace:    time.Second, // then they are logged with their stack (Kernel.Zombies)
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	h, err := k.TrySubmit(kernel.Task{
		Timeout: 20 * time.Millisecond, // this task's own timeout, per attempt
		Retry:   &kernel.RetryPolicy{MaxAttempts: 1},
		Run: func(ctx context.Context) error {
			select {
			case <-time.After(time.Minute): // a slow upstream
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	if err != nil {
		panic(err)
	}
	err = h.Wait(context.Background())
	fmt.Println(errors.Is(err, kernel.ErrTimeout), h.State())
	// Output: true timed_out
}

// A failed attempt is retried with backoff; Permanent ends the task at once.
func Example_retries() {
	k, err := kernel.New(kernel.Config{
		Retry: kernel.ByPriority[kernel.RetryPolicy]{
			Low: kernel.RetryPolicy{MaxAttempts: 1}, // no retries for bulk work
		},
		RetryBudget: kernel.RetryBudget{Ratio: 0.1}, // retries ≤ 10 % of first attempts (+ 10/s)
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	h, err := k.TrySubmit(kernel.Task{
		Retry: &kernel.RetryPolicy{MaxAttempts: 5, Base: time.Millisecond, Max: time.Second},
		Run: func(ctx context.Context) error {
			info, _ := kernel.TaskInfo(ctx)
			if info.Attempt == 1 {
				return errors.New("upstream: 503") // retried after a backoff
			}
			return kernel.Permanent(errors.New("upstream: 400 bad request")) // not retried
		},
	})
	if err != nil {
		panic(err)
	}
	err = h.Wait(context.Background())
	fmt.Println(h.Attempts(), h.State(), err)
	// Output: 2 failed upstream: 400 bad request
}

// When a priority's bucket is full, TrySubmit refuses and Submit waits for room.
func Example_admission() {
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: 1,
		Capacity:       kernel.ByPriority[int]{High: 100, Normal: 100, Low: 1},
		EvictLow:       true, // a High task that finds no room replaces the newest queued Low one
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	release := make(chan struct{})
	busy := kernel.Task{Run: func(context.Context) error { <-release; return nil }}
	low := kernel.Task{Priority: kernel.Low, Run: func(context.Context) error { return nil }}

	_, _ = k.TrySubmit(busy) // takes the only slot
	_, _ = k.TrySubmit(low)  // fills Low's bucket

	_, err = k.TrySubmit(low)
	fmt.Println(errors.Is(err, kernel.ErrQueueFull)) // refused at once; ErrDegraded near the total

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = k.Submit(ctx, low)
	fmt.Println(errors.Is(err, context.DeadlineExceeded)) // waited for room until ctx ended

	close(release)
	// Output:
	// true
	// true
}

// Map and Batch fan out under the kernel's limits and priorities.
func Example_batch() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 8})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	ctx := context.Background()

	// Map: results in the order of the items; the first error cancels the others.
	ids := []int{1, 2, 3}
	names, err := kernel.Map(ctx, k, ids, func(_ context.Context, id int) (string, error) {
		return fmt.Sprintf("user-%d", id), nil
	}, &kernel.BatchOptions{
		Priority: kernel.Low,
		Timeout:  time.Second,
		Retry:    &kernel.RetryPolicy{MaxAttempts: 3}, // members are not retried without it
	})
	fmt.Println(names, err)

	// Batch: errgroup-shaped; Wait returns the first error.
	b := k.NewBatch(ctx, &kernel.BatchOptions{CancelOnError: true})
	for _, id := range ids {
		b.Go(func(ctx context.Context) error {
			if id == 2 {
				return fmt.Errorf("user %d: not found", id)
			}
			return nil
		})
	}
	fmt.Println(b.Wait())
	// Output:
	// [user-1 user-2 user-3] <nil>
	// user 2: not found
}

// TaskInfo tells a function which task and attempt it runs for.
func Example_taskInfo() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	h, err := k.TrySubmit(kernel.Task{
		ID:    "invoice-42",
		Retry: &kernel.RetryPolicy{Base: time.Millisecond},
		Run: func(ctx context.Context) error {
			info, _ := kernel.TaskInfo(ctx)
			// The ID is the same for every attempt: an idempotency key for the upstream.
			fmt.Println("charge", info.ID, "attempt", info.Attempt)
			if info.Attempt == 1 {
				return errors.New("connection reset")
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()))
	// Output:
	// charge invoice-42 attempt 1
	// charge invoice-42 attempt 2
	// <nil>
}

// A task sees the values of the context it was submitted with, never its
// cancellation; a task with an ID can be cancelled by that ID.
func Example_valuesAndCancel() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	type traceID struct{}
	req, cancelReq := context.WithCancel(context.WithValue(context.Background(), traceID{}, "t-7f3a"))
	h, err := k.Submit(req, kernel.Task{
		Run: func(ctx context.Context) error {
			fmt.Println("trace", ctx.Value(traceID{}))
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	cancelReq() // the request ends; the task does not
	fmt.Println(h.Wait(context.Background()))

	// A nightly report, due in an hour, cancelled by its ID (a durable task's
	// stored ID works the same, also after a restart).
	if err := k.TryGo(kernel.Task{ID: "report-2026-12-01", Delay: time.Hour, Run: func(context.Context) error {
		return nil
	}}); err != nil {
		panic(err)
	}
	n, err := k.Cancel(context.Background(), "report-2026-12-01")
	fmt.Println("cancelled", n, err)
	// Output:
	// trace t-7f3a
	// <nil>
	// cancelled 1 <nil>
}

// Stats, events and Prometheus metrics describe what the kernel does.
func Example_observability() {
	var mu sync.Mutex
	var changes []string
	k, err := kernel.New(kernel.Config{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), // zombies, dropped events, shutdown
		OnEvent: func(e kernel.Event) { // every state change, on a goroutine of its own
			mu.Lock()
			changes = append(changes, e.To.String())
			mu.Unlock()
		},
	})
	if err != nil {
		panic(err)
	}

	h, err := k.TrySubmit(kernel.Task{Priority: kernel.High, Run: func(context.Context) error { return nil }})
	if err != nil {
		panic(err)
	}
	_ = h.Wait(context.Background())

	st := k.Stats()
	high := st.ByPriority.High
	fmt.Println(high.Submitted, high.Succeeded, high.Wait.Count) // and Wait/Exec percentiles

	var buf bytes.Buffer
	k.WritePrometheus(&buf) // serve it on /metrics
	fmt.Println(strings.Contains(buf.String(), "ax_tasks_succeeded_total"))

	_ = k.Shutdown(context.Background()) // waits for OnEvent to return
	mu.Lock()
	fmt.Println(strings.Join(changes, " "))
	mu.Unlock()
	// Output:
	// 1 1 1
	// true
	// queued running succeeded
}

// Replicas share one store: each kernel is an owner with a lease, and a task in the
// pool runs in whichever kernel has a free slot.
func Example_sharedStore() {
	ctx := context.Background()
	store := storekit.NewMemoryStore() // in production: a mysqlstore.Store, one table for every replica
	var sent atomic.Int32
	send := func(ctx context.Context, payload []byte) error { sent.Add(1); return nil }

	var replicas []*kernel.Kernel
	for _, name := range []string{"api-0", "api-1"} {
		k, err := kernel.New(kernel.Config{
			Store: store,
			Owner: name,             // stable across restarts: a restarted replica takes its tasks back at once
			Lease: 15 * time.Second, // after a crash, the others take its tasks over within about Lease + Lease/3
		})
		if err != nil {
			panic(err)
		}
		defer func() { _ = k.Shutdown(ctx) }()
		if err := k.Register("email.send", send); err != nil {
			panic(err)
		}
		replicas = append(replicas, k)
	}

	// A durable task runs where it is submitted, unless that kernel is full or the task
	// asks for the pool: then whichever kernel has a free slot claims it. The handle
	// follows it there.
	h, err := replicas[0].SubmitDurable(ctx, kernel.DurableTask{Kind: "email.send", Payload: []byte("ada"), Pool: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(ctx), sent.Load())
	fmt.Println(replicas[0].Stats().Store.Owner)
	// Output:
	// <nil> 1
	// api-0
}

// A circuit breaker per key: once enough attempts failed it opens, and with FailFast
// the key's tasks end at once with ErrCircuitOpen instead of calling a dead upstream.
func Example_breaker() {
	k, err := kernel.New(kernel.Config{Groups: map[string]kernel.GroupConfig{
		"payments": {
			PerKey: kernel.Limits{Concurrency: 1},
			Breaker: &kernel.BreakerConfig{
				Window:       10 * time.Second, // outcomes are counted over this span
				MinCalls:     3,                // the breaker opens only once it saw this many
				FailureRatio: 0.5,              // ...and at least half of them failed
				OpenFor:      time.Minute,      // then it lets Probes (1) attempts through
				FailFast:     true,             // while open, the key's tasks end with ErrCircuitOpen
			},
		},
	}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	down := func(context.Context) error { return errors.New("upstream: 503") }
	once := &kernel.RetryPolicy{MaxAttempts: 1}
	for range 3 {
		h, err := k.TrySubmit(kernel.Task{Group: "payments", Key: "psp.example", Retry: once, Run: down})
		if err != nil {
			panic(err)
		}
		_ = h.Wait(context.Background())
	}
	h, err := k.TrySubmit(kernel.Task{Group: "payments", Key: "psp.example", Run: down})
	if err != nil {
		panic(err)
	}
	err = h.Wait(context.Background())
	fmt.Println(errors.Is(err, kernel.ErrCircuitOpen), h.Attempts()) // no attempt spent
	fmt.Println(k.Stats().Groups["payments"].OpenBreakers)
	// Output:
	// true 0
	// 1
}

// Update changes the fields marked Changeable while the kernel runs. An update that
// changes any other field is refused whole.
func Example_update() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 100})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	err = k.Update(func(c *kernel.Config) {
		c.MaxConcurrency = 200                           // more tasks start at once from now on
		c.Retry.Low = kernel.RetryPolicy{MaxAttempts: 1} // the next retries of Low tasks are decided under it
	})
	fmt.Println(err)
	err = k.Update(func(c *kernel.Config) { c.Tick = 10 * time.Millisecond }) // fixed at New
	fmt.Println(err)
	// Output:
	// <nil>
	// kernel: Config.Tick: cannot change while the kernel runs
}

// RunNow starts a task that waits for its time: a report due in an hour runs now.
func Example_runNow() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	ctx := context.Background()

	h, err := k.Submit(ctx, kernel.Task{ID: "report-2026-12-01", Delay: time.Hour, Run: func(context.Context) error {
		return nil
	}})
	if err != nil {
		panic(err)
	}
	n, err := k.RunNow(ctx, "report-2026-12-01") // due in an hour: runs now
	fmt.Println("moved", n, err, h.Wait(ctx))
	_, err = k.RunNow(ctx, "report-2026-12-01") // it ended: no live task has the ID
	fmt.Println(errors.Is(err, kernel.ErrUnknownTask))
	// Output:
	// moved 1 <nil> <nil>
	// true
}

// A unique key with a window: at most one report per customer and hour, however many
// times the hour's submit is retried, even after the first report ran.
func Example_uniqueWindow() {
	ctx := context.Background()
	k, err := kernel.New(kernel.Config{Store: storekit.NewMemoryStore()})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Shutdown(ctx) }()
	if err := k.Register("report", func(context.Context, []byte) error { return nil }); err != nil {
		panic(err)
	}
	hour := time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)
	report := kernel.DurableTask{
		Kind:        "report",
		UniqueKey:   "report/customer-42/" + hour.Format("2006010215"),
		UniqueUntil: hour.Add(time.Hour), // the key stays held after the task ends, until then
	}
	first, err := k.SubmitDurable(ctx, report)
	if err != nil {
		panic(err)
	}
	fmt.Println(first.Wait(ctx))

	_, err = k.SubmitDurable(ctx, report) // the same hour again: refused, naming the first
	var dup *store.DuplicateKeyError
	fmt.Println(errors.Is(err, store.ErrDuplicateKey), errors.As(err, &dup) && dup.Holder == first.ID())
	// Output:
	// <nil>
	// true true
}
