package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// Fan out over a slice with Map: results come back in order, under the kernel's
// concurrency limit and at the priority chosen.
func ExampleMap() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 4})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	words := []string{"alpha", "beta", "gamma"}
	upper, err := kernel.Map(context.Background(), k, words,
		func(_ context.Context, w string) (string, error) { return strings.ToUpper(w), nil },
		&kernel.BatchOptions{Priority: kernel.Low})
	fmt.Println(upper, err)
	// Output: [ALPHA BETA GAMMA] <nil>
}

// Tasks are picked in cycles: here one slot and cycles of 4 picks, in which Low
// and Normal each have a floor of 1 pick and High takes the rest. Low's floor
// comes first in a cycle, so it never waits more than one cycle; the floors are
// spread over the cycle, not run in blocks. A higher-priority pick overtakes a
// lower one picked ahead of it: when the slot frees, Low's pick and the next High
// pick wait together, and the High one runs first. The task holding the slot was
// the first cycle's Normal pick.
func Example_priorities() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 1, Quotas: kernel.Quotas{High: 2, Normal: 1, LowGuaranteed: 1}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	hold := make(chan struct{})
	// The first task holds the only slot. Its timeout keeps it off the fast lane,
	// so the loop picks it, like the others, and the picks below are always the
	// same.
	first, _ := k.TrySubmit(kernel.Task{Timeout: time.Hour, Run: func(context.Context) error { <-hold; return nil }})
	for k.Stats().Running != 1 {
		runtime.Gosched()
	}

	order := make(chan string, 8)
	var hs []*kernel.Handle
	for _, p := range []kernel.Priority{kernel.Low, kernel.Low, kernel.Normal, kernel.Normal, kernel.High, kernel.High, kernel.High} {
		h, _ := k.TrySubmit(kernel.Task{Priority: p, Run: func(context.Context) error { order <- p.String(); return nil }})
		hs = append(hs, h)
	}
	// Let the loop queue them all before the slot frees.
	for st := k.Stats(); st.Queued.High+st.Queued.Normal+st.Queued.Low != 7; st = k.Stats() {
		runtime.Gosched()
	}
	close(hold)
	_ = first.Wait(context.Background())
	for _, h := range hs {
		_ = h.Wait(context.Background())
	}
	close(order)
	var got []string
	for s := range order {
		got = append(got, s)
	}
	fmt.Println(strings.Join(got, " "))
	// Output: high low high high normal low normal
}

// A task that fails is retried with backoff; Permanent stops retries.
func Example_retry() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	var calls atomic.Int32
	h, _ := k.TrySubmit(kernel.Task{
		Retry: &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond},
		Run: func(context.Context) error {
			if calls.Add(1) < 3 {
				return errors.New("upstream busy")
			}
			return nil
		},
	})
	fmt.Println(h.Wait(context.Background()), h.Attempts(), h.State())
	// Output: <nil> 3 succeeded
}

// A task that outlives its timeout ends TimedOut; its context reports the deadline.
func Example_timeout() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	h, _ := k.TrySubmit(kernel.Task{
		Timeout: 20 * time.Millisecond,
		Retry:   &kernel.RetryPolicy{MaxAttempts: 1},
		Run: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		},
	})
	err = h.Wait(context.Background())
	fmt.Println(errors.Is(err, kernel.ErrTimeout), h.State())
	// Output: true timed_out
}

// Shutdown stops intake and drains what was accepted.
func ExampleKernel_Shutdown() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 2})
	if err != nil {
		panic(err)
	}
	var done atomic.Int32
	for range 10 {
		_ = k.TryGo(kernel.Task{Run: func(context.Context) error { done.Add(1); return nil }})
	}
	fmt.Println(k.Shutdown(context.Background()), done.Load())
	_, err = k.TrySubmit(kernel.Task{Run: func(context.Context) error { return nil }})
	fmt.Println(err)
	// Output:
	// <nil> 10
	// kernel: closed
}

// Durable tasks name a registered kind and carry their input as bytes. In the
// default acknowledged mode SubmitDurable returns once the task is in the store, so
// a crash after that loses nothing: the next kernel on the same store runs it.
// (A real service passes a database store, such as mysqlstore.)
func ExampleKernel_SubmitDurable() {
	store := storekit.NewMemoryStore()
	k, err := kernel.New(kernel.Config{Store: store})
	if err != nil {
		panic(err)
	}
	if err := k.Register("email.send", func(_ context.Context, payload []byte) error {
		fmt.Printf("sending %s\n", payload)
		return nil
	}); err != nil {
		panic(err)
	}
	h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{
		Kind: "email.send", Payload: []byte(`{"to":"ada@example.com"}`), UniqueKey: "welcome-ada",
	})
	if err != nil {
		panic(err)
	}
	_ = h.Wait(context.Background())
	_ = k.Shutdown(context.Background()) // writes the last completions to the store
	st, _ := store.Get(context.Background(), h.ID())
	fmt.Println(st.State, st.Attempt)
	// Output:
	// sending {"to":"ada@example.com"}
	// succeeded 1
}

// A task's function learns which task and attempt it runs for: with the ID, the
// attempt makes an idempotency key under retries.
func ExampleTaskInfo() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	h, _ := k.TrySubmit(kernel.Task{ID: "invoice-42", Priority: kernel.High, Run: func(ctx context.Context) error {
		info, ok := kernel.TaskInfo(ctx)
		fmt.Println(info.ID, info.Priority, info.Attempt, ok)
		return nil
	}})
	_ = h.Wait(context.Background())
	// Output: invoice-42 high 1 true
}
