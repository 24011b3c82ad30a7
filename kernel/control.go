package kernel

import "github.com/axsched/ax/store"

// ctrlKind is the kind of a control message.
type ctrlKind uint8

const (
	ctrlCancel      ctrlKind = iota + 1 // cancel one task (h)
	ctrlCancelBatch                     // cancel a batch's members (b)
	ctrlCancelID                        // cancel the live tasks of an ID (id); acks the count
	ctrlUpdate                          // apply a new resolved config (rc), answer on ack
	ctrlShutdown                        // drain and stop
	ctrlClose                           // stop now
	ctrlRecover                         // schedule durable tasks read back from the store (hs)
	ctrlStarted                         // the journal stored the starts of gated attempts (as)
	ctrlClaimBudget                     // how many pool tasks may be claimed now (count)
	ctrlClaimed                         // a claim's tasks, and the slots reserved for it (claim)
	ctrlPoolEnded                       // pool tasks this kernel follows ended elsewhere (claim)
	ctrlEvict                           // evict the newest queued Low task for a High submitter, answer on ack
	ctrlStartBudget                     // how many inserts of the next commit may start in it (want; answer on count)
	ctrlPrestarted                      // a commit stored these tasks started, and frees its reservation (prestart)
	ctrlLeaseLapse                      // the lease may end soon without a renewal: cancel the running durable attempts
	ctrlPause                           // pause (pause) or resume the work of sel, answer on ack
)

// claimMsg carries the claimer's news to the loop.
type claimMsg struct {
	tasks    []store.StoredTask // claimed (ctrlClaimed) or ended elsewhere (ctrlPoolEnded)
	reserved int                // slots the loop reserved for the claim
}

// ctrlMsg is a message from the API to the loop.
type ctrlMsg struct {
	kind ctrlKind
	h    *Handle
	b    *Batch
	rc   *resolved
	hs   []*Handle
	as   []*attempt
	// ctrlStarted: attempts whose start the store refused, and why.
	refused []*attempt
	errs    []error
	claim   *claimMsg
	hungry  bool // ctrlClaimBudget: due pool work is known
	want    int  // ctrlStartBudget: the inserts that could start
	// ctrlPrestarted: the tasks and the reservation of one commit.
	prestart *prestartMsg
	id       string
	sel      Selector   // ctrlPause
	pause    bool       // ctrlPause: pause rather than resume
	ack      chan error // size 1
	count    chan int   // size 1
}

// poke wakes the loop if it is parked. It never blocks.
func (k *Kernel) poke() {
	select {
	case k.pokeCh <- struct{}{}:
	default:
	}
}

// control hands a control message to the loop.
func (k *Kernel) control(m ctrlMsg) {
	k.in.mu.Lock()
	k.in.ctrl = append(k.in.ctrl, m)
	wake := k.in.loopWaiting
	k.in.loopWaiting = false
	k.in.mu.Unlock()
	if wake {
		k.poke()
	}
}

// handleCtrl applies one control message.
func (k *Kernel) handleCtrl(m ctrlMsg) {
	switch m.kind {
	case ctrlCancel:
		k.cancel(m.h, ErrCanceled)
	case ctrlCancelBatch:
		m.b.mu.Lock()
		members := m.b.members // submitters append; the ones taken in so far suffice
		m.b.mu.Unlock()
		for _, h := range members {
			k.cancel(h, m.b.cause())
		}
	case ctrlUpdate:
		k.apply(m.rc)
		k.rc.Store(m.rc)
		k.applyGroups(m.rc)
		m.ack <- nil
	case ctrlPause:
		err := k.pause(m.sel, m.pause)
		if k.ls.gate.groups != nil {
			k.publishGroups() // Stats after Pause or Resume returns shows it
		}
		m.ack <- err
	case ctrlShutdown:
		k.beginDrain()
	case ctrlClose:
		k.closeAll()
	case ctrlClaimBudget:
		m.count <- k.claimBudget(m.hungry)
	case ctrlClaimed:
		k.claimed(m.claim.tasks, m.claim.reserved)
	case ctrlStartBudget:
		m.count <- k.startBudget(m.want)
	case ctrlPrestarted:
		k.prestarted(m.prestart)
	case ctrlLeaseLapse:
		k.leaseLapsed()
	case ctrlPoolEnded:
		k.poolEnded(m.claim.tasks)
	case ctrlStarted:
		k.ungate(m.as)
		k.abortGated(m.refused, m.errs)
	case ctrlEvict:
		if k.evictNewestLow() {
			m.ack <- nil
		} else {
			m.ack <- ErrQueueFull
		}
	case ctrlRecover:
		if k.ls.draining || k.ls.closing {
			for _, h := range m.hs {
				k.abortDurable(h)
			}
			return
		}
		for _, h := range m.hs {
			k.index(h)
			k.ls.backlog[h.bucket] = append(k.ls.backlog[h.bucket], h)
		}
	case ctrlCancelID:
		m.count <- k.cancelID(m.id)
	}
}
