package kernel

// ctrlKind is the kind of a control message.
type ctrlKind uint8

const (
	ctrlCancel      ctrlKind = iota + 1 // cancel one task (h)
	ctrlCancelBatch                     // cancel a batch's members (b)
	ctrlCancelID                        // cancel the live tasks of an ID (id); acks the count
	ctrlUpdate                          // apply a new resolved config (rc), answer on ack
	ctrlShutdown                        // drain and stop
	ctrlClose                           // stop now
	ctrlDurable                         // a message of the durable seam (dur; see owner.go)
	ctrlEvict                           // evict the newest queued Low task for a High submitter, answer on ack
	ctrlPause                           // pause (pause) or resume the work of sel, answer on ack
	ctrlRunNowID                        // make the waiting tasks of an ID due (id); acks the count, -1 for none
)

// ctrlMsg is a message from the API to the loop.
type ctrlMsg struct {
	kind  ctrlKind
	h     *Handle
	b     *Batch
	rc    *resolved
	dur   *durMsg
	id    string
	sel   Selector   // ctrlPause
	pause bool       // ctrlPause: pause rather than resume
	ack   chan error // size 1
	count chan int   // size 1
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
