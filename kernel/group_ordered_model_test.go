package kernel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupOrderedModel runs random work on the keys of an Ordered group (random
// priorities, failures and retries, RateLimitedErrors, timed-out attempts that
// run on as zombies, cancellations, paused priorities) and checks, at each start
// of an attempt, against a model of the key: the key runs one attempt at a time;
// a task's attempts are contiguous (no other task of the key starts between
// them), which with the next check says the key holds while the task waits for
// its retry; the task before it on its key has ended; and the key's tasks start
// in the order they were submitted. At the end, every task ended as its plan says.
func TestGroupOrderedModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run("seed"+strconv.Itoa(int(seed)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runOrderedModel(t, seed) })
		})
	}
}

// orderedPlan is what one task of TestGroupOrderedModel does.
type orderedPlan struct {
	idx      int // submit order
	key      string
	fails    int  // attempts that fail before one succeeds
	limited  bool // its first attempt returns a RateLimitedError
	timeouts bool // every attempt outlasts its timeout, ignoring its context
	maxTries int
	d        time.Duration
	canceled atomic.Bool
	h        atomic.Pointer[Handle]
	runs     atomic.Int32
}

// orderedKey is the model of one key: what ran last and what runs.
type orderedKey struct {
	mu      sync.Mutex
	running int
	last    *orderedPlan
	started map[int]bool
	errs    []string
}

func runOrderedModel(t *testing.T, seed uint64) {
	const prios = 3 // High, Normal, Low
	rng := rand.New(rand.NewPCG(seed, 29))
	g := GroupConfig{Ordered: true, PerKey: Limits{Concurrency: rng.IntN(2)}, Total: Limits{Concurrency: rng.IntN(4)}}
	if rng.IntN(3) == 0 {
		g.PerKey.Rate = Rate{N: 1 + rng.IntN(20), Per: 100 * time.Millisecond}
	}
	k := newTestKernel(t, Config{
		MaxConcurrency: 2 + rng.IntN(8), RetryBudget: RetryBudget{Disabled: true},
		Groups: map[string]GroupConfig{"o": g},
	})
	keys := map[string]*orderedKey{}
	for i := range 1 + rng.IntN(4) {
		keys[strconv.Itoa(i)] = &orderedKey{started: map[int]bool{}}
	}
	n := 80 + rng.IntN(120)
	plans := make([]*orderedPlan, n)
	var paused [prios]bool
	for i := range n {
		p := &orderedPlan{idx: i, key: strconv.Itoa(rng.IntN(len(keys))), maxTries: 1 + rng.IntN(3), d: time.Duration(rng.IntN(4)) * time.Millisecond}
		switch m := rng.IntN(10); {
		case m < 4:
			p.fails = 1 + rng.IntN(3)
		case m == 4:
			p.limited = true
		case m == 5:
			p.timeouts = true
			p.d += 2 * time.Millisecond // past its timeout: a zombie
		}
		plans[i] = p
		ks := keys[p.key]
		task := Task{
			Group: "o", Key: p.key, Priority: Priority(1 + rng.IntN(3)),
			Retry: &RetryPolicy{MaxAttempts: p.maxTries, Base: time.Duration(1+rng.IntN(20)) * time.Millisecond, Jitter: JitterFull},
			Run:   orderedRun(p, ks, plans),
		}
		if p.timeouts {
			task.Timeout = time.Millisecond
		}
		h := mustSubmit(t, k, task)
		p.h.Store(h)
		if rng.IntN(15) == 0 {
			c := plans[rng.IntN(i+1)]
			c.canceled.Store(true)
			c.h.Load().Cancel()
		}
		if rng.IntN(40) == 0 {
			pr := rng.IntN(prios)
			sel := Selector{Priority: Priority(1 + pr)}
			if paused[pr] {
				_ = k.Resume(sel)
			} else {
				_ = k.Pause(sel)
			}
			paused[pr] = !paused[pr]
		}
		if rng.IntN(8) == 0 {
			advance(time.Duration(rng.IntN(15)) * time.Millisecond)
		}
	}
	for pr := range prios {
		_ = k.Resume(Selector{Priority: Priority(1 + pr)})
	}
	for _, p := range plans {
		h := p.h.Load()
		<-h.Done()
		if p.canceled.Load() {
			continue
		}
		want, tries := Succeeded, p.fails+1
		switch {
		case p.timeouts:
			want, tries = TimedOut, p.maxTries
		case p.fails >= p.maxTries:
			want, tries = Failed, p.maxTries
		}
		if h.State() != want || h.Attempts() != tries {
			t.Errorf("task %d %+v: %v after %d attempts, want %v after %d", p.idx, p, h.State(), h.Attempts(), want, tries)
		}
	}
	for key, ks := range keys {
		for _, e := range ks.errs {
			t.Errorf("key %s: %s", key, e)
		}
	}
}

// orderedRun returns p's function: it checks the start against its key's model,
// then runs p's plan.
func orderedRun(p *orderedPlan, ks *orderedKey, plans []*orderedPlan) func(context.Context) error {
	return func(ctx context.Context) error {
		ks.mu.Lock()
		ks.running++
		if ks.running > 1 {
			ks.errs = append(ks.errs, fmt.Sprintf("task %d started while %d ran", p.idx, ks.running-1))
		}
		if last := ks.last; last != p {
			switch {
			case ks.started[p.idx]:
				ks.errs = append(ks.errs, fmt.Sprintf("task %d started again after task %d", p.idx, last.idx))
			case last != nil && last.idx > p.idx:
				ks.errs = append(ks.errs, fmt.Sprintf("task %d started after task %d, submitted later", p.idx, last.idx))
			case last != nil && !isDone(last.h.Load().Done()):
				ks.errs = append(ks.errs, fmt.Sprintf("task %d started while task %d was %v", p.idx, last.idx, last.h.Load().State()))
			}
			for i := 0; last != nil && i < p.idx; i++ {
				// Every task of the key submitted before p started, or ended without.
				if q := plans[i]; q.key == p.key && !ks.started[i] && !isDone(q.h.Load().Done()) {
					ks.errs = append(ks.errs, fmt.Sprintf("task %d started before task %d, submitted earlier", p.idx, i))
				}
			}
			ks.last = p
			ks.started[p.idx] = true
		}
		ks.mu.Unlock()
		n := p.runs.Add(1)
		if p.d > 0 {
			tm := time.NewTimer(p.d)
			<-tm.C
		}
		ks.mu.Lock()
		ks.running--
		ks.mu.Unlock()
		switch {
		case p.limited && n == 1:
			return &RateLimitedError{RetryAfter: 3 * time.Millisecond}
		case p.timeouts:
			return ctx.Err()
		case int(n) <= p.fails:
			return errors.New("flaky")
		}
		return nil
	}
}
