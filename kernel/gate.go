package kernel

import (
	"math"
	"time"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/kernel/internal/fifo"
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/timewheel"
)

// The gate holds the tasks of groups (Config.Groups) before their buckets. A
// task of a group waits in its key's queue, by priority and FIFO within one, and
// enters its bucket only once it holds a permit: a slot of its key's and its
// group's concurrency and a token of their rates (and its key's breaker's
// consent). So a key that cannot start — its limits reached, its upstream
// hanging, its breaker open, paused — holds no place in the buckets, and never
// delays other keys nor the shares between priorities. The permit returns when
// the attempt's function returns (a zombie keeps it until then).
//
// Keys that may start but for the group's total limits wait in the group's ready
// ring and are served round robin, one permit each, as the total allows. A key
// held back by its own rate, a RetryAfter or an open breaker has one wheel entry
// at the time it may go on; the group has one for its total rate and one to
// forget idle keys. Everything here is loop-owned.

// group returns the state of group d, making it on first use. Loop only.
func (k *Kernel) group(d *groupDef) *groupState {
	gs := &k.ls.gate
	if g, ok := gs.groups[d.name]; ok {
		return g
	}
	if gs.groups == nil {
		gs.groups = make(map[string]*groupState)
	}
	g := &groupState{name: d.name, def: d, keys: make(map[string]*keyState), pub: k.gpub.Get(d.name)}
	if cur, ok := k.ls.rcl.groups[d.name]; ok {
		g.def = cur
	}
	gs.groups[d.name] = g
	return g
}

// keyOf returns the state of key in g, making it on first use. Loop only.
func (k *Kernel) keyOf(g *groupState, key string) *keyState {
	if ks, ok := g.keys[key]; ok {
		return ks
	}
	ks := &keyState{g: g, key: key, lastUsed: k.ls.nowMono}
	k.newKeyBreaker(ks, g.def)
	g.keys[key] = ks
	return ks
}

// keyFor returns the state of x's key, making it anew when the key was forgotten
// since x last used it (its retry's backoff, or a pause of its kind, outlasted
// KeyIdle): a task never comes back to a forgotten key's state, which would limit
// it apart from the key's other tasks. Loop only.
func (k *Kernel) keyFor(x *taskExt) *keyState {
	g := k.group(x.gd)
	if ks := x.ks; ks != nil && g.keys[x.key] == ks {
		return ks
	}
	x.ks = k.keyOf(g, x.key)
	return x.ks
}

// gateIn puts h, a task of a group without a permit, in its key's queue. from is
// its previous state (0 when new). Loop only.
func (k *Kernel) gateIn(h *Handle, from State) {
	x := h.ext
	ks := k.keyFor(x)
	g := ks.g
	if !x.counted && x.gd.counts != nil {
		x.gd.counts.Add(x.key, 1, 0) // a retry is never refused
		x.counted = true
	}
	k.setState(h, Queued)
	if from != 0 || k.events != nil {
		k.emit(h, from, Queued, h.cur, nil)
	}
	if k.ls.closing {
		k.gateEnd(h, Canceled, ErrClosed)
		return
	}
	x.inGate = true
	if ks.owner == h {
		ks.q[h.bucket].PushFront(h) // its retry: the key waited for it (Ordered)
	} else {
		k.ls.gate.seq++
		x.order = k.ls.gate.seq
		ks.q[h.bucket].Push(h)
	}
	ks.n++
	g.waiting++
	k.touchKey(ks)
}

// gatePushFront puts h back at the head of its key's queue (its attempt was
// rate-limited, or Pause took it back from its bucket). h is Queued.
func (k *Kernel) gatePushFront(h *Handle) {
	x := h.ext
	ks := x.ks
	if !x.counted && x.gd.counts != nil {
		x.gd.counts.Add(x.key, 1, 0)
		x.counted = true
	}
	x.inGate = true
	ks.q[h.bucket].PushFront(h)
	ks.n++
	ks.g.waiting++
}

// gateEnd ends a task waiting in no queue (about to enter one) or taken out of
// its key's queue, releasing its ticket. Loop only.
func (k *Kernel) gateEnd(h *Handle, to State, err error) {
	k.release(h.ticket(), 1)
	k.ls.freed = true
	switch to {
	case Canceled:
		k.m.canceled[h.bucket].Inc()
	case Failed:
		k.m.failed[h.bucket].Inc()
	case Abandoned:
		k.m.abandoned[h.bucket].Inc()
	}
	k.end(h, to, err)
}

