package flow_test

import (
	"context"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// pipeline runs fetch → 64 shards of clean → store once, with empty work: what
// a stage costs beyond its work.
type pipeline interface {
	run(ctx context.Context) error
}

type flowPipeline struct {
	k *kernel.Kernel
	f *flow.Flow
}

func newFlowPipeline(b *testing.B) *flowPipeline {
	k, err := kernel.New(kernel.Config{MaxConcurrency: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k.Close() })
	var n atomic.Int64
	f := flow.New("bench").
		Stage("fetch", func(context.Context, flow.Inputs) ([]byte, error) { return []byte("x"), nil }, nil).
		Sharded("clean",
			func(context.Context, flow.Inputs) (int, error) { return 64, nil },
			func(_ context.Context, _ flow.Shard, in flow.Inputs) error {
				n.Add(int64(len(in.Result("fetch"))))
				return nil
			}, &flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}}}).
		Stage("store", func(context.Context, flow.Inputs) ([]byte, error) { return nil, nil }, &flow.StageOptions{After: []string{"clean"}})
	return &flowPipeline{k: k, f: f}
}

func (p *flowPipeline) run(ctx context.Context) error { return flow.RunWait(ctx, p.k, p.f, nil) }

// handPipeline is the same by hand: errgroups and a channel.
type handPipeline struct{}

func (handPipeline) run(ctx context.Context) error {
	var g errgroup.Group
	fetched := make(chan []byte, 1)
	g.Go(func() error { fetched <- []byte("x"); return nil })
	if err := g.Wait(); err != nil {
		return err
	}
	in := <-fetched
	var n atomic.Int64
	sg, _ := errgroup.WithContext(ctx)
	sg.SetLimit(4)
	for range 64 {
		sg.Go(func() error { n.Add(int64(len(in))); return nil })
	}
	if err := sg.Wait(); err != nil {
		return err
	}
	var st errgroup.Group
	st.Go(func() error { return nil })
	return st.Wait()
}

func BenchmarkPipeline(b *testing.B) {
	for _, c := range []struct {
		name string
		p    func(b *testing.B) pipeline
	}{
		{"flow", func(b *testing.B) pipeline { return newFlowPipeline(b) }},
		{"errgroup", func(*testing.B) pipeline { return handPipeline{} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := c.p(b)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := p.run(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
