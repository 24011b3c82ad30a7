package kernel

// Starts in the commit that stores the task (acknowledged mode).
//
// A durable task submitted to a kernel with a free slot and nothing queued would
// otherwise take two commits before it runs: the one that stores it (which
// acknowledges the submit), then the one that stores its start (see gate). Instead,
// before each commit the journal asks the loop for free slots (startBudget) and
// gives up to that many of the batch's due inserts their start in the same commit:
// an OpStart right behind the insert, which the store writes as one row, Running.
// Once that commit landed, the loop takes the tasks in already started
// (prestarted), as it does the tasks a claim started. The reserved slots count
// among the durable attempts in flight (durRunning) from the reservation on, so
// the rows stored Running stay within the slots, as for every other start.
//
// The loop reserves only slots that nothing queued here waits for: a task queued in
// a bucket takes a free slot before a new submit does, so the priorities and shares
// decide as before; a new task only skips the run queue when nobody waits in it.
// None while a priority or a durable kind is paused ([Kernel.Pause]); a task of a
// group (durable tasks with a Group) always goes through its group's gate.

// askStartBudget asks the loop for up to want free slots for starts in the next
// commit; the loop reserves them until the commit's answer (durPrestarted). It
// returns 0 when the loop is gone.
func (k *Kernel) askStartBudget(want int) int {
	ch := make(chan int, 1)
	k.in.mu.Lock()
	if k.in.closed {
		k.in.mu.Unlock()
		return 0
	}
	k.in.ctrl = append(k.in.ctrl, ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durStartBudget, count: ch, want: want}})
	wake := k.in.loopWaiting
	k.in.loopWaiting = false
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
	select {
	case n := <-ch:
		return n
	case <-k.loopDone:
		return 0
	}
}

// startBudget reserves up to want slots for starts in the journal's next commit:
// the free slots less the tasks queued here and the slots reserved already, within
// the durable attempts' bound, and none while the lease is in doubt or the kernel
// stops. Loop only.
func (k *Kernel) startBudget(want int) int {
	// Nor while a priority or a durable kind is paused: the journal cannot tell
	// which of its inserts that holds back.
	if k.ls.closing || k.ls.draining || k.dur.own != nil && k.dur.own.Doubt() ||
		k.ls.gate.pausedLevels != 0 || len(k.ls.gate.pausedKinds) > 0 {
		return 0
	}
	q := &k.rq
	q.mu.Lock()
	free := q.limit - q.running - q.queued()
	q.mu.Unlock()
	n := min(want, free-k.ls.buckets.Len()-k.ls.claimReserved-k.ls.startReserved,
		k.ls.rcl.cfg.MaxConcurrency-k.ls.durRunning)
	if n <= 0 {
		return 0
	}
	k.ls.durRunning += n
	k.ls.startReserved += n
	return n
}

// handPrestarted hands a commit's prestarted tasks to the loop and frees its
// reservation. Once the loop is gone (Close), it ends the tasks here: their rows
// stay Running, for a rescue or the next kernel's recovery, as for any attempt a
// Close interrupts.
func (k *Kernel) handPrestarted(m *durMsg) {
	k.in.mu.Lock()
	if !k.in.loopGone {
		k.in.ctrl = append(k.in.ctrl, ctrlMsg{kind: ctrlDurable, dur: m})
		wake := k.in.loopWaiting
		k.in.loopWaiting = false
		k.in.mu.Unlock()
		if wake {
			k.poke()
		}
		return
	}
	k.in.mu.Unlock()
	for _, h := range m.hs {
		k.release(h.ticket(), 1)
		k.abortDurable(h)
	}
}

// prestarted takes in tasks whose insert and start one commit stored: they go to
// the run queue started, holding no ticket and journaling no start. Loop only.
func (k *Kernel) prestarted(m *durMsg) {
	k.ls.durRunning -= m.reserved
	k.ls.startReserved -= m.reserved
	if len(m.hs) == 0 {
		return
	}
	picked := k.ls.picked[:0]
	for _, h := range m.hs {
		if h.has(featNamed) {
			k.index(h)
		}
		k.ls.live++
		k.ls.pendSubmitted[h.bucket]++
		k.ls.pendRelease[h.ticket()]++
		k.ls.freed = true
		h.dur.fence++ // the start's fence (journalStart's rule)
		if k.ls.closing {
			// Close began while the commit was in flight: the task ends as a queued
			// one does, and its row stays Running for the next owner.
			h.dur.keepLive = true
			k.setState(h, Queued)
			k.flushCounts()
			k.m.canceled[h.bucket].Inc()
			k.end(h, Canceled, ErrClosed)
			continue
		}
		h.queuedAt = k.ls.nowMono
		k.setState(h, Queued)
		if k.events != nil {
			k.emit(h, 0, Queued, h.cur, nil)
		}
		picked = append(picked, k.startClaimed(h, 1))
	}
	k.flushCounts()
	k.handOver(picked)
	clear(picked)
	k.ls.picked = picked[:0]
}

// drainPrestarts ends the prestarted tasks of handovers that reached the intake
// after the loop's last pass, and makes later ones end in handPrestarted. Called
// by the loop as it returns.
func (k *Kernel) drainPrestarts() {
	k.in.mu.Lock()
	k.in.loopGone = true
	ctrl := k.in.ctrl
	k.in.ctrl = nil
	k.in.mu.Unlock()
	for _, m := range ctrl {
		if m.kind != ctrlDurable {
			continue
		}
		switch m.dur.kind {
		case durPrestarted:
			for _, h := range m.dur.hs {
				k.release(h.ticket(), 1)
				k.abortDurable(h)
			}
		case durStartBudget, durClaimBudget:
			m.dur.count <- 0
		}
	}
}
