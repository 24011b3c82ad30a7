package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// Example runs the pipeline fetch → 64 shards of clean → store.
func Example() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 8})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	var cleaned atomic.Int64
	f := flow.New("etl").
		Stage("fetch", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			return []byte("6400"), nil // how many rows there are
		}, nil).
		Sharded("clean",
			func(ctx context.Context, _ flow.Inputs) (int, error) { return 64, nil },
			func(ctx context.Context, s flow.Shard, in flow.Inputs) error {
				rows, _ := strconv.Atoi(string(in.Result("fetch")))
				cleaned.Add(int64(rows / s.Total)) // this shard's rows
				return nil
			},
			&flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}, Priority: kernel.Low}, MaxShards: 256}).
		Stage("store", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			return []byte(strconv.FormatInt(cleaned.Load(), 10) + " rows stored"), nil
		}, &flow.StageOptions{After: []string{"clean"}})

	h, err := flow.Run(context.Background(), k, f, nil)
	if err != nil {
		panic(err)
	}
	if err := h.Wait(context.Background()); err != nil {
		panic(err)
	}
	clean, _ := h.Stage("clean")
	fmt.Println(h.State(), clean.ShardsDone, "of", clean.Shards, "shards;", string(h.Result("store")))
	// Output: succeeded 64 of 64 shards; 6400 rows stored
}

// A sharded job on its own: the count is asked for when the job starts.
func ExampleRunSharded() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	var rows atomic.Int64
	h, err := flow.RunSharded(context.Background(), k, "reconcile",
		func(ctx context.Context, _ flow.Inputs) (int, error) {
			return 16, nil // how many partitions there are now
		},
		func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
			rows.Add(100) // partition s.Index of s.Total
			return nil
		},
		&flow.ShardOptions{MaxShards: 64, MaxParallel: 4, StageOptions: flow.StageOptions{
			Priority: kernel.Low,
			Retry:    &kernel.RetryPolicy{MaxAttempts: 5}, // a failed shard retries alone
		}})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()), rows.Load())
	// Output: <nil> 1600
}

// Under ContinueIndependent a failed stage skips only the stages after it.
func Example_continueIndependent() {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	ok := func(ctx context.Context, _ flow.Inputs) ([]byte, error) { return nil, nil }
	f := flow.New("nightly").
		Stage("export", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			return nil, kernel.Permanent(errors.New("disk full")) // not retried
		}, nil).
		Stage("upload", ok, &flow.StageOptions{After: []string{"export"}}).
		Stage("vacuum", ok, nil)
	h, err := flow.Run(context.Background(), k, f, &flow.Options{OnFailure: flow.ContinueIndependent})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()))
	for _, s := range h.Stages() {
		fmt.Println(s.Name, s.State)
	}
	// Output:
	// flow "nightly": stage "export": disk full
	// export failed
	// upload skipped
	// vacuum succeeded
}

// A durable flow: its runs are stored, and go on after a crash in whichever
// process on the store has the flow registered.
func ExampleRegister() {
	st := storekit.NewMemoryStore() // or a mysqlstore.Store, shared by every process
	k, err := kernel.New(kernel.Config{Store: st})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()

	f := flow.New("etl").
		Stage("fetch", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
			return []byte("6400 rows of " + string(in.Input())), nil // stored with the stage
		}, nil).
		Sharded("clean",
			func(ctx context.Context, _ flow.Inputs) (int, error) { return 8, nil },
			func(ctx context.Context, s flow.Shard, in flow.Inputs) error {
				return nil // idempotent per (in.RunID(), s.Index): a crash may run it again
			},
			&flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}}}).
		Stage("store", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
			return []byte("stored " + string(in.Result("fetch"))), nil // read from the store
		}, &flow.StageOptions{After: []string{"clean"}})

	// Every process that runs the flow registers it at its start, with the same definition.
	d, err := flow.Register(k, st, f, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	run, err := d.Start(ctx, []byte("2030-01-02"), nil) // returns once the run is stored
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Wait(ctx, run))
	info, err := d.Inspect(ctx, run)
	if err != nil {
		panic(err)
	}
	for _, s := range info.Stages {
		fmt.Println(s.Name, s.State, s.ShardsDone, "of", s.Shards)
	}
	// Output:
	// <nil>
	// fetch succeeded 0 of 0
	// clean succeeded 8 of 8
	// store succeeded 0 of 0
}
