package kernel

import "github.com/axsched/ax/kernel/internal/metricfam"

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

// groupStats returns the figures of a group as Stats shows them.
func groupStats(p *metricfam.Group) GroupStats {
	return GroupStats{
		Waiting: int(p.Waiting.Load()), Running: int(p.Running.Load()), Keys: int(p.Keys.Load()),
		ThrottledKeys: int(p.Throttled.Load()), PausedKeys: int(p.PausedKeys.Load()), Paused: p.Paused.Load(),
		OpenBreakers: int(p.OpenBreakers.Load()), Throttles: p.Throttles.Load(), RateLimited: p.RateLimited.Load(),
		BreakerOpened: p.BreakerOpened.Load(), BreakerHalfOpened: p.BreakerHalfOpened.Load(),
		BreakerClosed: p.BreakerClosed.Load(), CircuitOpenFailed: p.CircuitOpenFailed.Load(),
	}
}

// publishGroups writes the groups' gauges. Loop only.
func (k *Kernel) publishGroups() {
	for _, g := range k.ls.gate.groups {
		p := g.pub
		p.Waiting.Store(int64(g.waiting))
		p.Running.Store(int64(g.running))
		p.Keys.Store(int64(len(g.keys)))
		p.Throttled.Store(int64(g.throttled))
		p.PausedKeys.Store(int64(g.pausedKeys))
		p.Paused.Store(g.paused)
		p.OpenBreakers.Store(int64(g.openBreakers))
	}
}
