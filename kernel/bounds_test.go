package kernel

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// boundsProbe counts, from outside the kernel, the tasks of each priority that
// were accepted and neither started (their function called) nor ended: the tasks
// that wait under their priority's Capacity.
type boundsProbe struct {
	mu       sync.Mutex
	hs       []*Handle
	prio     []Priority
	started  []*atomic.Bool
	accepted [3]int
	refused  [3]int
	errs     []error
}

func (p *boundsProbe) submit(k *Kernel, prio Priority, group string, release <-chan struct{}) {
	started := new(atomic.Bool)
	key := ""
	if group != "" {
		key = "k"
	}
	h, err := k.TrySubmit(Task{Priority: prio, Group: group, Key: key, Run: func(ctx context.Context) error {
		started.Store(true)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.refused[levelOf(prio)]++
		p.errs = append(p.errs, err)
		return
	}
	p.accepted[levelOf(prio)]++
	p.hs, p.prio, p.started = append(p.hs, h), append(p.prio, prio), append(p.started, started)
}

// waiting returns the probe's count of waiting tasks by priority.
func (p *boundsProbe) waiting() (w [3]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.hs {
		if !p.started[i].Load() && !h.State().Terminal() {
			w[levelOf(p.prio[i])]++
		}
	}
	return w
}

// queueDepthGauges reads ax_queue_depth from the kernel's Prometheus exposition.
func queueDepthGauges(t *testing.T, k *Kernel) (g [3]int) {
	t.Helper()
	var b bytes.Buffer
	k.WritePrometheus(&b)
	re := regexp.MustCompile(`(?m)^ax_queue_depth\{[^}]*priority="(high|normal|low)"[^}]*\} (\d+)$`)
	ms := re.FindAllStringSubmatch(b.String(), -1)
	if len(ms) != 3 {
		t.Fatalf("ax_queue_depth: %d series, want 3 in:\n%s", len(ms), b.String())
	}
	for _, m := range ms {
		n, _ := strconv.Atoi(m[2])
		g[map[string]int{"high": 0, "normal": 1, "low": 2}[m[1]]] = n
	}
	return g
}

// TestCapacityCountsPicksAhead: with every slot busy, tasks the loop picks ahead
// for the run queue still wait, so Capacity counts them: a level admits exactly
// its Capacity, and Stats and the gauges show that many queued.
func TestCapacityCountsPicksAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		capacity := ByPriority[int]{High: 2, Normal: 3, Low: 4}
		k := newTestKernel(t, Config{MaxConcurrency: 32, Capacity: capacity, DegradeAt: 1})
		release := make(chan struct{})
		var busy boundsProbe
		for range 32 {
			busy.submit(k, Normal, "", release)
			synctest.Wait() // it starts before the next comes
		}
		if busy.accepted[1] != 32 {
			t.Fatalf("%d of 32 tasks accepted to fill the slots: %v", busy.accepted[1], busy.errs)
		}
		var p boundsProbe
		for range 20 {
			for _, prio := range []Priority{High, Normal, Low} {
				p.submit(k, prio, "", release)
				synctest.Wait() // the loop picks ahead what it can before the next
			}
		}
		want := [3]int{capacity.High, capacity.Normal, capacity.Low}
		if p.accepted != want {
			t.Errorf("accepted %v with every slot busy, want the capacities %v (busy %v %v, refusals %v)", p.accepted, want, busy.accepted, busy.errs[:min(1, len(busy.errs))], p.errs[:min(3, len(p.errs))])
		}
		st := k.Stats()
		if got := [3]int{st.Queued.High, st.Queued.Normal, st.Queued.Low}; got != want {
			t.Errorf("Stats().Queued = %v, want %v", got, want)
		}
		if st.Dispatched == 0 {
			t.Errorf("Stats().Dispatched = 0: nothing was picked ahead, the test proves nothing")
		}
		if g := queueDepthGauges(t, k); g != want {
			t.Errorf("ax_queue_depth = %v, want %v", g, want)
		}
		close(release)
		waitAll(t, append(busy.hs, p.hs...))
		st = k.Stats()
		if st.Queued != (ByPriority[int]{}) {
			t.Errorf("Stats().Queued = %+v after every task ended, want zeros", st.Queued)
		}
	})
}