// gateUncount takes h off its key's waiting tasks (MaxWaiting). Loop only.
func gateUncount(h *Handle) {
	if x := h.ext; h.has(featGroup) && x.counted {
		x.counted = false
		x.gd.counts.Sub(x.key, 1)
	}
}

// gateRemove takes h out of its key's queue, if it waits there, and reports
// whether it did. Loop only.
func (k *Kernel) gateRemove(h *Handle) bool {
	x := groupExt(h)
	if x == nil || !x.inGate {
		return false
	}
	ks := x.ks
	ks.q[h.bucket].Remove(func(o *Handle) bool { return o == h })
	x.inGate = false
	ks.n--
	ks.g.waiting--
	k.keyMaybeIdle(ks)
	return true
}

// headLevel returns the level of ks's next task: its highest level with tasks
// that is not paused (an Ordered key's: orderedHead).
func (k *Kernel) headLevel(ks *keyState) (queue.Level, bool) {
	if ks.g.def.cfg.Ordered {
		return k.orderedHead(ks)
	}
	for l := range queue.NumLevels {
		if ks.q[l].Len() > 0 && k.ls.gate.pausedLevels&(1<<l) == 0 {
			return queue.Level(l), true
		}
	}
	return 0, false
}

// keyCanStart reports whether ks's head task may have a permit as far as the key
// is concerned (the group's total limits aside). When the key must wait for a
// time (a token, a RetryAfter's end, an open breaker's time), it arms the key's
// wheel entry for it. Loop only.
func (k *Kernel) keyCanStart(ks *keyState) bool {
	g := ks.g
	if ks.n == 0 || ks.paused || g.paused || k.ls.closing {
		return false
	}
	if _, ok := k.headLevel(ks); !ok {
		return false
	}
	d := g.def
	if c := d.cfg.PerKey.Concurrency; c > 0 && ks.running >= c {
		return false
	}
	if ks.unstarted > 0 && d.perKey.Interval != 0 {
		k.waitStart(&ks.waitsStart)
		return false // gateStarted touches the key
	}
	now := k.ls.nowMono
	token := ks.rate.Next(d.perKey)
	wait := max(ks.holdUntil, token, ks.brUntil)
	if wait > now {
		if token > now {
			ks.rate.Refuse(d.perKey)
		}
		if ks.timer.slot == 0 || ks.timer.at != wait {
			if ks.timer.slot == 0 {
				g.pub.Throttles.Add(1)
				k.note(g, ks.key, NoteThrottled, 0)
			}
			k.armKey(ks, wait)
		}
		return false
	}
	return !ks.brProbe
}

// touchKey puts ks in its group's ready ring if it may start, and serves the
// group. Loop only.
func (k *Kernel) touchKey(ks *keyState) {
	if !ks.inReady && k.keyCanStart(ks) {
		ks.inReady = true
		ks.g.ready.Push(ks)
	}
	k.serveGroup(ks.g)
}

// serveGroup gives permits to the keys in g's ready ring, round robin, one each
// per turn, while the group's total limits allow. Loop only.
func (k *Kernel) serveGroup(g *groupState) {
	d := g.def
	now := k.ls.nowMono
	for g.ready.Len() > 0 {
		if g.paused || k.ls.closing {
			return
		}
		if c := d.cfg.Total.Concurrency; c > 0 && g.running >= c {
			return // a permit's return serves the group again
		}
		if g.unstarted > 0 && d.total.Interval != 0 {
			k.waitStart(&g.waitsStart)
			return // so does its start (gateStarted)
		}
		if at := g.total.Next(d.total); at > now {
			g.total.Refuse(d.total)
			if g.totalTimer.slot == 0 || g.totalTimer.at != at {
				k.armGroup(g, &g.totalTimer, slotTotal, at)
			}
			return
		}
		ks := g.ready.Pop()
		ks.inReady = false
		if !k.keyCanStart(ks) || !k.grant(ks) {
			continue
		}
		if k.keyCanStart(ks) {
			ks.inReady = true
			g.ready.Push(ks)
		}
	}
}

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

