package kernel

// emit records a state change for OnEvent. Loop only.
func (k *Kernel) emit(h *Handle, from, to State, a *attempt, err error) {
	if k.events == nil {
		return
	}
	n := 0
	if a != nil {
		n = int(a.n)
	}
	ev := Event{TaskID: h.ID(), Priority: h.prio, From: from, To: to, Time: k.ls.now, Attempt: n, Err: err}
	if x := groupExt(h); x != nil {
		ev.Group, ev.Key = x.gd.name, x.key
	}
	k.ls.evBuf = append(k.ls.evBuf, ev)
}

// note records an event about group g or one of its keys for OnEvent. Loop only.
func (k *Kernel) note(g *groupState, key string, n Note, bs BreakerState) {
	if k.events == nil {
		return
	}
	k.ls.evBuf = append(k.ls.evBuf, Event{Time: k.ls.now, Group: g.name, Key: key, Note: n, Breaker: bs})
}

// notePause returns the note of a pause (on) or a resume.
func notePause(on bool) Note {
	if on {
		return NotePaused
	}
	return NoteResumed
}

// flushEvents hands the pass's events to the event goroutine. Loop only.
func (k *Kernel) flushEvents() {
	if k.events == nil || len(k.ls.evBuf) == 0 {
		return
	}
	if d := k.events.Push(k.ls.evBuf...); d > 0 {
		k.m.eventsDropped.Add(d)
		k.log.Warn("kernel: events dropped: OnEvent is slower than the kernel", "dropped", d)
	}
	clear(k.ls.evBuf)
	k.ls.evBuf = k.ls.evBuf[:0]
}
