package kernel

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks compare the kernel with a hand-written channel worker pool, the
// in-run baseline: same concurrency (500), same no-op task.

const benchConc = 500

// pool is what the benchmarks drive.
type pool interface {
	submit(fn func(context.Context) error)
	wait() // until everything submitted has run
	close()
}

type chanPool struct {
	ch chan func(context.Context) error
	wg sync.WaitGroup // tasks
	ws sync.WaitGroup // workers
}

func newChanPool(n int) *chanPool {
	p := &chanPool{ch: make(chan func(context.Context) error, n)}
	p.ws.Add(n)
	for range n {
		go func() {
			defer p.ws.Done()
			for f := range p.ch {
				_ = f(context.Background())
				p.wg.Done()
			}
		}()
	}
	return p
}

func (p *chanPool) submit(fn func(context.Context) error) { p.wg.Add(1); p.ch <- fn }
func (p *chanPool) wait()                                 { p.wg.Wait() }
func (p *chanPool) close()                                { close(p.ch); p.ws.Wait() }

type kernelPool struct {
	k      *Kernel
	handle bool
	hs     []*Handle
}

func (p *kernelPool) submit(fn func(context.Context) error) {
	if p.handle {
		h, err := p.k.Submit(context.Background(), Task{Run: fn})
		if err != nil {
			panic(err)
		}
		p.hs = append(p.hs, h)
		if len(p.hs) == cap(p.hs) {
			p.drain()
		}
		return
	}
	if err := p.k.Go(context.Background(), Task{Run: fn}); err != nil {
		panic(err)
	}
}

func (p *kernelPool) drain() {
	for _, h := range p.hs {
		<-h.Done()
	}
	p.hs = p.hs[:0]
}

func (p *kernelPool) wait() {
	p.drain()
	for {
		st := p.k.Stats()
		var ended uint64
		for _, ps := range []PriorityStats{st.ByPriority.High, st.ByPriority.Normal, st.ByPriority.Low} {
			ended += ps.Succeeded + ps.Failed
		}
		var sub uint64
		for _, ps := range []PriorityStats{st.ByPriority.High, st.ByPriority.Normal, st.ByPriority.Low} {
			sub += ps.Submitted
		}
		if ended == sub && st.Queued.Normal == 0 {
			return
		}
		runtimeGosched()
	}
}

func (p *kernelPool) close() { _ = p.k.Close() }

func benchPool(b *testing.B, p pool) {
	b.ReportAllocs()
	for b.Loop() {
		p.submit(noop)
	}
	p.wait()
	b.StopTimer()
	if kp, ok := p.(*kernelPool); ok {
		b.ReportMetric(float64(kp.k.Stats().Executors), "executors")
	}
	p.close()
}

func BenchmarkNoop(b *testing.B) {
	b.Run("impl=chanpool", func(b *testing.B) { benchPool(b, newChanPool(benchConc)) })
	b.Run("impl=kernel-go", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc})
		benchPool(b, &kernelPool{k: k})
	})
	b.Run("impl=kernel-handle", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc})
		benchPool(b, &kernelPool{k: k, handle: true, hs: make([]*Handle, 0, 4096)})
	})
}

func BenchmarkTrySubmitRejected(b *testing.B) {
	k, _ := New(Config{MaxConcurrency: 1, DegradeAt: 1, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 1}})
	defer func() { _ = k.Close() }()
	g := make(gate)
	defer g.open()
	for i := range 2 {
		if _, err := k.TrySubmit(Task{Run: g.run}); err != nil {
			b.Fatal(err)
		}
		for i == 0 && k.Stats().Running != 1 {
			runtimeGosched()
		}
	}
	for k.Stats().Queued.Normal != 1 {
		runtimeGosched()
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := k.TryGo(Task{Run: noop}); err == nil {
			b.Fatal("TryGo() = nil, want ErrQueueFull")
		}
	}
}