// armKey sets ks's wheel entry to mono time at.
func (k *Kernel) armKey(ks *keyState, at int64) {
	if ks.timer.slot == 0 {
		ks.g.throttled++
	}
	k.armTimer(&ks.timer, gateSlot{ks: ks, g: ks.g, kind: slotKey}, at)
}

// armGroup sets one of g's wheel entries to mono time at.
func (k *Kernel) armGroup(g *groupState, t *timer, kind uint8, at int64) {
	k.armTimer(t, gateSlot{g: g, kind: kind}, at)
}

func (k *Kernel) armTimer(t *timer, s gateSlot, at int64) {
	gs := &k.ls.gate
	if t.slot != 0 {
		k.ls.wheel.Cancel(t.h)
	} else {
		if n := len(gs.free); n > 0 {
			t.slot = gs.free[n-1]
			gs.free = gs.free[:n-1]
		} else {
			if len(gs.slots) == 0 {
				gs.slots = append(gs.slots, gateSlot{}) // slot 0 means none
			}
			t.slot = uint64(len(gs.slots))
			gs.slots = append(gs.slots, gateSlot{})
		}
		gs.slots[t.slot] = s
	}
	t.at = at
	t.h = k.ls.wheel.Schedule(k.at(at), timerEntry{t: lazyTask{meta: t.slot}})
}

func (k *Kernel) freeSlot(t *timer) {
	gs := &k.ls.gate
	gs.slots[t.slot] = gateSlot{}
	gs.free = append(gs.free, t.slot)
	t.slot = 0
	t.h = timewheel.Handle[timerEntry]{}
}

// isGateEntry reports whether a wheel entry is the gate's.
func isGateEntry(e *timerEntry) bool { return e.a == nil && e.t.run == nil }

// onGateTimer handles a gate wheel entry that came due. Loop only.
func (k *Kernel) onGateTimer(slot uint64) {
	s := k.ls.gate.slots[slot]
	switch s.kind {
	case slotKey:
		ks := s.ks
		k.freeSlot(&ks.timer)
		ks.g.throttled--
		if ks.brUntil != 0 && ks.brUntil <= k.ls.nowMono {
			ks.brUntil = 0
		}
		k.touchKey(ks)
		k.keyMaybeIdle(ks)
	case slotTotal:
		k.freeSlot(&s.g.totalTimer)
		k.serveGroup(s.g)
	case slotSweep:
		k.freeSlot(&s.g.sweepTimer)
		k.sweepKeys(s.g)
	}
}

// keepGateEntry re-arms a gate wheel entry that Shutdown's clearing of the wheel
// took out. Loop only.
func (k *Kernel) keepGateEntry(slot uint64) {
	s := k.ls.gate.slots[slot]
	var t *timer
	switch s.kind {
	case slotKey:
		t = &s.ks.timer
	case slotTotal:
		t = &s.g.totalTimer
	case slotSweep:
		t = &s.g.sweepTimer
	default:
		return
	}
	t.h = k.ls.wheel.Schedule(k.at(t.at), timerEntry{t: lazyTask{meta: slot}})
}

// keyMaybeIdle queues ks to be forgotten once it stays unused for KeyIdle. Loop only.
func (k *Kernel) keyMaybeIdle(ks *keyState) {
	if ks.inIdle || ks.n > 0 || ks.running > 0 {
		return
	}
	g := ks.g
	ks.inIdle = true
	g.idle.Push(ks)
	if g.sweepTimer.slot == 0 {
		k.armGroup(g, &g.sweepTimer, slotSweep, ks.lastUsed+int64(g.def.cfg.KeyIdle))
	}
}

// sweepKeys forgets the keys of g that stayed idle for KeyIdle, at most sweepMax
// of them per call, and re-arms the sweep while idle keys remain. Loop only.
func (k *Kernel) sweepKeys(g *groupState) {
	now := k.ls.nowMono
	idle := int64(g.def.cfg.KeyIdle)
	next := int64(math.MaxInt64)
	n := min(g.idle.Len(), sweepMax)
	if n < g.idle.Len() {
		next = now + 1 // more to look at
	}
	for ; n > 0; n-- {
		ks := g.idle.Pop()
		if ks.n > 0 || ks.running > 0 || ks.paused {
			ks.inIdle = false // it is queued again when it goes idle
			continue
		}
		due := ks.lastUsed + idle
		if due <= now {
			if k.keyForgettable(ks) {
				ks.inIdle = false
				delete(g.keys, ks.key)
				continue
			}
			due = now + max(idle/4, 1) // its bucket refills, its breaker closes: look again
		}
		next = min(next, due)
		g.idle.Push(ks)
	}
	if g.idle.Len() > 0 {
		k.armGroup(g, &g.sweepTimer, slotSweep, next)
	}
}

