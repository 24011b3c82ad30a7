package kernel

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// groupPool submits every task to a group, rotating over keys.
type groupPool struct {
	kernelPool
	keys []string
	i    int
}

func (p *groupPool) submit(fn func(context.Context) error) {
	key := p.keys[p.i%len(p.keys)]
	p.i++
	h, err := p.k.Submit(context.Background(), Task{Group: "g", Key: key, Run: fn})
	if err != nil {
		panic(err)
	}
	p.hs = append(p.hs, h)
	if len(p.hs) == cap(p.hs) {
		p.drain()
	}
}

// BenchmarkGroupOverhead measures the per-task cost of a group's gate: no-op
// tasks with a handle, without a group, in one key without limits, and over 1,000
// keys limited to 5 at once each, alone, with a rate that never throttles them,
// and with a breaker that stays closed.
func BenchmarkGroupOverhead(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	b.Run("group=none", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc})
		benchPool(b, &kernelPool{k: k, handle: true, hs: make([]*Handle, 0, 4096)})
	})
	b.Run("group=onekey", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc, Groups: map[string]GroupConfig{"g": {}}})
		benchPool(b, &groupPool{kernelPool: kernelPool{k: k, hs: make([]*Handle, 0, 4096)}, keys: keys[:1]})
	})
	b.Run("group=1000keys-conc5", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc, Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 5}}}})
		benchPool(b, &groupPool{kernelPool: kernelPool{k: k, hs: make([]*Handle, 0, 4096)}, keys: keys})
	})
	b.Run("group=1000keys-conc5-rate", func(b *testing.B) {
		lim := Limits{Concurrency: 5, Rate: Rate{N: 1_000_000, Per: time.Second, Burst: 100}}
		k, _ := New(Config{MaxConcurrency: benchConc, Groups: map[string]GroupConfig{"g": {PerKey: lim}}})
		benchPool(b, &groupPool{kernelPool: kernelPool{k: k, hs: make([]*Handle, 0, 4096)}, keys: keys})
	})
	b.Run("group=1000keys-conc5-breaker", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc, Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 5}, Breaker: &BreakerConfig{}}}})
		benchPool(b, &groupPool{kernelPool: kernelPool{k: k, hs: make([]*Handle, 0, 4096)}, keys: keys})
	})
}
