package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// A task leaves a result for its caller with SetResult; the handle returns it
// once the task ended.
func Example_result() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	h, err := k.TrySubmit(kernel.Task{Run: func(ctx context.Context) error {
		return kernel.SetResult(ctx, []byte("42 rows exported"))
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()), string(h.Result()))
	// Output:
	// <nil> 42 rows exported
}

// A durable task's result is stored with its end, and each attempt leaves a
// record: both are read back by ID from the store.
func Example_durableResultAndHistory() {
	s := storekit.NewMemoryStore()
	k, err := kernel.New(kernel.Config{Store: s, Retry: kernel.ByPriority[kernel.RetryPolicy]{
		Normal: kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond},
	}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	err = k.Register("export", func(ctx context.Context, payload []byte) error {
		if info, _ := kernel.TaskInfo(ctx); info.Attempt == 1 {
			return errors.New("upstream busy")
		}
		return kernel.SetResult(ctx, append([]byte("exported "), payload...))
	})
	if err != nil {
		panic(err)
	}
	h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "export", Payload: []byte("invoices")})
	if err != nil {
		panic(err)
	}
	if err := h.Wait(context.Background()); err != nil {
		panic(err)
	}
	if err := k.Shutdown(context.Background()); err != nil { // the journal stored the end
		panic(err)
	}
	t, err := s.Get(context.Background(), h.ID())
	if err != nil {
		panic(err)
	}
	fmt.Println(t.State, string(t.Result))
	for _, a := range t.History {
		fmt.Println("attempt", a.Number, a.Outcome, a.Error)
	}
	// Output:
	// succeeded exported invoices
	// attempt 1 failed upstream busy
	// attempt 2 succeeded
}
