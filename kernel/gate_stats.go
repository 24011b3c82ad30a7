package kernel

import (
	"sync/atomic"
)

// groupPub is what the loop publishes of a group for Stats and metrics.
type groupPub struct {
	waiting, running, keys, throttled, pausedKeys, openBreakers atomic.Int64
	paused                                                      atomic.Bool
	throttles, rateLimited, breakerOpened, breakerClosed        atomic.Uint64
	breakerHalfOpened, circuitOpenFailed                        atomic.Uint64
}

// GroupStats are the figures of one group (Stats.Groups).
type GroupStats struct {
	Waiting       int  // tasks waiting in the gate for a permit (paused ones included)
	Running       int  // attempts holding a permit: handed to their bucket, running, or zombies
	Keys          int  // keys whose state the kernel holds
	ThrottledKeys int  // keys waiting for a token, a RetryAfter's end or an open breaker's time
	PausedKeys    int  // keys paused by Kernel.Pause
	Paused        bool // the group is paused
	OpenBreakers  int  // keys whose breaker is open or half-open
	// Throttles counts the times a key had to wait for a token or a RetryAfter;
	// RateLimited the attempts that returned a RateLimitedError.
	Throttles, RateLimited uint64
	// BreakerOpened, BreakerHalfOpened and BreakerClosed count the breakers'
	// transitions to each state; CircuitOpenFailed the tasks ended with
	// ErrCircuitOpen (BreakerConfig.FailFast).
	BreakerOpened, BreakerHalfOpened, BreakerClosed, CircuitOpenFailed uint64
}

func (p *groupPub) stats() GroupStats {
	return GroupStats{
		Waiting: int(p.waiting.Load()), Running: int(p.running.Load()), Keys: int(p.keys.Load()),
		ThrottledKeys: int(p.throttled.Load()), PausedKeys: int(p.pausedKeys.Load()), Paused: p.paused.Load(),
		OpenBreakers: int(p.openBreakers.Load()), Throttles: p.throttles.Load(), RateLimited: p.rateLimited.Load(),
		BreakerOpened: p.breakerOpened.Load(), BreakerHalfOpened: p.breakerHalfOpened.Load(),
		BreakerClosed: p.breakerClosed.Load(), CircuitOpenFailed: p.circuitOpenFailed.Load(),
	}
}

// publishGroups writes the groups' gauges. Loop only.
func (k *Kernel) publishGroups() {
	for _, g := range k.ls.gate.groups {
		p := g.pub
		p.waiting.Store(int64(g.waiting))
		p.running.Store(int64(g.running))
		p.keys.Store(int64(len(g.keys)))
		p.throttled.Store(int64(g.throttled))
		p.pausedKeys.Store(int64(g.pausedKeys))
		p.paused.Store(g.paused)
		p.openBreakers.Store(int64(g.openBreakers))
	}
}

// groupPub returns the published figures of group name, kept across updates.
func (k *Kernel) groupPub(name string) *groupPub {
	k.gpubMu.Lock()
	defer k.gpubMu.Unlock()
	if p, ok := k.gpub[name]; ok {
		return p
	}
	if k.gpub == nil {
		k.gpub = make(map[string]*groupPub)
	}
	p := new(groupPub)
	k.gpub[name] = p
	return p
}
