package kernel

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupModel runs random work over random groups and limits and checks, for
// every key and group, that concurrency never exceeded its limit and that the
// starts stayed within the token bucket's bound over every window: at most
// Burst + (w+late)/interval starts in any window of length w (rate.Bucket.Take);
// an Ordered group's keys ran one attempt at a time. Every task ends once.
func TestGroupModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run("seed"+strconv.Itoa(int(seed)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runGroupModel(t, seed) })
		})
	}
}

func runGroupModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	randRate := func() Rate {
		if rng.IntN(3) == 0 {
			return Rate{}
		}
		return Rate{N: 1 + rng.IntN(50), Per: time.Duration(1+rng.IntN(4)) * 100 * time.Millisecond, Burst: rng.IntN(4)}
	}
	groups := map[string]GroupConfig{}
	names := []string{"a", "b", "c"}[:1+rng.IntN(3)]
	ord := rand.New(rand.NewPCG(seed, 31)) // its own source: the other draws stay the seed's
	for _, name := range names {
		gc := GroupConfig{
			PerKey: Limits{Concurrency: rng.IntN(4), Rate: randRate()},
			Total:  Limits{Concurrency: rng.IntN(8), Rate: randRate()},
		}
		if ord.IntN(3) == 0 {
			gc.Ordered, gc.PerKey.Concurrency = true, ord.IntN(2) // one at a time (TestGroupOrderedModel checks the order)
		}
		groups[name] = gc
	}
	k := newTestKernel(t, Config{MaxConcurrency: 4 + rng.IntN(30), Groups: groups})
	type rec struct {
		mu              sync.Mutex
		running, maxRun int
		starts          []time.Duration
	}
	recs := map[string]*rec{}
	recOf := func(id string) *rec {
		if r, ok := recs[id]; ok {
			return r
		}
		r := &rec{}
		recs[id] = r
		return r
	}
	t0 := time.Now()
	var hs []*Handle
	n := 200 + rng.IntN(300)
	for i := range n {
		g := names[rng.IntN(len(names))]
		key := strconv.Itoa(rng.IntN(6))
		kr, gr := recOf(g+"/"+key), recOf(g)
		d := time.Duration(rng.IntN(30)) * time.Millisecond
		mode := rng.IntN(10)
		retryAfter := time.Duration(rng.IntN(50)) * time.Millisecond
		var once sync.Once
		run := func(ctx context.Context) error {
			for _, r := range []*rec{kr, gr} {
				r.mu.Lock()
				r.running++
				r.maxRun = max(r.maxRun, r.running)
				r.starts = append(r.starts, time.Since(t0))
				r.mu.Unlock()
			}
			if d > 0 {
				tm := time.NewTimer(d)
				<-tm.C
			}
			for _, r := range []*rec{kr, gr} {
				r.mu.Lock()
				r.running--
				r.mu.Unlock()
			}
			var err error
			once.Do(func() {
				switch mode {
				case 0:
					err = &RateLimitedError{RetryAfter: retryAfter}
				case 1:
					err = errors.New("flaky")
				}
			})
			return err
		}
		task := Task{
			Group: g, Key: key, Priority: Priority(1 + rng.IntN(3)), Run: run,
			Retry: &RetryPolicy{MaxAttempts: 2, Base: time.Millisecond, Jitter: JitterNone},
		}
		if rng.IntN(5) == 0 {
			task.Delay = time.Duration(rng.IntN(100)) * time.Millisecond
		}
		hs = append(hs, mustSubmit(t, k, task))
		if rng.IntN(20) == 0 {
			advance(time.Duration(rng.IntN(20)) * time.Millisecond)
		}
		_ = i
	}
	got := waitAll(t, hs)
	if got[Succeeded] != n {
		t.Fatalf("outcomes = %v, want %d succeeded", got, n)
	}
	check := func(id string, lim Limits, r *rec) {
		if c := lim.Concurrency; c > 0 && r.maxRun > c {
			t.Errorf("%s: %d ran at once, limit %d", id, r.maxRun, c)
		}
		if lim.Rate.N == 0 {
			return
		}
		p := lim.Rate.limit(tickDefault)
		burst := max(lim.Rate.Burst, 1)
		s := r.starts
		for i := range s {
			for j := i; j < len(s); j++ {
				w := int64(s[j] - s[i])
				// One more after a start that came late (Rate's doc): a task that waited
				// in its bucket for a slot starts after its token, the next on time.
				if allowed := burst + int((w+p.Late)/p.Interval) + 1; j-i+1 > allowed {
					t.Errorf("%s: %d starts in %v, the bucket allows %d (rate %+v)", id, j-i+1, time.Duration(w), allowed, lim.Rate)
					return
				}
			}
		}
	}
	for id, r := range recs {
		if g, ok := groups[id]; ok {
			check(id, g.Total, r)
			continue
		}
		for _, name := range names {
			if len(id) > len(name) && id[:len(name)+1] == name+"/" {
				lim := groups[name].PerKey
				if groups[name].Ordered {
					lim.Concurrency = 1
				}
				check(id, lim, r)
			}
		}
	}
	synctest.Wait() // the loop publishes at the end of its pass
	if st := k.Stats(); st.Groups != nil {
		for name, g := range st.Groups {
			if g.Waiting != 0 || g.Running != 0 {
				t.Errorf("group %s after all ended: %+v", name, g)
			}
		}
	}
}
