package kernel

import "github.com/axsched/ax/internal/breaker"

// A permit's life: the gate grants it to a key's head task (grant), or at once to
// a claimed task (gateClaimed); under a rate, its key and group grant no other
// until its task starts (gateStarted); it returns when the attempt's function
// returns or the task leaves its bucket without running (gateRelease).

// grant gives a permit to ks's head task and moves it to its bucket. It reports
// false if the key's breaker refused. keyCanStart and the group's total limits
// allowed it. Loop only.
func (k *Kernel) grant(ks *keyState) bool {
	g := ks.g
	lvl, _ := k.headLevel(ks)
	var gen uint32
	admitted := false
	if ks.br != nil {
		ok, gn, wake := ks.br.Admit(k.ls.now)
		if st := breakerState(ks.br.State(k.ls.now)); st != ks.brState {
			k.breakerMoved(ks, ks.brState, st) // open turned half-open in Admit
		}
		if !ok {
			k.breakerRefused(ks, wake)
			return false
		}
		gen, admitted = gn, true
	}
	h := ks.q[lvl].Pop()
	if g.def.cfg.Ordered {
		ks.owner = h
	}
	ks.n--
	g.waiting--
	x := h.ext
	x.inGate = false
	gateUncount(h)
	a := h.cur
	a.permit = true
	a.brGen, a.brAdmitted, a.brReported = gen, admitted, false
	ks.running++
	g.running++
	now := k.ls.nowMono
	ks.rate.Take(g.def.perKey, now)
	g.total.Take(g.def.total, now)
	if g.def.perKey.Interval != 0 || g.def.total.Interval != 0 {
		// Until the task starts (its bucket and the run queue may hold it while the
		// kernel is saturated), its rates grant no other permit: so a backlog never
		// releases their starts in a bunch.
		a.unstarted = true
		ks.unstarted++
		g.unstarted++
	}
	ks.lastUsed = now
	k.pushBucket(h)
	return true
}

// gateStarted hears that a's task started: its key and group may grant their next
// permits under their rates. Loop only.
func (k *Kernel) gateStarted(a *attempt) {
	if a.unstarted {
		k.touchKey(k.unstart(a))
	} // else Close returned its permit
}

// unstart clears a's attempt.unstarted and returns its key. Loop only.
func (k *Kernel) unstart(a *attempt) *keyState {
	a.unstarted = false
	ks := a.h.ext.ks
	ks.unstarted--
	ks.g.unstarted--
	if ks.unstarted == 0 {
		k.startWaited(&ks.waitsStart)
	}
	if ks.g.unstarted == 0 {
		k.startWaited(&ks.g.waitsStart)
	}
	return ks
}

// waitStart marks a key or a group (its waitsStart flag f) as waiting for a
// permit's task to start, and startWaited clears the mark. Loop only.
func (k *Kernel) waitStart(f *bool) {
	if !*f {
		*f = true
		k.ls.gate.startWaits++
	}
}

func (k *Kernel) startWaited(f *bool) {
	if *f {
		*f = false
		k.ls.gate.startWaits--
	}
}

// gateClaimed gives a claimed durable task of a group (see claimed) its permit
// at once, past its key's and group's limits if need be: the claim started the
// attempt in the store already, so it cannot wait. It counts against the limits
// like any permit (other tasks of the key wait for it), spends the rate tokens and
// is returned when the attempt's function returns; the breaker is not asked. Loop
// only.
func (k *Kernel) gateClaimed(h *Handle) {
	x := groupExt(h)
	if x == nil {
		return
	}
	ks := k.keyFor(x)
	g := ks.g
	gateUncount(h)
	a := h.cur
	a.permit = true
	a.brGen, a.brAdmitted, a.brReported = 0, false, false
	ks.running++
	g.running++
	now := k.ls.nowMono
	ks.rate.Take(g.def.perKey, now)
	g.total.Take(g.def.total, now)
	ks.lastUsed = now
}

// gateRelease returns the permit of attempt a: its function returned, or it left
// its bucket without running. Loop only.
func (k *Kernel) gateRelease(a *attempt) {
	k.breakerDone(a, breaker.Ignored) // if not reported: it never ran
	a.permit = false
	if a.unstarted {
		k.unstart(a) // it never started
	}
	ks := a.h.ext.ks
	ks.running--
	ks.g.running--
	ks.lastUsed = k.ls.nowMono
	if ks.n > 0 {
		k.touchKey(ks)
	} else {
		k.serveGroup(ks.g)
		k.keyMaybeIdle(ks)
	}
}
