package flow_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// Example runs the pipeline fetch → 64 shards of clean → store.
func Example() {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 8})
	if err != nil {
		panic(err)
	}
	defer k.Close()

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