// TestCapacityEvictorCountsAsLow: a High task that took an evicted Low task's
// place counts against Capacity.Low until it starts, in Stats and the gauges.
func TestCapacityEvictorCountsAsLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, Capacity: ByPriority[int]{High: 1, Normal: 1, Low: 1}, EvictLow: true, DegradeAt: 1})
		release := make(chan struct{})
		var p boundsProbe
		p.submit(k, High, "", release) // runs, holding the slot
		synctest.Wait()
		p.submit(k, Low, "", release)
		synctest.Wait()                // queued: the loop knows it may evict it
		p.submit(k, High, "", release) // fits Capacity.High
		p.submit(k, High, "", release) // evicts the Low task
		synctest.Wait()
		if p.accepted != [3]int{3, 0, 1} {
			t.Fatalf("accepted %v, want 3 High and 1 Low", p.accepted)
		}
		st := k.Stats()
		if st.ByPriority.Low.Evicted != 1 {
			t.Fatalf("Low evicted = %d, want 1", st.ByPriority.Low.Evicted)
		}
		want := ByPriority[int]{High: 1, Low: 1}
		if st.Queued != want {
			t.Errorf("Stats().Queued = %+v, want %+v (the evictor counts as Low)", st.Queued, want)
		}
		if g := queueDepthGauges(t, k); g != [3]int{1, 0, 1} {
			t.Errorf("ax_queue_depth = %v, want [1 0 1]", g)
		}
		close(release)
		waitAll(t, p.hs)
	})
}

// TestCapacityBoundsEveryWaitProperty runs random kernels whose slots are all
// busy while concurrent submitters of every priority, some of them grouped (their
// tasks wait in a key's queue) and some under a paused priority, fill them: at
// every quiet point the tasks waiting at a priority, counted from outside, stay
// within its Capacity, and Stats().Queued and the gauges show exactly them.
func TestCapacityBoundsEveryWaitProperty(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { capacityCase(t, seed) })
		})
	}
}

func capacityCase(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	slots := 1 + r.IntN(64)
	capacity := ByPriority[int]{High: 1 + r.IntN(8), Normal: 1 + r.IntN(8), Low: 1 + r.IntN(8)}
	cfg := Config{
		MaxConcurrency: slots,
		Capacity:       capacity,
		DegradeAt:      1,
		EvictLow:       r.IntN(2) == 0,
		Groups:         map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}},
	}
	k := newTestKernel(t, cfg)
	release := make(chan struct{})
	var busy, p boundsProbe
	for range slots {
		busy.submit(k, High, "", release)
		synctest.Wait() // it starts before the next comes
	}
	if busy.accepted[0] != slots {
		t.Fatalf("%d of %d tasks accepted to fill the slots: %v", busy.accepted[0], slots, busy.errs)
	}
	if r.IntN(3) == 0 {
		if err := k.Pause(Selector{Priority: Low}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		w := p.waiting()
		st := k.Stats()
		q := [3]int{st.Queued.High, st.Queued.Normal, st.Queued.Low}
		caps := [3]int{capacity.High, capacity.Normal, capacity.Low}
		for l := range 3 {
			if q[l] > caps[l] {
				t.Errorf("%s: Stats().Queued = %v, over the capacities %v", when, q, caps)
			}
		}
		if tw := w[0] + w[1] + w[2]; tw > caps[0]+caps[1]+caps[2] {
			t.Errorf("%s: %v tasks wait, over the capacities %v", when, w, caps)
		}
		if sum := q[0] + q[1] + q[2]; sum != w[0]+w[1]+w[2] {
			t.Errorf("%s: Stats().Queued = %v, but %v tasks wait", when, q, w)
		}
		if !cfg.EvictLow && q != w {
			t.Errorf("%s: Stats().Queued = %v, want the waiting tasks %v", when, q, w)
		}
		if g := queueDepthGauges(t, k); g != q {
			t.Errorf("%s: ax_queue_depth = %v, Stats().Queued = %v", when, g, q)
		}
	}
	for round := range 4 {
		var wg sync.WaitGroup
		for range 4 {
			prio := []Priority{High, Normal, Low}[r.IntN(3)]
			group := ""
			if r.IntN(3) == 0 {
				group = "g"
			}
			n := 1 + r.IntN(12)
			wg.Go(func() {
				for range n {
					p.submit(k, prio, group, release)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		check(fmt.Sprint("round ", round))
	}
	close(release)
	if err := k.Resume(Selector{Priority: Low}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, append(busy.hs, p.hs...))
	synctest.Wait()
	check("after every task ended")
}
