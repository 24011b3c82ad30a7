package mysqlstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// The history column holds a task's attempt records (store.StoredTask.History),
// oldest first, each as historySep and six fields separated by historyField: the
// attempt's number, its start and end (unix ms; the start empty when unknown), its
// outcome's state code, its owner and its error text. A change appends its record
// in SQL, in the same write as the rest of the change, and keeps the last
// Options.AttemptsKept ones with SUBSTRING_INDEX (see keepHistory); no read is
// needed. The last attempt's record is often not there but implicit in the row (see
// implicit below). In the owner and error text, historyEsc, historySep and historyField are
// written as historyEsc and a letter.
const (
	historySep   = "\x1e"
	historyField = "\x1f"
	historyEsc   = "\x1d"
)

var (
	historyEscape   = strings.NewReplacer(historyEsc, historyEsc+"a", historySep, historyEsc+"b", historyField, historyEsc+"c")
	historyUnescape = strings.NewReplacer(historyEsc+"a", historyEsc, historyEsc+"b", historySep, historyEsc+"c", historyField)
)

// encodeAttempt returns a's record as the history column holds it.
func encodeAttempt(a store.Attempt) string {
	a = a.Record()
	var b strings.Builder
	b.Grow(48 + len(a.Owner) + len(a.Error))
	b.WriteString(historySep)
	b.WriteString(strconv.Itoa(a.Number))
	b.WriteString(historyField)
	if !a.Start.IsZero() {
		b.WriteString(strconv.FormatInt(millis(a.Start), 10))
	}
	b.WriteString(historyField)
	b.WriteString(strconv.FormatInt(millis(a.End), 10))
	b.WriteString(historyField)
	b.WriteString(strconv.Itoa(int(stateCode(a.Outcome))))
	b.WriteString(historyField)
	b.WriteString(historyEscape.Replace(a.Owner))
	b.WriteString(historyField)
	b.WriteString(historyEscape.Replace(a.Error))
	return b.String()
}

// decodeHistory returns the records of a history column; malformed records are
// skipped.
func decodeHistory(h []byte) []store.Attempt {
	if len(h) == 0 {
		return nil
	}
	var out []store.Attempt
	for rec := range strings.SplitSeq(string(h), historySep) {
		f := strings.SplitN(rec, historyField, 6)
		if len(f) != 6 {
			continue
		}
		n, err1 := strconv.Atoi(f[0])
		end, err2 := strconv.ParseInt(f[2], 10, 64)
		code, err3 := strconv.ParseUint(f[3], 10, 8)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		outcome, err := decodeState(uint8(code))
		if err != nil {
			continue
		}
		a := store.Attempt{Number: n, End: fromMillis(end), Outcome: outcome, Owner: historyUnescape.Replace(f[4]), Error: store.Truncate(historyUnescape.Replace(f[5]), store.AttemptErrorMax)}
		if start, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			a.Start = fromMillis(start)
		}
		out = append(out, a)
	}
	return out
}

// keepHistory returns the SQL expression of the history column with the records of
// expr (an SQL expression of encoded records) appended, the last keep kept.
func keepHistory(expr string, keep int) string {
	return "SUBSTRING_INDEX(CONCAT(COALESCE(history, ''), " + expr + "), X'1E', -" + strconv.Itoa(keep) + ")"
}

// lastRecords returns the last keep records of encoded records h, as keepHistory
// does in SQL.
func lastRecords(h string, keep int) string {
	for i, n := len(h)-1, 0; i >= 0; i-- {
		if h[i] == historySep[0] {
			if n++; n == keep {
				return h[i+1:]
			}
		}
	}
	return h
}

// The record of a task's last attempt is implicit when the row holds it already: a
// change that ends an attempt with a record that its own write reproduces (number =
// attempt, outcome = state, error = last_error, or none for a success, end =
// updated_at, owner = the batch's owner name) writes only the record's start, as
// started_at (unix ms, 0: no implicit record), and the owner name, as last_owner: the
// same values for the ends of a batch's tasks started together. Its other records, and every
// record of a retry or of a start (an interrupted attempt), are appended to history.
// So the task that succeeds at its first attempt writes no history, and the ends of
// tasks started together (the kernel's record Start is its OpStart's UpdatedAt) share
// all their values: one UPDATE … WHERE id IN (…), without a CASE. Reads append the
// implicit record to the stored ones (withImplicit); Requeue moves it into history
// (requeueHistory).

// implicit reports whether the record c carries is the row's implicit one once c
// applied (r.state, r.lastError and r.updatedAt are c's), for a batch of owner.
func (r *row) implicit(c *store.Change, owner string) bool {
	a := c.Attempt.Record()
	switch {
	case c.Op == store.OpStart || c.Op == store.OpRetry || a.Start.UnixMilli() <= 0, a.Outcome != r.state,
		a.Owner != owner, r.attempt > 0 && a.Number != r.attempt, !a.End.Equal(msTime(r.updatedAt)):
		return false
	case r.state == store.Succeeded:
		return a.Error == ""
	}
	return r.setLastError && a.Error == store.Truncate(r.lastError, store.AttemptErrorMax)
}

func msTime(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// withImplicit appends to t.History the implicit record of a terminal row whose
// started_at is startedAt and whose owner is named owner, keeping the last keep.
func withImplicit(t *store.StoredTask, startedAt int64, owner string, keep int) {
	if startedAt == 0 || t.State.Live() {
		return
	}
	a := store.Attempt{Number: t.Attempt, Start: fromMillis(startedAt), End: t.UpdatedAt, Outcome: t.State, Owner: strings.TrimRight(owner, "\x00")}
	if t.State != store.Succeeded {
		a.Error = t.LastError
	}
	t.History = store.AppendAttempt(t.History, a, keep)
}

// implicitColumns are the columns a read of history selects after it, for
// withImplicit.
func (s *Store) implicitColumns() string {
	return ", started_at, last_owner"
}

// requeueHistory returns the assignments of an UPDATE that moves a terminal row's
// implicit record into its history (before the UPDATE changes attempt, state,
// last_error, updated_at or owner: assignments run left to right).
func (s *Store) requeueHistory() string {
	esc := func(x string) string {
		return "REPLACE(REPLACE(REPLACE(" + x + ", X'1D', X'1D61'), X'1E', X'1D62'), X'1F', X'1D63')"
	}
	rec := "CONCAT(X'1E', attempt, X'1F', started_at, X'1F', updated_at, X'1F', state, X'1F', " +
		esc("TRIM(TRAILING X'00' FROM last_owner)") + ", X'1F', " +
		esc("IF(state = "+strconv.Itoa(int(stateCode(store.Succeeded)))+", '', last_error)") + ")"
	keep := s.opts.AttemptsKept
	if keep < 0 {
		return "started_at = 0, "
	}
	return "history = IF(started_at <> 0 AND state > " + liveMaxCode + ", " + keepHistory(rec, keep) + ", history), started_at = 0, "
}
