package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// The simulated upstream: four keys (hosts or tenants), of which the first
// takes 40 % of the calls and the last is down. Each key serves keyCapacity
// calls at once and refuses more with a 503. A call of a live key answers
// after callMin to callMax; callFail of them fail, and callHang never answer
// until the caller gives up or the upstream drops them (after options.hang).
const (
	numKeys     = 4
	hotKey      = 0
	downKey     = numKeys - 1
	hotShare    = 0.40
	keyCapacity = 4
	callMin     = 20 * time.Millisecond
	callMax     = 60 * time.Millisecond
	callFail    = 0.05
	callHang    = 0.03
	refuseAfter = time.Millisecond     // how long a 503 takes
	downAfter   = 5 * time.Millisecond // how long the down key takes to fail
)

// The upstream's errors.
var (
	errOverloaded = errors.New("upstream: 503 too many calls on this key")
	errDown       = errors.New("upstream: 502 key down")
	errServer     = errors.New("upstream: 500 internal error")
	errDropped    = errors.New("upstream: connection dropped without an answer")
)

// keyName names key i in tasks and tables.
func keyName(i int) string { return string(rune('a'+i)) + ".example" }

// upstream is the in-process upstream both pools call. It measures what it
// sees: calls, 503s, the most calls in flight per key, and the time callers
// spent in calls that hang. Safe for concurrent use.
type upstream struct {
	seed uint64        // immutable: seeds each call's draw
	hang time.Duration // immutable: when a hung call is dropped

	mu       sync.Mutex
	inFlight [numKeys]int  // guarded by mu
	peak     [numKeys]int  // guarded by mu
	calls    int           // guarded by mu
	refused  int           // guarded by mu: the 503s
	hangs    int           // guarded by mu: calls that hung
	hung     time.Duration // guarded by mu: time callers spent in hung calls
	longest  time.Duration // guarded by mu: the longest call
}

func newUpstream(seed uint64, hang time.Duration) *upstream {
	return &upstream{seed: seed, hang: hang}
}

// call is attempt number attempt (1 for the first) of task on key. It blocks
// until the upstream answers or ctx ends, and returns nil for a good answer,
// ctx.Err() when the caller gave up first, else the upstream's error. What a
// call does depends only on the seed, task, attempt and how many calls the key
// is serving.
func (u *upstream) call(ctx context.Context, task, attempt, key int) error {
	t0 := time.Now()
	u.mu.Lock()
	u.calls++
	u.inFlight[key]++
	u.peak[key] = max(u.peak[key], u.inFlight[key])
	over := u.inFlight[key] > keyCapacity
	if over {
		u.refused++
	}
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inFlight[key]--
		u.longest = max(u.longest, time.Since(t0))
		u.mu.Unlock()
	}()

	rng := rand.New(rand.NewPCG(u.seed, uint64(task)<<8|uint64(attempt&0xff)))
	latency := callMin + time.Duration(rng.Int64N(int64(callMax-callMin)))
	r := rng.Float64()
	switch {
	case over:
		return wait(ctx, refuseAfter, errOverloaded)
	case key == downKey:
		return wait(ctx, downAfter, errDown)
	case r < callHang:
		err := wait(ctx, u.hang, errDropped)
		u.mu.Lock()
		u.hangs++
		u.hung += time.Since(t0)
		u.mu.Unlock()
		return err
	case r < callHang+callFail:
		return wait(ctx, latency, errServer)
	default:
		return wait(ctx, latency, nil)
	}
}

// upstreamFigures are what the upstream measured.
type upstreamFigures struct {
	calls, refused, hangs int
	peak                  int           // the most calls in flight on one key
	hung                  time.Duration // time callers spent in hung calls
	longest               time.Duration // the longest call
}

// figures returns what u measured so far.
func (u *upstream) figures() upstreamFigures {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := upstreamFigures{calls: u.calls, refused: u.refused, hangs: u.hangs, hung: u.hung, longest: u.longest}
	for _, p := range u.peak {
		f.peak = max(f.peak, p)
	}
	return f
}

// wait returns answer after d, or ctx.Err() if ctx ends first.
func wait(ctx context.Context, d time.Duration, answer error) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return answer
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drawKeys returns the key of each of n calls: hotShare of them on hotKey,
// the rest spread evenly over the others.
func drawKeys(seed uint64, n int) []int {
	rng := rand.New(rand.NewPCG(seed, 0x6b657973))
	keys := make([]int, n)
	for i := range keys {
		if rng.Float64() < hotShare {
			keys[i] = hotKey
		} else {
			keys[i] = 1 + rng.IntN(numKeys-1)
		}
	}
	return keys
}
