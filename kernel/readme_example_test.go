package kernel_test

// The README shows the bodies of these examples; internal/doccheck fails the tests
// when a README block and the body it names differ. The guides' longer examples are
// in guides_example_test.go.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
)

// Urgent work overtakes queued bulk work.
func Example_readmePriorities() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 8, Reserve: kernel.Reserve{High: 2}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	work := func(context.Context) error { return nil }
	for range 1000 { // bulk work, fire-and-forget: under saturation Low keeps 5 % of the starts
		_ = k.TryGo(kernel.Task{Priority: kernel.Low, Run: work})
	}
	// Starts in the next slot that frees, ahead of every queued Low task.
	h, err := k.TrySubmit(kernel.Task{Priority: kernel.High, Run: work})
	if err != nil {
		panic(err) // ErrQueueFull: High's bucket is full
	}
	fmt.Println(h.Wait(context.Background()), h.State())
	// Output: <nil> succeeded
}

// A flaky upstream: a timeout per attempt, retries with backoff, and an error that
// is not worth retrying.
func Example_readmeRetries() {
	k, err := kernel.New(kernel.Config{RetryBudget: kernel.RetryBudget{Ratio: 0.1}}) // retries <= 10 % of first attempts + 10/s
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	h, err := k.TrySubmit(kernel.Task{
		Timeout: 2 * time.Second, // each attempt's context ends then
		Retry:   &kernel.RetryPolicy{MaxAttempts: 5, Base: time.Millisecond},
		Run: func(ctx context.Context) error {
			if info, _ := kernel.TaskInfo(ctx); info.Attempt == 1 {
				return errors.New("upstream: 503") // retried after a backoff
			}
			return kernel.Permanent(errors.New("upstream: 400")) // not retried
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()), h.Attempts(), h.State())
	// Output: upstream: 400 2 failed
}

// Per-host limits in a group: each host runs at most 2 calls at once and 20 a second.
func Example_readmeGroups() {
	k, err := kernel.New(kernel.Config{Groups: map[string]kernel.GroupConfig{
		"upstream": { // per host: 2 calls at once, 20 a second, a circuit breaker
			PerKey:  kernel.Limits{Concurrency: 2, Rate: kernel.Rate{N: 20, Per: time.Second}},
			Breaker: &kernel.BreakerConfig{},
		},
	}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	h, err := k.TrySubmit(kernel.Task{Group: "upstream", Key: "api.example", Run: func(context.Context) error {
		return nil // or &kernel.RateLimitedError{RetryAfter: d} on a 429: the host pauses, no attempt spent
	}})
	if err != nil {
		panic(err) // ErrGroupFull past GroupConfig.MaxWaiting
	}
	_ = k.Pause(kernel.Selector{Group: "upstream", Key: "api.example"}) // an incident: its tasks wait, in order
	_ = k.Resume(kernel.Selector{Group: "upstream", Key: "api.example"})
	fmt.Println(h.Wait(context.Background()))
	// Output: <nil>
}

// Figures, metrics, a change of limits and a graceful stop.
func Example_readmeOperations() {
	k, err := kernel.New(kernel.Config{Name: "api"}) // Name labels the series: kernel="api"
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { k.WritePrometheus(w) })
	ui, err := console.New(console.Options{Kernel: k}) // pages, JSON; read-only unless Actions: true
	if err != nil {
		panic(err)
	}
	mux.Handle("/console/", http.StripPrefix("/console", ui))
	st := k.Stats() // never waits for the scheduler
	fmt.Println(st.Running, st.Queued.High, st.ByPriority.High.Wait.P99)
	fmt.Println(k.Update(func(c *kernel.Config) { c.MaxConcurrency = 200 })) // while it runs
	fmt.Println(k.Shutdown(context.Background()))                            // drain (ctx bounds it); Close: at once
	// Output:
	// 0 0 0s
	// <nil>
	// <nil>
}
