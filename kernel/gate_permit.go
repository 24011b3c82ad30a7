package kernel

import "github.com/axsched/ax/internal/breaker"

// A permit's life: the gate grants it to a key's head task (grant), whose rate
// tokens count once the task starts (gateStarted), or at once for a claimed task
// (gateClaimed); it returns when the attempt's function returns or the task leaves
// its bucket without running (gateRelease).

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
	if g.def.perKey.Interval != 0 || g.def.total.Interval != 0 {
		// The tokens are taken once the task starts (gateStarted), so that its rates
		// space the starts, however long its bucket and the run queue hold it.
		a.tokens = true
		ks.unstarted++
		g.unstarted++
	}
	ks.lastUsed = k.ls.nowMono
	k.pushBucket(h)
	return true
}

// gateStarted takes the rate tokens of a's permit at the time its executor started
// it, and gives its key and group their turn for the next permit. Loop only.
func (k *Kernel) gateStarted(a *attempt) {
	if !a.tokens {
		return // Close returned its permit
	}
	ks := k.untoken(a)
	g := ks.g
	ks.rate.Take(g.def.perKey, a.startAt)
	g.total.Take(g.def.total, a.startAt)
	k.touchKey(ks)
}

// untoken clears a's pending tokens (attempt.tokens) and returns its key. Loop only.
func (k *Kernel) untoken(a *attempt) *keyState {
	a.tokens = false
	ks := a.h.ext.ks
	ks.unstarted--
	ks.g.unstarted--
	return ks
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
	if a.tokens {
		k.untoken(a) // it never started: its tokens are not spent
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