// sweepMax bounds the keys one sweep looks at, so that forgetting a million keys
// never stalls the loop for long.
const sweepMax = 4096

// keyForgettable reports whether ks holds nothing worth keeping: nothing waits or
// runs, it is not paused, its bucket is full, no RetryAfter or breaker holds it.
func (k *Kernel) keyForgettable(ks *keyState) bool {
	now := k.ls.nowMono
	return ks.n == 0 && ks.running == 0 && !ks.paused && ks.timer.slot == 0 &&
		ks.rate.Full(now) && ks.holdUntil <= now && ks.brUntil <= now && !ks.brProbe &&
		(ks.br == nil || ks.br.Idle(k.ls.now)) && ks.owner == nil
}

// holdKey pauses ks for d after an attempt returned a RateLimitedError. Loop only.
func (k *Kernel) holdKey(ks *keyState, d time.Duration) {
	ks.g.pub.RateLimited.Add(1)
	d = max(d, k.ls.rcl.cfg.Tick)
	ks.holdUntil = max(ks.holdUntil, addMono(k.ls.nowMono, d))
}

// rateLimited handles an attempt of a group's task that returned a
// RateLimitedError: its key pauses for d, and the task goes back to the head of
// its key's queue, its attempt not spent. Loop only.
func (k *Kernel) rateLimited(h *Handle, a *attempt) {
	ks := h.ext.ks
	na := &attempt{h: h, n: a.n}
	na.ctx.a = na
	na.ctx.parent = a.ctx.parent
	h.cur = na
	k.waiting[h.bucket].Add(1) // it waits again: a ticket, without a check (as a retry)
	h.evicts = false
	from := k.setState(h, Queued)
	k.emit(h, from, Queued, na, a.err)
	k.gatePushFront(h)
	k.touchKey(ks)
}

// closeGate ends every task waiting in the gate or held by a paused kind
// Canceled with ErrClosed, and drops the gate's wheel entries. Loop only.
func (k *Kernel) closeGate() {
	gs := &k.ls.gate
	for _, g := range gs.groups {
		for _, ks := range g.keys {
			for l := range queue.NumLevels {
				for ks.q[l].Len() > 0 {
					h := ks.q[l].Pop()
					ks.n--
					g.waiting--
					h.ext.inGate = false
					k.gateEnd(h, Canceled, ErrClosed)
				}
			}
		}
		g.ready = fifo.Queue[*keyState]{}
	}
	for kind, hs := range gs.held {
		for _, h := range hs {
			k.gateEnd(h, Canceled, ErrClosed)
		}
		delete(gs.held, kind)
	}
	gs.heldN = 0
}

// applyGroups installs the groups of a new config: each group's state takes its
// new def, and every group is served, its limits perhaps raised. A group no longer
// in the config keeps the def its tasks were submitted with until it empties.
// Loop only.
func (k *Kernel) applyGroups(rc *resolved) {
	for name, g := range k.ls.gate.groups {
		if d, ok := rc.groups[name]; ok {
			if (g.def.breaker == nil) != (d.breaker == nil) {
				for _, ks := range g.keys {
					ks.brUntil, ks.brProbe = 0, false
					k.newKeyBreaker(ks, d)
				}
				g.openBreakers = 0
			}
			if g.def.cfg.Ordered != d.cfg.Ordered {
				for _, ks := range g.keys {
					ks.owner = nil // see GroupConfig.Ordered
				}
			}
			g.def = d
		}
		k.touchAll(g)
	}
}

// dropGateEntry forgets a gate wheel entry that Close's clearing of the wheel
// took out. Loop only.
func (k *Kernel) dropGateEntry(slot uint64) {
	s := k.ls.gate.slots[slot]
	switch s.kind {
	case slotKey:
		s.ks.g.throttled--
		k.freeSlot(&s.ks.timer)
	case slotTotal:
		k.freeSlot(&s.g.totalTimer)
	case slotSweep:
		k.freeSlot(&s.g.sweepTimer)
	}
}
