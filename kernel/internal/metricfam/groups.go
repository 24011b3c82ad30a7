package metricfam

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/axsched/ax/internal/promtext"
)

// Group is what a kernel publishes of one group for Stats and the page: gauges the
// loop stores after each pass, counters the gates add to. Safe for concurrent use.
type Group struct {
	Waiting, Running, Keys, Throttled, PausedKeys, OpenBreakers atomic.Int64
	Paused                                                      atomic.Bool
	Throttles, RateLimited, BreakerOpened, BreakerClosed        atomic.Uint64
	BreakerHalfOpened, CircuitOpenFailed                        atomic.Uint64
}

// GroupSet is the published figures of a kernel's groups by name, kept across
// config updates. The zero value is empty. Safe for concurrent use.
type GroupSet struct {
	mu sync.Mutex
	m  map[string]*Group // guarded by mu
}

// Get returns the figures of group name, made on first use.
func (s *GroupSet) Get(name string) *Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.m[name]; ok {
		return g
	}
	if s.m == nil {
		s.m = make(map[string]*Group)
	}
	g := new(Group)
	s.m[name] = g
	return g
}

// Each calls f with every group, in no order, under the set's lock: f must not
// call the set.
func (s *GroupSet) Each(f func(name string, g *Group)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, g := range s.m {
		f(name, g)
	}
}

// Append adds the ax_group_* samples of every group to p, by name, each series
// labelled with labels and its group. Group names need no escaping (the kernel
// admits none that would).
func (s *GroupSet) Append(p *Page, labels string) {
	s.mu.Lock()
	names := make([]string, 0, len(s.m))
	for name := range s.m {
		names = append(names, name)
	}
	gs := make([]*Group, len(names))
	slices.Sort(names)
	for i, name := range names {
		gs[i] = s.m[name]
	}
	s.mu.Unlock()
	for i, name := range names {
		g := gs[i]
		gl := promtext.JoinLabels(labels, `group="`+name+`"`)
		p.Add(GroupWaiting, gl, promtext.NonNeg(g.Waiting.Load()))
		p.Add(GroupRunning, gl, promtext.NonNeg(g.Running.Load()))
		p.Add(GroupKeys, gl, promtext.NonNeg(g.Keys.Load()))
		p.Add(GroupThrottledKeys, gl, promtext.NonNeg(g.Throttled.Load()))
		paused := uint64(0)
		if g.Paused.Load() {
			paused = 1
		}
		p.Add(GroupPaused, gl, paused)
		p.Add(GroupBreakersOpen, gl, promtext.NonNeg(g.OpenBreakers.Load()))
		p.Add(GroupThrottles, gl, g.Throttles.Load())
		p.Add(GroupRateLimited, gl, g.RateLimited.Load())
		p.Add(GroupBreakerTransitions, promtext.JoinLabels(gl, `to="open"`), g.BreakerOpened.Load())
		p.Add(GroupBreakerTransitions, promtext.JoinLabels(gl, `to="half_open"`), g.BreakerHalfOpened.Load())
		p.Add(GroupBreakerTransitions, promtext.JoinLabels(gl, `to="closed"`), g.BreakerClosed.Load())
		p.Add(GroupCircuitOpen, gl, g.CircuitOpenFailed.Load())
	}
}
