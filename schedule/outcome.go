package schedule

import (
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/kernel"
)

// Outcome says how a schedule's last occurrence went ([LastOutcome]).
type Outcome uint8

// The outcomes of a schedule's last occurrence.
const (
	// OutcomeNone: nothing yet; no occurrence fired, misfired, was skipped or was
	// refused.
	OutcomeNone Outcome = iota
	// OutcomeRunning: the last occurrence's task was submitted and has not ended
	// (it may be queued, delayed by its group, running or waiting for a retry).
	OutcomeRunning
	// OutcomeSucceeded: the last occurrence's task succeeded.
	OutcomeSucceeded
	// OutcomeFailed: the last occurrence's task failed after its retries, timed
	// out, was evicted or abandoned; LastOutcome.Err says how.
	OutcomeFailed
	// OutcomeCanceled: the last occurrence's task was canceled (by
	// [kernel.Handle.Cancel], OverlapReplace or the kernel's Close).
	OutcomeCanceled
	// OutcomeMisfired: targets did not fire because they were late (the misfire
	// policy), or the schedule ended because its Spec panicked or did not move
	// forward (LastOutcome.Err says which).
	OutcomeMisfired
	// OutcomeSkipped: an occurrence was not submitted because an earlier one was
	// live (the overlap policy).
	OutcomeSkipped
	// OutcomeRefused: the kernel had no room for an occurrence, or a durable
	// schedule's store call failed; LastOutcome.Err says why.
	OutcomeRefused
	// OutcomeSubmitted: a durable schedule's occurrence was stored in the pool. Its
	// task is a durable task, which carries no end callback and may run on any
	// kernel on the store: its end is not known to the scheduler (the store's task
	// row, ID [store.OccurrenceID] of the schedule and LastOutcome.At, tells it).
	OutcomeSubmitted
)

// String returns the outcome's name: "none", "running", "succeeded", "failed",
// "canceled", "misfired", "skipped", "refused" or "submitted".
func (o Outcome) String() string {
	switch o {
	case OutcomeNone:
		return "none"
	case OutcomeRunning:
		return "running"
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeFailed:
		return "failed"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeMisfired:
		return "misfired"
	case OutcomeSkipped:
		return "skipped"
	case OutcomeRefused:
		return "refused"
	case OutcomeSubmitted:
		return "submitted"
	default:
		return "outcome(?)"
	}
}

// ErrTextMax is the most bytes of an error's text that LastOutcome.Err keeps; a
// longer text is cut there (at a rune's start when the text is UTF-8) and ends
// with "…".
const ErrTextMax = 1024

// LastOutcome is a schedule's last outcome ([Entry.Last], Stats.Outcome): the
// latest of these events: an occurrence submitted (OutcomeRunning, or
// OutcomeSubmitted for a durable schedule), the end of the last occurrence
// submitted (the end of an earlier occurrence that ends after it is not one), and
// targets that misfired, were skipped or refused.
//
// The scheduler learns the last occurrence's end from the Handle it holds anyway
// while the occurrence is live (OverlapSkip, OverlapReplace: the next fire drops
// it), or from its task's [kernel.Task.OnEnd] (OverlapQueueOne, OverlapAllow,
// which keeps no Handle). It keeps no Handle for the outcome: a schedule's record
// holds it in a byte and a bit, and an error's text only while the outcome has
// one.
type LastOutcome struct {
	Outcome Outcome
	// At is, for an occurrence submitted or ended, its target (Fire.Scheduled;
	// Stats.Last); for a misfire, a skip or a refusal, the time the scheduler
	// counted it, on the kernel's clock. Zero with OutcomeNone.
	At time.Time
	// Err is the error's text of OutcomeFailed, OutcomeRefused and of an
	// OutcomeMisfired that ended the schedule, at most ErrTextMax bytes and "…";
	// empty otherwise.
	Err string
}

// Last returns the schedule's last outcome.
func (e *Entry) Last() LastOutcome {
	s := e.o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.lastLocked()
}

// lastLocked returns e's last outcome. mu held.
func (e *Entry) lastLocked() LastOutcome {
	e.settle()
	l := LastOutcome{Outcome: e.out}
	switch e.out {
	case OutcomeNone:
	case OutcomeMisfired, OutcomeSkipped, OutcomeRefused:
		l.At = time.Unix(0, e.cold.outAt)
	default:
		l.At = time.Unix(0, e.last)
	}
	if e.cold != nil {
		l.Err = e.cold.outErr
	}
	return l
}

// outcome records e's last outcome o, with err's text when err is not nil. A
// misfire, a skip or a refusal is stamped with the clock's time. mu held.
func (s *Scheduler) outcome(e *Entry, o Outcome, err error) {
	switch o {
	case OutcomeMisfired, OutcomeSkipped, OutcomeRefused:
		e.settle() // an end that came before o is not recorded after it
		coldOf(e).outAt = s.clk.Now().UnixNano()
	}
	e.out = o
	if err != nil {
		coldOf(e).outErr = errText(err)
	} else if e.cold != nil {
		e.cold.outErr = ""
	}
}

// ended records the end of e's occurrence number n (its e.fires when it was
// submitted) in state st with err: only the last occurrence's end is an outcome,
// recorded once (flagEnded). mu held.
func (s *Scheduler) ended(e *Entry, n uint64, st kernel.State, err error) {
	if n == e.fires && e.flags&flagEnded == 0 {
		e.endOf(st, err)
	}
}

// settle records the end of e's last occurrence when its task ended and the end
// is not recorded yet, read from the occurrence's Handle (the live occurrences of
// OverlapSkip, OverlapReplace and OverlapQueueOne). mu held.
func (e *Entry) settle() {
	if e.flags&flagEnded != 0 {
		return
	}
	var oc *occurrence
	if e.live1 != nil {
		oc = e.live1
	} else if c := e.cold; c != nil && len(c.live) > 0 {
		oc = c.live[len(c.live)-1]
	}
	if oc == nil || oc.n != e.fires || oc.h == nil {
		return
	}
	st := oc.h.State()
	if !st.Terminal() {
		return
	}
	// The state is stored before the error: an end but a success has an error.
	if err := oc.h.Err(); err != nil || st == kernel.Succeeded {
		e.endOf(st, err)
	}
}

// endOf records the last occurrence's end in state st with err. mu held.
func (e *Entry) endOf(st kernel.State, err error) {
	e.flags |= flagEnded
	switch st {
	case kernel.Succeeded:
		e.out = OutcomeSucceeded
		err = nil
	case kernel.Canceled:
		e.out = OutcomeCanceled
		err = nil
	default:
		e.out = OutcomeFailed
	}
	if err != nil {
		coldOf(e).outErr = errText(err)
	} else if e.cold != nil {
		e.cold.outErr = ""
	}
}

// errText returns err's text, at most ErrTextMax bytes and "…".
func errText(err error) string {
	t := err.Error()
	if len(t) <= ErrTextMax {
		return t
	}
	n := ErrTextMax
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(t[n]); i++ {
		n--
	}
	return t[:n] + "…"
}
