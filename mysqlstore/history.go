package mysqlstore

import (
	"strconv"
	"strings"

	"github.com/axsched/ax/store"
)

// The history column holds a task's attempt records (store.StoredTask.History),
// oldest first, each as historySep and six fields separated by historyField: the
// attempt's number, its start and end (unix ms; the start empty when unknown), its
// outcome's state code, its owner and its error text. An end appends its record in
// SQL, in the same write as the rest of the change, and keeps the last
// Options.AttemptsKept ones with SUBSTRING_INDEX (see keepHistory); no read is
// needed. In the owner and error text, historyEsc, historySep and historyField are
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
		a := store.Attempt{Number: n, End: fromMillis(end), Outcome: outcome, Owner: historyUnescape.Replace(f[4]), Error: historyUnescape.Replace(f[5])}
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
