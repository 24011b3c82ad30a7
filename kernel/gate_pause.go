package kernel

import (
	"slices"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/queue"
)

// pause applies Kernel.Pause or Kernel.Resume. Loop only.
func (k *Kernel) pause(sel Selector, on bool) error {
	gs := &k.ls.gate
	switch {
	case sel.Group != "":
		d, ok := k.ls.rcl.groups[sel.Group]
		var g *groupState
		if ok {
			g = k.group(d)
		} else if g, ok = gs.groups[sel.Group]; !ok {
			return nil
		}
		if sel.Key != "" {
			ks := k.keyOf(g, sel.Key)
			if ks.paused == on {
				return nil
			}
			ks.paused = on
			if on {
				g.pausedKeys++
				k.pullBack(func(_ *Handle, x *taskExt) bool { return x.ks == ks })
			} else {
				g.pausedKeys--
				k.touchKey(ks)
				k.keyMaybeIdle(ks)
			}
			k.note(g, sel.Key, notePause(on), 0)
			return nil
		}
		if g.paused == on {
			return nil
		}
		g.paused = on
		if on {
			k.pullBack(func(_ *Handle, x *taskExt) bool { return x.ks.g == g })
		} else {
			k.touchAll(g)
		}
		k.note(g, "", notePause(on), 0)
	case sel.Kind != "":
		if on {
			if gs.pausedKinds == nil {
				gs.pausedKinds = make(map[string]bool)
			}
			gs.pausedKinds[sel.Kind] = true
			return nil
		}
		delete(gs.pausedKinds, sel.Kind)
		held := gs.held[sel.Kind]
		delete(gs.held, sel.Kind)
		gs.heldN -= len(held)
		var regate []*Handle
		for _, h := range held {
			if h.has(featGroup) {
				regate = append(regate, h) // its permit returned when it was held
				continue
			}
			k.pushBucket(h)
		}
		// Back to the head of their keys' queues, in their order.
		for i := len(regate) - 1; i >= 0; i-- {
			h := regate[i]
			k.keyFor(h.ext)
			k.gatePushFront(h)
		}
		for _, h := range regate {
			k.touchKey(h.ext.ks)
		}
	default:
		m := queue.Mask(1) << levelOf(sel.Priority)
		if on == (gs.pausedLevels&m != 0) {
			return nil
		}
		if on {
			gs.pausedLevels |= m
			k.pullBack(func(h *Handle, _ *taskExt) bool { return h.bucket == levelOf(sel.Priority) })
		} else {
			gs.pausedLevels &^= m
			for _, g := range gs.groups {
				k.touchAll(g)
			}
		}
	}
	return nil
}

// publishPaused publishes whether sel is paused now (Stats.Paused). Loop only.
func (k *Kernel) publishPaused(sel Selector) {
	var cur []Selector
	if p := k.paused.Load(); p != nil {
		cur = *p
	}
	i, on := slices.Index(cur, sel), k.pausedNow(sel)
	if on == (i >= 0) {
		return
	}
	next := slices.Clone(cur)
	if on {
		next = append(next, sel)
	} else {
		next = slices.Delete(next, i, i+1)
	}
	k.paused.Store(&next)
}

// pausedNow reports whether sel is paused. Loop only.
func (k *Kernel) pausedNow(sel Selector) bool {
	gs := &k.ls.gate
	switch {
	case sel.Group != "":
		g := gs.groups[sel.Group]
		if g == nil || sel.Key == "" {
			return g != nil && g.paused
		}
		ks := g.keys[sel.Key]
		return ks != nil && ks.paused
	case sel.Kind != "":
		return gs.pausedKinds[sel.Kind]
	}
	return gs.pausedLevels&(queue.Mask(1)<<levelOf(sel.Priority)) != 0
}

// touchAll offers every key of g a start.
func (k *Kernel) touchAll(g *groupState) {
	for _, ks := range g.keys {
		if ks.n > 0 && !ks.inReady && k.keyCanStart(ks) {
			ks.inReady = true
			g.ready.Push(ks)
		}
	}
	k.serveGroup(g)
}

// pullBack takes the tasks of groups that hold a permit but wait in their bucket,
// and that match, back to the head of their keys' queues, in their order,
// returning their permits. Loop only.
func (k *Kernel) pullBack(match func(h *Handle, x *taskExt) bool) {
	var back []*Handle
	for l := range queue.NumLevels {
		r := k.ls.buckets.Bucket(queue.Level(l))
		var keep []qitem
		r.Clear(func(it qitem) {
			if it.h != nil {
				if x := groupExt(it.h); x != nil && it.h.cur.permit && match(it.h, x) {
					back = append(back, it.h)
					return
				}
			}
			keep = append(keep, it)
		})
		for _, it := range keep {
			_ = r.Push(it)
		}
	}
	// Pushed to the front in reverse: each key's queue gets them back in order.
	for i := len(back) - 1; i >= 0; i-- {
		h := back[i]
		a := h.cur
		a.permit = false
		if a.unstarted {
			k.unstart(a)
		}
		k.breakerDone(a, breaker.Ignored)
		ks := h.ext.ks
		ks.running--
		ks.g.running--
		k.gatePushFront(h)
	}
}

// holdKind reports whether dispatch must hold h back (its durable kind is paused),
// and holds it. Loop only.
func (k *Kernel) holdKind(h *Handle) bool {
	gs := &k.ls.gate
	if !h.has(featDurable) || !gs.pausedKinds[h.dur.kind] {
		return false
	}
	if gs.held == nil {
		gs.held = make(map[string][]*Handle)
	}
	gs.held[h.dur.kind] = append(gs.held[h.dur.kind], h)
	gs.heldN++
	if h.cur.permit {
		// A task of a paused kind holds no permit of its group (DurableTask.Group):
		// its key's other tasks go on meanwhile. It waits for a permit again once
		// its kind is resumed.
		k.gateRelease(h.cur)
	}
	return true
}

// unholdCanceled removes h from the tasks of paused kinds, reporting whether it
// was there. Loop only.
func (k *Kernel) unholdCanceled(h *Handle) bool {
	gs := &k.ls.gate
	if !h.has(featDurable) {
		return false
	}
	hs := gs.held[h.dur.kind]
	for i, o := range hs {
		if o == h {
			gs.held[h.dur.kind] = append(hs[:i:i], hs[i+1:]...)
			gs.heldN--
			return true
		}
	}
	return false
}
