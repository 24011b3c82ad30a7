package store

import (
	"time"
	"unicode/utf8"
)

// Attempt is one ended attempt of a task, as [StoredTask.History] keeps it.
//
// A change that ends an attempt carries its record in [Change.Attempt]: [OpRetry],
// [OpSucceed], [OpFail] and [OpCancel] for the attempt they end, and [OpStart] for an
// attempt of the task that a crash interrupted (the store held the task Running). A
// store appends the record to the task's history in the same write as the change, when
// the change applies (not when it is refused, nor when it finds itself already
// applied), and keeps the most recent records only: at least [AttemptsKeptDefault]
// unless the store is configured otherwise.
type Attempt struct {
	// Number is the attempt's number, 1 for the first. Zero means no record: a
	// [Change] whose Attempt.Number is 0 appends nothing.
	Number int
	// Start is when the attempt started (the UpdatedAt of its [OpStart]); the zero
	// time when it is not known.
	Start time.Time
	// End is when it ended; for an interrupted attempt, when its interruption was
	// found.
	End time.Time
	// Outcome is how it ended: Succeeded, Failed (it returned an error or panicked),
	// TimedOut, Canceled, Evicted, or Abandoned (interrupted: its process stopped or
	// lost the task while it ran).
	Outcome State
	// Error is the attempt's error text, at most [AttemptErrorMax] bytes (a store
	// truncates a longer one at a UTF-8 boundary); empty for a success.
	Error string
	// Owner names the kernel that ran it (its owner name with a [SharedStore]), at
	// most [OwnerNameMax] bytes; empty when not known.
	Owner string
}

// Limits of results and attempt records. A change beyond ResultMax is refused with
// [ErrInvalidChange]; a longer Attempt.Error is truncated, and so is an Attempt.Owner
// longer than [OwnerNameMax].
const (
	// ResultMax is the largest [StoredTask.Result] any store accepts, in bytes; a
	// store may accept less (see [ResultLimiter]).
	ResultMax = 1 << 20
	// AttemptErrorMax is the longest Attempt.Error kept, in bytes.
	AttemptErrorMax = 512
	// AttemptsKeptDefault is how many attempt records per task a store keeps unless
	// configured otherwise: the most recent ones.
	AttemptsKeptDefault = 5
)

// ResultLimiter is implemented by a [Store] that accepts results smaller than
// [ResultMax]. A kernel refuses a larger result when its task's function sets it,
// so that the change that ends the task is never refused for its result.
type ResultLimiter interface {
	// MaxResult returns the largest result the store accepts, in bytes, between 0
	// and [ResultMax]. It does not block.
	MaxResult() int
}

// Truncate returns s cut to at most max bytes at a UTF-8 boundary: a rune that
// would be cut in two is dropped whole.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Record returns a's record as a store keeps it: Start and End truncated to the
// millisecond (monotonic reading dropped), Error and Owner to their limits.
func (a Attempt) Record() Attempt {
	a.Start, a.End = msTime(a.Start), msTime(a.End)
	a.Error = Truncate(a.Error, AttemptErrorMax)
	a.Owner = Truncate(a.Owner, OwnerNameMax)
	return a
}

// AppendAttempt returns history with a appended, keeping the most recent keep
// records (keep <= 0: [AttemptsKeptDefault]). It may modify history's array.
func AppendAttempt(history []Attempt, a Attempt, keep int) []Attempt {
	if keep <= 0 {
		keep = AttemptsKeptDefault
	}
	history = append(history, a.Record())
	if n := len(history) - keep; n > 0 {
		history = append(history[:0], history[n:]...)
	}
	return history
}

func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli())
}

// validAttempt reports what is wrong with c's attempt record, or "".
func validAttempt(c *Change) (field, reason string) {
	a := &c.Attempt
	switch {
	case a.Number == 0:
		return "", ""
	case c.Op == OpInsert:
		return "Attempt", "is not for OpInsert"
	case a.Number < 0:
		return "Attempt.Number", "must be >= 0"
	case !a.Outcome.Terminal():
		return "Attempt.Outcome", "must be a terminal state"
	}
	return "", ""
}
