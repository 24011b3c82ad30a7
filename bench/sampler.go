package bench

import (
	"runtime/metrics"
	"time"
)

// samplePeriod is how often the sampler looks at the heap, goroutines and the
// executor's state.
const samplePeriod = 5 * time.Millisecond

// sampler records the peak heap and goroutine counts of the process while a
// scenario runs, and the executor's queue depth and zombies over time when it
// is a [Stater]. It reads runtime/metrics, which does not stop the world.
type sampler struct {
	stop chan struct{}
	done chan struct{}
	st   Stater            // immutable; may be nil
	ag   adapterGoroutiner // immutable; may be nil
	t0   time.Time         // immutable

	// Written by the sampling goroutine only; read after done is closed.
	peakHeap, peakG uint64
	peakZombies     int
	depth, zombies  Series
}

// adapterGoroutiner is implemented by adapters that run goroutines of their
// own beside the executor's (ax's per-handle watchers); the sampler leaves
// them out of peak_goroutines.
type adapterGoroutiner interface {
	adapterGoroutines() int
}

// startSampler starts sampling; call finish to end it and read the figures.
// With state, it also samples the executor's own state when it is a [Stater]
// (not in throughput scenarios, where even a cheap call every few
// milliseconds would be measured with the executor).
func startSampler(ex Executor, t0 time.Time, state bool) *sampler {
	s := &sampler{
		stop: make(chan struct{}), done: make(chan struct{}), t0: t0,
		depth:   Series{Name: "queue_depth", Unit: "tasks"},
		zombies: Series{Name: "zombies", Unit: "tasks"},
	}
	if state {
		s.st, _ = ex.(Stater)
	}
	s.ag, _ = ex.(adapterGoroutiner)
	go s.loop()
	return s
}

func (s *sampler) loop() {
	defer close(s.done)
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	tick := time.NewTicker(samplePeriod)
	defer tick.Stop()
	for n := 0; ; n++ {
		metrics.Read(samples)
		if samples[0].Value.Kind() == metrics.KindUint64 {
			s.peakHeap = max(s.peakHeap, samples[0].Value.Uint64())
		}
		if samples[1].Value.Kind() == metrics.KindUint64 {
			g := samples[1].Value.Uint64()
			if s.ag != nil {
				g -= min(g, uint64(s.ag.adapterGoroutines()))
			}
			s.peakG = max(s.peakG, g)
		}
		if s.st != nil {
			z := s.st.Zombies()
			s.peakZombies = max(s.peakZombies, z)
			if n%4 == 0 { // every 20 ms is plenty for a chart
				t := time.Since(s.t0).Seconds()
				s.depth.add(t, float64(s.st.QueueDepth()))
				s.zombies.add(t, float64(z))
			}
		}
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// finish stops the sampler (once) and adds its figures to out.
func (s *sampler) finish(out *Sample) {
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
	out.Metrics["peak_heap_mb"] = float64(s.peakHeap) / (1 << 20)
	out.Metrics["peak_goroutines"] = float64(s.peakG)
	if s.st != nil {
		out.Metrics["zombies_peak"] = float64(s.peakZombies)
		out.Series = append(out.Series, s.depth.thin(maxPoints), s.zombies.thin(maxPoints))
	}
}