func BenchmarkMap1000(b *testing.B) {
	items := make([]int, 1000)
	b.Run("impl=chanpool", func(b *testing.B) {
		p := newChanPool(benchConc)
		defer p.close()
		b.ReportAllocs()
		for b.Loop() {
			out := make([]int, len(items))
			for i := range items {
				p.submit(func(context.Context) error { out[i] = items[i] + 1; return nil })
			}
			p.wait()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/task")
	})
	b.Run("impl=kernel", func(b *testing.B) {
		k, _ := New(Config{MaxConcurrency: benchConc})
		defer func() { _ = k.Close() }()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Map(context.Background(), k, items, func(_ context.Context, v int) (int, error) { return v + 1, nil }, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/task")
	})
}

// delayedBatch is how many timers of each kind one iteration of the delayed
// benchmarks schedules; delayedPendingMax is how many may pend before the
// benchmark starts afresh (as in the timers scenario, far-future timers pile up).
const (
	delayedBatch      = 1_000
	delayedPendingMax = 1_000_000
	delayedFar        = time.Hour
)

func noopTimer() {}

// BenchmarkDelayedTryGo measures the schedule cost of a far-future delayed
// fire-and-forget task (TryGo with a Delay) against time.AfterFunc in the same
// run, as the timers scenario does: with one function shared by every timer
// (fn=shared) and with a closure of its own per timer (fn=own). Each iteration
// schedules delayedBatch timers with each. It reports per timer the AfterFunc
// cost, the kernel's submit cost (until the last TryGo returned, what the
// scenario measures) and its end-to-end cost (until the loop took them all into
// its wheel), and the ratios of both to AfterFunc (DESIGN.md §13 aims at ≤ 0.5).
func BenchmarkDelayedTryGo(b *testing.B) {
	b.Run("fn=shared", func(b *testing.B) { benchDelayed(b, false) })
	b.Run("fn=own", func(b *testing.B) { benchDelayed(b, true) })
}

func benchDelayed(b *testing.B, own bool) {
	newKernel := func() *Kernel {
		k, err := New(Config{Capacity: ByPriority[int]{Normal: capacityMax}, DegradeAt: 1})
		if err != nil {
			b.Fatal(err)
		}
		return k
	}
	k := newKernel()
	timers := make([]*time.Timer, 0, delayedPendingMax)
	var sink atomic.Int64
	var afterNs, submitNs, kernelNs time.Duration
	pending := 0
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		for i := range delayedBatch {
			f := noopTimer
			if own {
				f = func() { sink.Add(int64(i)) }
			}
			timers = append(timers, time.AfterFunc(delayedFar, f))
		}
		t1 := time.Now()
		for i := range delayedBatch {
			f := noop
			if own {
				f = func(context.Context) error { sink.Add(int64(i)); return nil }
			}
			if err := k.TryGo(Task{Delay: delayedFar, Run: f}); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		pending += delayedBatch
		k.poke() // far-future tasks do not wake the loop before it has a batch
		for k.delayedNow() != int64(pending) {
			runtimeGosched()
		}
		t3 := time.Now()
		afterNs += t1.Sub(t0)
		submitNs += t2.Sub(t1)
		kernelNs += t3.Sub(t1)
		if pending >= delayedPendingMax {
			b.StopTimer()
			for _, t := range timers {
				t.Stop()
			}
			clear(timers)
			timers = timers[:0]
			_ = k.Close()
			k = newKernel()
			pending = 0
			b.StartTimer()
		}
	}
	b.StopTimer()
	for _, t := range timers {
		t.Stop()
	}
	_ = k.Close()
	n := float64(b.N * delayedBatch)
	b.ReportMetric(float64(afterNs.Nanoseconds())/n, "afterfunc-ns/timer")
	b.ReportMetric(float64(submitNs.Nanoseconds())/n, "submit-ns/timer")
	b.ReportMetric(float64(kernelNs.Nanoseconds())/n, "e2e-ns/timer")
	b.ReportMetric(float64(submitNs)/float64(afterNs), "submit/afterfunc")
	b.ReportMetric(float64(kernelNs)/float64(afterNs), "e2e/afterfunc")
}

// BenchmarkDelayedMemory measures the heap a pending far-future delayed task
// holds, as the timers scenario does (live heap after a GC, before and after
// scheduling, divided by the count), for the kernel's TryGo and time.AfterFunc.
func BenchmarkDelayedMemory(b *testing.B) {
	const n = 200_000
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	var afterB, kernelB float64
	for b.Loop() {
		k, err := New(Config{Capacity: ByPriority[int]{Normal: n}, DegradeAt: 1})
		if err != nil {
			b.Fatal(err)
		}
		h0 := heap()
		for range n {
			if err := k.TryGo(Task{Delay: delayedFar, Run: noop}); err != nil {
				b.Fatal(err)
			}
		}
		k.poke()
		for k.delayedNow() != n {
			runtimeGosched()
		}
		kernelB += float64(heap()-h0) / n
		_ = k.Close()

		timers := make([]*time.Timer, n)
		h1 := heap()
		for i := range timers {
			timers[i] = time.AfterFunc(delayedFar, noopTimer)
		}
		afterB += float64(heap()-h1) / n
		for _, t := range timers {
			t.Stop()
		}
		// Stopped timers leave the runtime's heaps when their Ps next check their
		// timers: wait for it, so that they are not freed while the kernel is
		// measured.
		for i := 0; i < 100 && heap() > h1; i++ {
			runtime.Gosched()
		}
	}
	b.ReportMetric(afterB/float64(b.N), "afterfunc-B/timer")
	b.ReportMetric(kernelB/float64(b.N), "kernel-B/timer")
}
