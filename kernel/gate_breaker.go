package kernel

import (
	"time"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/queue"
)

// The classification of an attempt's error by BreakerConfig.IsFailure, made on
// the executor (attempt.failClass).
const (
	failUnknown uint8 = iota // not classified: the default rule applies
	failYes
	failNo
)

// newKeyBreaker gives ks a closed breaker under d's breaker config, or none if d
// has none. Loop only.
func (k *Kernel) newKeyBreaker(ks *keyState, d *groupDef) {
	ks.br, ks.brState = nil, 0
	if d.brc != nil {
		ks.br, ks.brState = breaker.New(d.brc, k.ls.now), BreakerClosed
	}
}

// breakerRefused parks ks, or fails its tasks (FailFast), after its breaker
// refused a start; wake is when it may admit again (zero: at a probe's outcome).
func (k *Kernel) breakerRefused(ks *keyState, wake time.Time) {
	if ks.g.def.breaker.FailFast {
		k.failKey(ks)
		return
	}
	if wake.IsZero() {
		ks.brProbe = true
		return
	}
	ks.brUntil = max(int64(wake.Sub(k.epoch)), k.ls.nowMono+1)
	k.keyCanStart(ks) // arms the key's entry
}

// failKey ends the tasks waiting in ks's queue with ErrCircuitOpen. Loop only.
func (k *Kernel) failKey(ks *keyState) {
	for l := range queue.NumLevels {
		for ks.q[l].Len() > 0 {
			h := ks.q[l].Pop()
			ks.n--
			ks.g.waiting--
			h.ext.inGate = false
			ks.g.pub.CircuitOpenFailed.Add(1)
			k.gateEnd(h, Failed, ErrCircuitOpen)
		}
	}
	k.keyMaybeIdle(ks)
}

// breakerDone reports a's outcome to its key's breaker, once. Loop only.
func (k *Kernel) breakerDone(a *attempt, o breaker.Outcome) {
	if !a.brAdmitted || a.brReported {
		return
	}
	a.brReported = true
	ks := a.h.ext.ks
	if ks.br == nil {
		return // the group's breaker was removed by Update
	}
	from, to := ks.br.Done(k.ls.now, a.brGen, o)
	if ks.brProbe {
		ks.brProbe = false
		defer k.touchKey(ks)
	}
	if from != to {
		k.breakerMoved(ks, breakerState(from), breakerState(to))
	}
}

// breakerMoved counts and reports a transition of ks's breaker. Loop only.
func (k *Kernel) breakerMoved(ks *keyState, from, to BreakerState) {
	ks.brState = to
	g := ks.g
	isOpen := func(s BreakerState) bool { return s == BreakerOpen || s == BreakerHalfOpen }
	switch {
	case isOpen(to) && !isOpen(from):
		g.openBreakers++
	case !isOpen(to) && isOpen(from):
		g.openBreakers--
	}
	switch to {
	case BreakerOpen:
		g.pub.BreakerOpened.Add(1)
	case BreakerHalfOpen:
		g.pub.BreakerHalfOpened.Add(1)
	case BreakerClosed:
		g.pub.BreakerClosed.Add(1)
	}
	k.note(g, ks.key, NoteBreaker, to)
}

// outcomeOf classifies a finished attempt for its key's breaker. Loop only.
func (k *Kernel) outcomeOf(a *attempt) breaker.Outcome {
	h := a.h
	if h.cancelErr != nil || k.ls.closing {
		return breaker.Ignored
	}
	if a.err == nil {
		if b := h.ext.ks.g.def.breaker; b != nil && b.SlowCall > 0 && time.Duration(a.endAt-a.startAt) > b.SlowCall {
			return breaker.Slow
		}
		return breaker.Success
	}
	if _, ok := isRateLimited(a.err); ok {
		return breaker.Ignored
	}
	switch a.failClass {
	case failNo:
		return breaker.Success // IsFailure says the upstream answered well (a 404, say)
	case failYes:
		return breaker.Failure
	}
	if canceledByKernel(a.err) {
		return breaker.Ignored
	}
	return breaker.Failure
}

// classify calls the group's IsFailure on a's error, on the executor, recovering a
// panic (the default rule applies then).
func (k *Kernel) classify(a *attempt) {
	if a.err == nil || !a.h.has(featGroup) {
		return
	}
	x := a.h.ext
	if x.gd.breaker == nil || x.gd.breaker.IsFailure == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			k.m.callbackPanics.Inc()
			a.failClass = failUnknown
		}
	}()
	if x.gd.breaker.IsFailure(a.err) {
		a.failClass = failYes
	} else {
		a.failClass = failNo
	}
}

// breakerHolds reports whether h's key has a breaker that is not closed: a retry
// then waits at the gate until the breaker admits it, and is not charged to the
// retry budget, as it reaches no upstream meanwhile. Loop only.
func (k *Kernel) breakerHolds(h *Handle) bool {
	x := groupExt(h)
	return x != nil && x.ks != nil && x.ks.br != nil && x.ks.br.State(k.ls.now) != breaker.Closed
}
